"""Per-stage sparse exchanges of X rows on the ``row`` axis: the X half of a sparse SUMMA stage (2D and 3D).

Dense SUMMA broadcasts the whole X panel of stage s (rows ``[a, b)``, this process's feature columns) from
the stage's root down the process column. Sparse SUMMA sends each receiver only the rows its Â panel of the
stage touches (`gridgnn.cost.sparse_stages`), as one all-to-all per stage in which only the root sends; in
backward the receivers send those rows of ``Â[·, a:b]ᵀ G`` back and the root adds them (``index_add``). A
receiver's panel is zero outside its touched rows, which its Â panel never reads.
"""

from __future__ import annotations

import numpy as np
import torch

from gridgnn.grid.comm import Communicator
from gridgnn.grid.overlap import Pending
from gridgnn.spmm.row_exchange import exchange_wanted


class StageRows:
    """The index sets of every stage on one process; built once (collective on ``row``: the index exchange).

    ``segments[s] = (a, b)``: global rows of stage s; ``roots[s]``: the ``row`` coordinate holding them;
    ``wanted[s]``: global ids (sorted int64) this process's Â panel touches, for every stage it does not root.
    """

    def __init__(self, comm: Communicator, segments: list[tuple[int, int]], roots: list[int],
                 wanted: dict[int, np.ndarray]):
        self.comm, self.segments, self.roots = comm, segments, roots
        size, self.me = comm.grid.size("row"), comm.grid.index("row")
        device = comm.grid.device
        per_root = [[] for _ in range(size)]
        for s in range(len(segments)):
            if roots[s] != self.me:
                per_root[roots[s]].append(wanted[s])
        flat = [np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64) for ids in per_root]
        asked = exchange_wanted(comm, "row", flat)
        self.none = [0] * size
        self.send_index, self.send_rows, self.recv_index, self.recv_rows = {}, {}, {}, {}
        mine = [s for s in range(len(segments)) if roots[s] == self.me]
        starts = np.array([segments[s][0] for s in mine], dtype=np.int64)
        which = [np.searchsorted(starts, ids, side="right") - 1 for ids in asked]
        for position, s in enumerate(mine):
            parts = [ids[w == position] - segments[s][0] for ids, w in zip(asked, which, strict=True)]
            self.send_rows[s] = [len(p) for p in parts]
            self.send_index[s] = torch.from_numpy(np.concatenate(parts).astype(np.int64)).to(device)
        for s, ids in wanted.items():
            self.recv_rows[s] = [len(ids) if p == roots[s] else 0 for p in range(size)]
            self.recv_index[s] = torch.from_numpy((ids - segments[s][0]).astype(np.int64)).to(device)

    def row_counts(self) -> np.ndarray:
        """(row processes, stages) int64: the rows this process receives of each stage it does not root (in its
        own row) and, for each stage it roots, the rows each peer receives from it (in the peers' rows): what
        `gridgnn.cost.spmm_plan.carried_by_rows` reads of this process. Not collective."""
        counts = np.zeros((len(self.none), len(self.segments)), dtype=np.int64)
        for s, rows in self.recv_rows.items():
            counts[self.me, s] = rows[self.roots[s]]
        for s, rows in self.send_rows.items():
            counts[:, s] = rows
        return counts

    def gather_async(self, s: int, own: torch.Tensor | None, width: int, like: torch.Tensor) -> Pending:
        """Forward stage s (collective on ``row``): the root passes its (b - a, width) rows ``own``; every
        process gets a (b - a, width) panel, exact on the rows its Â panel touches, zero elsewhere."""
        a, b = self.segments[s]
        if self.roots[s] == self.me:
            return self.comm.all_to_all_async(own[self.send_index[s]], self.send_rows[s], self.none, "row",
                                              then=lambda _: own)
        index = self.recv_index[s]

        def fill(received: torch.Tensor) -> torch.Tensor:
            panel = like.new_zeros((b - a, width))
            panel[index] = received
            return panel

        return self.comm.all_to_all_async(like.new_empty((0, width)), self.none, self.recv_rows[s], "row",
                                          then=fill)

    def reduce_async(self, s: int, part: torch.Tensor) -> Pending:
        """Backward stage s (collective on ``row``): the sum over the group of every process's (b - a, f)
        ``part`` lands in the root's ``part`` (in place) once waited for; only touched rows travel."""
        width = part.shape[1]
        if self.roots[s] == self.me:
            index = self.send_index[s]
            return self.comm.all_to_all_async(part.new_empty((0, width)), self.none, self.send_rows[s], "row",
                                              then=lambda received: part.index_add_(0, index, received))
        return self.comm.all_to_all_async(part[self.recv_index[s]], self.recv_rows[s], self.none, "row")
