"""1D and 1.5D SpMM: block-row Â, broadcast stages within a layer, replica all-reduce (docs/architecture.md §2).

Grid ``R x c`` (axes ``row`` of size R = P / c and ``rep`` of size c; 1D is ``c = 1`` on a grid with the
``row`` axis only). Process (i, k) is replica k of block row i. Vertex blocks follow ``block_bounds(n, R)``,
or a METIS reordering's R parts (`gridgnn.cost.stages`).

Layout (DTensor words, the same for X, Y, dX, dY): ``Shard(0)`` on ``row``, ``Replicate()`` on ``rep``; all
feature columns on every process. For P = 4, c = 2:

=====  ======  =============================  ==========================
rank   (i, k)  dense rows                     Â blocks kept
=====  ======  =============================  ==========================
0      (0, 0)  block 0                        Â[0, 0]
1      (0, 1)  block 0                        Â[0, 1]
2      (1, 0)  block 1                        Â[1, 0]
3      (1, 1)  block 1                        Â[1, 1]
=====  ======  =============================  ==========================

Replica k handles the column blocks ``j ≡ k (mod c)`` (its *share*) and keeps only those Â[i, j] (CAGNET
keeps all of them). Forward: for each j in the share, process (j, k) broadcasts X[j] on ``row`` (the P / c
processes of layer k) and everyone adds Â[i, j] X[j]; an all-reduce on ``rep`` sums the c partial products.
Backward (Âᵀ, no symmetry assumed): for each j in the share, Â[i, j]ᵀ G[i] is reduced on ``row`` to process
(j, k); the finished dX[j] lives on replica ``j mod c`` and is broadcast on ``rep`` to the other replicas.
Those collectives are the plan of `gridgnn.cost.algorithms.rows.schedule`, run by `gridgnn.spmm.staged`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
import torch

from gridgnn.cost.terms import PlannedStage
from gridgnn.grid.comm import Communicator
from gridgnn.grid.overlap import Ready
from gridgnn.grid.process_grid import ProcessGrid
from gridgnn.sparse.csr import SparseBlock, index_dtype_for
from gridgnn.sparse.cut import cut_panels
from gridgnn.spmm.attention_15d import Stages15D
from gridgnn.spmm.staged import StagedSpMM


class SpMM15D(StagedSpMM):
    """1.5D (and, with ``c = 1``, 1D) SpMM on an ``R x c`` grid. Built once from the global Â."""

    def __init__(self, grid: ProcessGrid, comm: Communicator, adj: sp.csr_matrix, *,
                 dtype: torch.dtype = torch.float32, parts: Sequence[int] | None = None):
        super().__init__(grid, comm, adj.shape[0], parts)
        self._place(grid)
        index_dtype = index_dtype_for(self.num_nodes, adj.nnz)
        column_blocks = list(zip(self.bounds[:-1], self.bounds[1:], strict=True))
        _, kept = cut_panels(adj, self.row_range, column_blocks, self.share)
        self.blocks = {
            j: SparseBlock.from_scipy(kept.pop(j), index_dtype=index_dtype, dtype=dtype, device=grid.device)
            for j in self.share
        }
        self._attention = None

    def _place(self, grid: ProcessGrid) -> None:
        """This rank's place on the ``R x c`` grid: ``replication`` c, the row blocks' ``bounds``, its row block
        ``i``, its replica ``k`` and the column blocks replica k handles (``share``: stage j is block j's X rows,
        rooted at row coordinate j). Not collective."""
        self.replication = grid.shape.replication
        self.layout = layout = self.stage_layout()
        self.bounds = layout.row_bounds
        self.i = grid.index("row")
        self.k = grid.index("rep") if self.replication > 1 else 0
        self.share = layout.handled_by(self.k)

    @property
    def stored_nnz(self) -> int:
        """Non-zeros of Â this rank keeps (each stored value is kept by exactly one rank)."""
        return sum(block.nnz for block in self.blocks.values())

    @property
    def row_range(self) -> tuple[int, int]:
        return self.bounds[self.i], self.bounds[self.i + 1]

    def _row_nnz(self) -> np.ndarray:
        """(row blocks,) entries of the kept blocks Â[i, j] (0 outside the share)."""
        nnz = np.zeros(len(self.bounds) - 1, dtype=np.int64)
        for j, block in self.blocks.items():
            nnz[j] = block.nnz
        return nnz

    def _finish(self, block: torch.Tensor, backward: bool) -> torch.Tensor:
        """The ``after`` moves on ``rep`` of this rank's plan on its finished block row: the replica sum of Y[i]
        (forward) or dX[i] from replica i mod c (backward); for the variants that run their one row exchange
        themselves (``--comm sparse``, ``cover``: the plan's all-to-all on ``row``). Collective on ``rep``."""
        for move in self.planned(block.shape[1], backward).after:
            if move.axis == "rep":
                block = self._run_whole(move, block)
        return block

    def _operand(self, stage: PlannedStage, transpose: bool) -> Ready | None:
        """The kept block Â[i, j] of stage j (or its transpose); nothing moves."""
        if not stage.entries:
            return None
        block = self.blocks[stage.segment]
        return Ready(block.transposed() if transpose else block)

    def attention_stages(self):
        """The `gridgnn.spmm.attention.AttentionStages` of this rank (its tiles' patterns built once)."""
        if self._attention is None:
            self._attention = Stages15D(self)
        return self._attention
