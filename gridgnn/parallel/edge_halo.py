"""The edges into one rank's rows, and the rows of their source vertices: message passing on every grid.

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
forward    one all-to-all of the halo rows (phase ``spmm_forward``), then every message is local (3D: the
           block's all-gather on ``depth`` first)
backward   the halo rows' gradients back to their holders (one all-to-all, phase ``spmm_backward``), added
           into their rows' gradient (``index_add``; 3D: then reduce-scattered on ``depth``); none when the
           input needs no gradient
=========  ============================================================================================

On 2D, process (i, j) holds rows of block i in feature columns j: it runs all of block row i's edges (the
edges and their features are replicated on the grid row) on its columns, and the halo moves on ``row`` among
the processes of column block j, as on 1D; only a message separable over feature columns runs there
(`gridgnn.nn.message_passing.MessagePassing.column_separable`).

On 3D, process (i, j, l) holds the rows of sub-block S[i][l] in feature columns j: it runs the edges into those
rows on its columns. Their sources in block i are on the processes of its ``depth`` group, so the block's rows
are first all-gathered on ``depth`` (backward: the gradients reduce-scattered back); the halo of the other
blocks then moves on ``row`` among the processes of column block j and depth slice l, each sending from its
gathered block the rows the asker's sub-block touches. Again only a separable message runs there.

Every replica of a 1.5D block row runs all of the block row's edges (it does not split them by share as the
SpMM does): a message with parameters then leaves equal gradients on every replica, which the trainer's
reduction on ``row`` expects, and ``max`` sees every edge of a row. The cost is 1D's exchange in each replica
group (`gridgnn.cost.halo_cost`).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from gridgnn.cost.halo_cost import halo_plan
from gridgnn.cost.sparse_stages import touched_columns
from gridgnn.cost.stages import StageLayout
from gridgnn.cost.terms import SpMMPlan, kept
from gridgnn.data.edge_features import block_rows, entry_rows
from gridgnn.grid.comm import Communicator
from gridgnn.nn.message_passing import EdgeSet
from gridgnn.spmm.row_exchange import RowExchange


class EdgeHalo:
    """The edges into this rank's rows as an `EdgeSet`, and their halo exchange. Built once per run: collective
    on ``row`` (the index exchange, phase ``other``).

    ``adj``: the global operator (CSR-like, n x n; memory-mapped allowed), ``layout``: the grid's `StageLayout`
    (its row blocks; on 3D its sub-blocks S[k][l], segment k·d + l, `gridgnn.spmm.spmm_3d`; the exchange's plan
    reads it too), ``edge_attr``: (nnz, d) aligned with ``adj``'s entries (memory-mapped allowed) or None. On
    3D the rank's rows are S[i][l], its edges those into them, and its sources the whole block i (gathered on
    ``depth``) and the halo of the other blocks."""

    def __init__(self, comm: Communicator, adj, layout: StageLayout, edge_attr=None):
        bounds = layout.row_bounds
        sub_bounds = layout.segments if layout.group_axis == "depth" else None
        self.comm, self.bounds, self.layout = comm, list(bounds), layout
        grid = comm.grid
        i = grid.index("row")
        self.row_range = r0, r1 = bounds[i], bounds[i + 1]  # the block whose rows are sources without a halo
        self.depth_rows: list[int] | None = None  # 3D: the rows of S[i][0..d-1], gathered on ``depth``
        d0, d1 = r0, r1  # the rows whose edges this rank runs
        if sub_bounds is not None:
            d, here = grid.size("depth"), grid.index("depth")
            pieces = list(sub_bounds[i * d:(i + 1) * d + 1])
            self.depth_rows = [pieces[k + 1] - pieces[k] for k in range(d)]
            d0, d1 = pieces[here], pieces[here + 1]
        m = r1 - r0
        remote = [j for j in range(len(bounds) - 1) if j != i]
        touched = touched_columns(adj, (d0, d1), self.bounds, remote)
        wanted = [touched.get(j, np.zeros(0, dtype=np.int64)) for j in range(len(bounds) - 1)]
        with comm.phase("other"):
            self.exchange = RowExchange(comm, "row", wanted, r0)
        block = sp.csr_matrix(adj[d0:d1]) if not sp.issparse(adj) else adj[d0:d1].tocsr()
        cols = block.indices.astype(np.int64)
        halo_ids = np.concatenate(wanted) if wanted else np.zeros(0, dtype=np.int64)  # ascending: blocks in order
        own = (cols >= r0) & (cols < r1)
        src = np.where(own, cols - r0, m + np.searchsorted(halo_ids, cols))
        dst = entry_rows(block)
        attr = None if edge_attr is None else torch.from_numpy(block_rows(edge_attr, adj.indptr, (d0, d1)))
        device = grid.device
        source_ids = torch.from_numpy(np.concatenate([np.arange(r0, r1, dtype=np.int64), halo_ids])).to(device)
        self.edges = EdgeSet(torch.from_numpy(dst).to(device), torch.from_numpy(src).to(device),
                             None if attr is None else attr.to(device), d1 - d0, m + len(halo_ids), source_ids)

    def plan(self, width: int, backward: bool) -> SpMMPlan:
        """This rank's halo exchange of a ``width``-wide x as whole-block moves (`gridgnn.cost.halo_cost.halo_plan`,
        with its exchange's counts). Not collective."""
        grid = self.comm.grid  # backward brings back the rows it sent forward
        counts = self.exchange.send_rows if backward else self.exchange.recv_rows
        return halo_plan(grid.shape, self.layout, grid.coords, width, counts, backward)

    def planned(self, width: int, backward: bool) -> SpMMPlan:
        """`plan`, built once per (width, direction) and kept. Not collective."""
        return kept(self, "_plans", (width, backward), lambda: self.plan(width, backward))

    def source_rows(self, x: torch.Tensor) -> torch.Tensor:
        """(rows, w) -> (m + halo, w): the rows of this rank's block (on 3D its sub-block's rows are ``x``, the
        block's all-gathered on ``depth``), then the halo rows in `EdgeSet.src`'s numbering, with autograd.
        Collective on ``row`` (and ``depth`` on 3D; phases ``spmm_forward`` and, in backward,
        ``spmm_backward``)."""
        return _HaloFunction.apply(x, self)


class _HaloFunction(torch.autograd.Function):
    """The halo exchange's plan (`EdgeHalo.plan`), run: its depth moves by the communicator, its all-to-all on
    ``row`` by the `RowExchange`."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, halo: EdgeHalo) -> torch.Tensor:
        ctx.halo = halo
        received = None
        with halo.comm.phase("spmm_forward"):
            for move in halo.planned(x.shape[1], backward=False).before:
                if move.axis == "depth":  # the block's rows, gathered from its depth group
                    x = halo.comm.all_gather_rows(x.contiguous(), move.axis, list(move.counts))
                else:
                    received = halo.exchange.fetch_async(x).wait()
        return torch.cat([x, received])

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        halo = ctx.halo
        m = halo.row_range[1] - halo.row_range[0]
        block = None
        with halo.comm.phase("spmm_backward"):
            for move in halo.planned(grad.shape[1], backward=True).after:
                if move.axis == "depth":  # each depth slice's edges read the whole block: sum, keep own rows
                    block = halo.comm.reduce_scatter_rows(block, move.axis, list(move.counts))
                else:
                    returned = halo.exchange.return_async(grad[m:]).wait()
                    block = halo.exchange.add_returned(grad[:m].clone(), returned)
        return block, None
