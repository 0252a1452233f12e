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
"""

from __future__ import annotations

from collections.abc import Sequence

import scipy.sparse as sp
import torch

from gridgnn.grid.comm import Communicator
from gridgnn.grid.process_grid import ProcessGrid
from gridgnn.sparse.csr import SparseBlock, index_dtype_for
from gridgnn.sparse.cut import cut_panels
from gridgnn.spmm.attention_15d import Stages15D
from gridgnn.spmm.base import DistributedSpMM


class SpMM15D(DistributedSpMM):
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
        layout = self.stage_layout()
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

    def _rows(self, j: int) -> int:
        return self.bounds[j + 1] - self.bounds[j]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """X[i] (n_i x f) -> Y[i] (n_i x f). Collective on ``row`` (stages) then ``rep`` (all-reduce).

        With overlap the broadcast of stage j + 1 is in flight while stage j multiplies.
        """
        out = x.new_zeros(x.shape)

        def issue(j: int):
            held = x if j == self.i else x.new_empty((self._rows(j), x.shape[1]))
            return self.comm.broadcast_async(held, "row", root=j)

        for j, held in self.comm.pipeline(self.share, issue):
            if self.blocks[j].nnz:
                self.blocks[j].matmul_add(held, out)
        if self.replication > 1:
            self.comm.all_reduce(out, "rep")
        return out

    def backward(self, grad_y: torch.Tensor) -> torch.Tensor:
        """G[i] (n_i x f) -> dX[i] (n_i x f). Collective on ``row`` (reduces) then ``rep`` (broadcast).

        With overlap the reduce of stage j runs while stage j + 1 multiplies.
        """
        grad_x = None
        with self.comm.in_flight() as flight:
            for j in self.share:
                part = self.blocks[j].t_matmul(grad_y)
                flight.add(self.comm.reduce_async(part, "row", root=j))
                if j == self.i:
                    grad_x = part  # complete once the reduce is waited for (at the latest, leaving the block)
        if self.replication > 1:
            if grad_x is None:
                grad_x = grad_y.new_empty(grad_y.shape)
            self.comm.broadcast(grad_x, "rep", root=self.i % self.replication)
        return grad_x

    def attention_stages(self):
        """The `gridgnn.spmm.attention.AttentionStages` of this rank (its tiles' patterns built once)."""
        if self._attention is None:
            self._attention = Stages15D(self)
        return self._attention
