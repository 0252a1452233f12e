"""Sparse 3D's depth exchange (``--comm sparse`` on a ``q x q x d`` grid): only the rows a slice makes non-zero.

Dense Split-3D (`gridgnn.spmm.spmm_3d`) sums the d depth slices' partial products of block i with a
reduce-scatter on ``depth`` and, in backward, rebuilds G[i, j] with an all-gather. Slice l's partial product
``Σ_k Â[i, S[k][l]] X[S[k][l], j]`` is non-zero only on the rows of block i that have an entry in slice l's
columns (the sub-blocks S[k][l] of every k), so sparse 3D moves only those rows, as one all-to-all per SpMM
half on ``depth`` (`gridgnn.cost.sparse_stages.slice_pairs` gives the index sets; every process of the depth
group computes them alike from Â's rows of block i, so nothing is exchanged at set-up):

- forward, (i, j, l) sends to (i, j, m) the rows of S[i][m] its partial makes non-zero; (i, j, m) adds what
  it receives to its own rows (``index_add``);
- backward, (i, j, m) sends to (i, j, l) the rows of its G[S[i][m], j] that slice l's products read (the same
  sets, the other way); the rest of the gathered G stays zero, which slice l's panels never read.

For a block of rows [0, 8) in d = 2 sub-blocks [0, 4), [4, 8), where slice 0 touches rows {0, 1, 5} and slice
1 rows {2, 5, 6}: forward, slice 0 sends row 5 to slice 1 and slice 1 sends row 2 to slice 0; backward,
slice 0 sends row 2 to slice 1 and slice 1 sends row 5 to slice 0.
"""

from __future__ import annotations

import numpy as np
import torch

from gridgnn.cost.sparse_stages import slice_pairs
from gridgnn.grid.comm import Communicator


class DepthRows:
    """The index sets of one process's depth exchange; built once (not collective: computed from Â's rows).

    ``rows``: the global rows of block i; ``sub``: the global bounds of its d sub-blocks S[i][·];
    ``segments``: every segment of the grid (segment ``k * d + l`` is S[k][l]).
    """

    def __init__(self, comm: Communicator, adj, rows: tuple[int, int], sub: list[int], segments: list[int]):
        self.comm = comm
        d, me = comm.grid.size("depth"), comm.grid.index("depth")
        pairs = slice_pairs(adj.indptr, adj.indices, rows, segments, d)
        row, touched_slice = pairs // d - rows[0], pairs % d  # rows relative to the block
        starts = np.asarray(sub) - rows[0]

        def touching(m: int, slice_: int) -> np.ndarray:
            """Offsets in the block of the rows of S[i][m] that slice ``slice_`` makes non-zero."""
            return row[(touched_slice == slice_) & (row >= starts[m]) & (row < starts[m + 1])]

        peers = [p for p in range(d) if p != me]
        mine = [touching(me, p) for p in peers]  # rows of my sub-block each peer's partial makes non-zero
        theirs = [touching(p, me) for p in peers]  # rows of each peer's sub-block my partial makes non-zero
        device = comm.grid.device
        self.own = (int(starts[me]), int(starts[me + 1]))
        self.mine = torch.from_numpy(np.concatenate([np.zeros(0, dtype=np.int64), *mine]) - starts[me]).to(device)
        self.theirs = torch.from_numpy(np.concatenate([np.zeros(0, dtype=np.int64), *theirs])).to(device)
        self.mine_rows = self._per_process([len(x) for x in mine], me)
        self.theirs_rows = self._per_process([len(x) for x in theirs], me)
        self.height = rows[1] - rows[0]

    def slice_counts(self) -> np.ndarray:
        """(d, d) int64, entry [m, l]: rows of sub-block S[i][m] that slice l makes non-zero, where this process is
        m or l (the rows it receives forward, its own row; backward, its own column): what
        `gridgnn.cost.spmm_plan.carried_by_depth` reads of this process's block. Not collective."""
        d, me = len(self.mine_rows), self.comm.grid.index("depth")
        counts = np.zeros((d, d), dtype=np.int64)
        counts[me, :] = self.mine_rows
        counts[:, me] = self.theirs_rows
        return counts

    @staticmethod
    def _per_process(counts: list[int], me: int) -> list[int]:
        """``counts`` of the peers with a 0 for this process, in group order."""
        return counts[:me] + [0] + counts[me:]

    def sum_partials(self, partial: torch.Tensor) -> torch.Tensor:
        """(n_i, f) partial product of this slice -> (|S[i][m]|, f): the sum of every slice's rows of this
        process's sub-block. Collective on ``depth``."""
        received = self.comm.all_to_all(partial[self.theirs], self.theirs_rows, self.mine_rows, "depth")
        own = partial[self.own[0]:self.own[1]].clone()
        return own.index_add_(0, self.mine, received)

    def gather_rows(self, grad: torch.Tensor) -> torch.Tensor:
        """(|S[i][m]|, f) gradient rows of this sub-block -> (n_i, f): block i's rows that this slice's products
        read (others zero). Collective on ``depth``."""
        received = self.comm.all_to_all(grad[self.mine], self.mine_rows, self.theirs_rows, "depth")
        full = grad.new_zeros((self.height, grad.shape[1]))
        full[self.own[0]:self.own[1]] = grad
        full[self.theirs] = received
        return full
