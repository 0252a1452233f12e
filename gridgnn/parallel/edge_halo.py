"""The edges of one rank's block row, and the rows of their source vertices: message passing on 1D and 1.5D.

A general message ``message(x_i, x_j, e_ij)`` (`gridgnn.nn.message_passing`) is not a product with a matrix, so
it runs where the edges live. On 1D and 1.5D grids process (i, k) holds the rows of block i (its destination
vertices) and every edge into them (all of block row i of the operator's pattern), with their edge features.
Its edges read the rows of their source vertices: its own, and the *halo*, the rows of other blocks its
block row touches (the same index sets as sparse communication, `gridgnn.cost.sparse_stages.touched_columns`).

=========  ============================================================================================
when       what moves (collective on ``row``; the replicas of 1.5D each run their own group)
=========  ============================================================================================
set-up     the ids each process needs, told to their holders (`gridgnn.spmm.row_exchange.RowExchange`,
           phase ``other``: two all-to-alls of int64)
forward    one all-to-all of the halo rows (phase ``spmm_forward``), then every message is local
backward   the halo rows' gradients back to their holders (one all-to-all, phase ``spmm_backward``), added
           into their rows' gradient (``index_add``); none when the input needs no gradient
=========  ============================================================================================

On 2D, process (i, j) holds rows of block i in feature columns j: it runs all of block row i's edges (the
edges and their features are replicated on the grid row) on its columns, and the halo moves on ``row`` among
the processes of column block j, as on 1D; only a message separable over feature columns runs there
(`gridgnn.nn.message_passing.MessagePassing.column_separable`).

Every replica of a 1.5D block row runs all of the block row's edges (it does not split them by share as the
SpMM does): a message with parameters then leaves equal gradients on every replica, which the trainer's
reduction on ``row`` expects, and ``max`` sees every edge of a row. The cost is 1D's exchange in each replica
group (`gridgnn.cost.halo_cost`).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from gridgnn.cost.sparse_stages import touched_columns
from gridgnn.data.edge_features import block_rows, entry_rows
from gridgnn.grid.comm import Communicator
from gridgnn.nn.message_passing import EdgeSet
from gridgnn.spmm.row_exchange import RowExchange


class EdgeHalo:
    """Block row i of the operator's pattern as an `EdgeSet`, and its halo exchange. Built once per run:
    collective on ``row`` (the index exchange, phase ``other``).

    ``adj``: the global operator (CSR-like, n x n; memory-mapped allowed), ``bounds``: the row blocks' bounds
    (R + 1,), ``edge_attr``: (nnz, d) aligned with ``adj``'s entries (memory-mapped allowed) or None."""

    def __init__(self, comm: Communicator, adj, bounds: list[int], edge_attr=None):
        self.comm, self.bounds = comm, list(bounds)
        grid = comm.grid
        i = grid.index("row")
        self.row_range = r0, r1 = bounds[i], bounds[i + 1]
        m = r1 - r0
        remote = [j for j in range(len(bounds) - 1) if j != i]
        touched = touched_columns(adj, self.row_range, self.bounds, remote)
        wanted = [touched.get(j, np.zeros(0, dtype=np.int64)) for j in range(len(bounds) - 1)]
        with comm.phase("other"):
            self.exchange = RowExchange(comm, "row", wanted, r0)
        block = sp.csr_matrix(adj[r0:r1]) if not sp.issparse(adj) else adj[r0:r1].tocsr()
        cols = block.indices.astype(np.int64)
        halo_ids = np.concatenate(wanted) if wanted else np.zeros(0, dtype=np.int64)  # ascending: blocks in order
        own = (cols >= r0) & (cols < r1)
        src = np.where(own, cols - r0, m + np.searchsorted(halo_ids, cols))
        dst = entry_rows(block)
        attr = None if edge_attr is None else torch.from_numpy(block_rows(edge_attr, adj.indptr, self.row_range))
        device = grid.device
        source_ids = torch.from_numpy(np.concatenate([np.arange(r0, r1, dtype=np.int64), halo_ids])).to(device)
        self.edges = EdgeSet(torch.from_numpy(dst).to(device), torch.from_numpy(src).to(device),
                             None if attr is None else attr.to(device), m, m + len(halo_ids), source_ids)

    def source_rows(self, x: torch.Tensor) -> torch.Tensor:
        """(m, w) -> (m + halo, w): this process's rows, then the halo rows in `EdgeSet.src`'s numbering, with
        autograd. Collective on ``row`` (phases ``spmm_forward`` and, in backward, ``spmm_backward``)."""
        return _HaloFunction.apply(x, self)


class _HaloFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, halo: EdgeHalo) -> torch.Tensor:
        ctx.halo = halo
        with halo.comm.phase("spmm_forward"):
            received = halo.exchange.fetch_async(x).wait()
        return torch.cat([x, received])

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        halo = ctx.halo
        m = halo.row_range[1] - halo.row_range[0]
        with halo.comm.phase("spmm_backward"):
            returned = halo.exchange.return_async(grad[m:]).wait()
        return halo.exchange.add_returned(grad[:m].clone(), returned), None
