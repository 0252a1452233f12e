"""Sparse 1D and 1.5D SpMM (``--comm sparse``): each process receives only the rows of X its Â block touches.

Same grid, layout and Â blocks as `gridgnn.spmm.spmm_15d` (read its table). What changes is how the rows of
X[j] reach process (i, k) for the column blocks j of replica k's share:

- set-up: (i, k) computes the columns of Â[i, j] with a stored entry (`gridgnn.cost.sparse_stages`) and
  tells (j, k) which rows it needs (`gridgnn.spmm.row_exchange.exchange_wanted`, integers, on ``row``).
  The blocks Â[i, j], j != i, are kept as one compact matrix whose columns are those rows, in group order.
- forward: one all-to-all on ``row`` (uneven parts) carries exactly those rows; the own block's product runs
  while it is in flight (overlap); then the replica all-reduce on ``rep`` as in dense 1.5D (kept dense: the
  partial sums T[i] are dense rows, nothing to skip).
- backward (Âᵀ): the compact matrix's transpose times G[i] gives one row per received row; one all-to-all
  on ``row`` returns them to their holders, which add them into dX[j] (``index_add``); the broadcast on
  ``rep`` completes dX on every replica, as in dense 1.5D.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
import torch

from gridgnn.cost.sparse_stages import touched_columns
from gridgnn.cost.spmm_plan import carried_by_rows
from gridgnn.cost.terms import SpMMPlan
from gridgnn.grid.comm import Communicator
from gridgnn.grid.process_grid import ProcessGrid
from gridgnn.sparse.csr import SparseBlock, index_dtype_for
from gridgnn.sparse.cut import cut_panels
from gridgnn.spmm.base import DistributedSpMM
from gridgnn.spmm.row_exchange import RowExchange, pair_counts
from gridgnn.spmm.spmm_15d import SpMM15D


class SparseSpMM15D(SpMM15D):
    """1.5D (and 1D) SpMM that moves only touched rows. Built once from the global Â; collective on ``row``
    at set-up (the index exchange)."""

    def __init__(self, grid: ProcessGrid, comm: Communicator, adj: sp.csr_matrix, *,
                 dtype: torch.dtype = torch.float32, parts: Sequence[int] | None = None):
        DistributedSpMM.__init__(self, grid, comm, adj.shape[0], parts)
        self._place(grid)
        layout = self.stage_layout()
        remote = [j for j in self.share if j != self.i]
        touched = touched_columns(adj, self.row_range, layout.segments, remote)
        wanted = [touched.get(j, np.zeros(0, dtype=np.int64)) for j in range(grid.size("row"))]
        with comm.phase("other"):  # before cutting the blocks: no rank waits for another's cut
            self.exchange = RowExchange(comm, "row", wanted, self.row_range[0])
        index_dtype = index_dtype_for(self.num_nodes, adj.nnz)
        column_blocks = list(zip(self.bounds[:-1], self.bounds[1:], strict=True))
        _, kept = cut_panels(adj, self.row_range, column_blocks, self.share)  # scipy panels, local column ids
        own = kept.pop(self.i, None)
        self.own = None if own is None else SparseBlock.from_scipy(own, index_dtype=index_dtype, dtype=dtype,
                                                                   device=grid.device)
        self.remote = self._compact(remote, kept, touched, index_dtype, dtype)
        self.blocks = {}

    def _compact(self, remote: list[int], kept: dict, touched: dict, index_dtype, dtype) -> SparseBlock | None:
        """Â[i, j] for the remote j, columns restricted to the touched ones, side by side in group order."""
        if not remote:
            return None
        pieces = [kept.pop(j)[:, touched[j] - self.bounds[j]] for j in remote]
        return SparseBlock.from_scipy(sp.hstack(pieces, format="csr"), index_dtype=index_dtype, dtype=dtype,
                                      device=self.grid.device)

    @property
    def stored_nnz(self) -> int:
        return sum(b.nnz for b in (self.own, self.remote) if b is not None)

    def plan(self, width: int, backward: bool) -> SpMMPlan:
        """1.5D's plan with its stages' row moves carried as this process's one all-to-all on ``row``
        (`gridgnn.cost.spmm_plan.carried_by_rows`, merged, with its exchange's counts). Not collective."""
        counts = pair_counts(self.exchange.send_rows, self.exchange.recv_rows, self.i)
        return carried_by_rows(SpMM15D.plan(self, width, backward), self.i, counts, backward, merged=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """X[i] (n_i x f) -> Y[i] (n_i x f). Collective on ``row`` (all-to-all) then ``rep`` (all-reduce)."""
        pending = self.exchange.fetch_async(x)
        if not self.comm.overlap:
            pending.wait()
        out = self.own.matmul(x) if self.own is not None else x.new_zeros(x.shape)
        received = pending.wait()
        if self.remote is not None:
            self.remote.matmul_add(received, out)
        return self._finish(out, backward=False)

    def backward(self, grad_y: torch.Tensor) -> torch.Tensor:
        """G[i] (n_i x f) -> dX[i] (n_i x f). Collective on ``row`` (all-to-all) then ``rep`` (broadcast)."""
        f = grad_y.shape[1]
        part = self.remote.t_matmul(grad_y) if self.remote is not None else grad_y.new_zeros((0, f))
        pending = self.exchange.return_async(part)
        if not self.comm.overlap:
            pending.wait()
        grad_x = self.own.t_matmul(grad_y) if self.own is not None else grad_y.new_zeros(grad_y.shape)
        self.exchange.add_returned(grad_x, pending.wait())
        return self._finish(grad_x, backward=True)
