"""Building blocks of a custom training loop: the distributed aggregation on the current process group and
the block of a global array a rank holds (public as ``gridgnn.grid_aggregation`` and ``gridgnn.local_block``).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor

from gridgnn.data.edge_features import check_edge_rows
from gridgnn.errors import ConfigError, DataError
from gridgnn.nn.message_passing import check_message_grid
from gridgnn.parallel.grid_ops import GridOps


def grid_aggregation(adjacency: sp.spmatrix, *, algo: str = "1d", replication: int = 1,
                     grid: str | None = None, normalize: bool = True, defer_weight_gather: bool = False,
                     messages: bool = False, edge_features=None) -> GridOps:
    """The aggregation ``x -> Â x`` on this rank's block, with autograd (backward: Âᵀ), as a `GridOps`.

    ``adjacency``: the global (n, n) scipy matrix (``adj[dst, src] != 0``), normalized to
    D^-1/2 (A + I) D^-1/2 unless ``normalize`` is False. The grid spans the current process group (every
    rank calls this: collective on the world), or one process when there is none. The result's
    ``row_range`` and ``col_range(width)`` say which rows and feature columns this rank holds (see
    `local_block`); pass it to `gridgnn.GCN` as ``agg``, and after ``backward()`` call its
    ``reduce_gradients(params)`` so every rank applies the same update. On a 2D grid a model must read each
    weight and bias only through ``agg.linear`` and ``agg.add_bias`` (as the models of `gridgnn.nn` do): the
    reduction sums only the column block of each that a rank read there (`GridOps.reduce_gradients`).
    With ``defer_weight_gather`` (2D/3D, as ``gridgnn train --defer-weight-gather``) that reduction leaves
    the other column blocks stale: call ``agg.gather_parameters(params, optimizer)`` on every rank before
    reading a weight whole (saving it, or using it outside ``agg``), and ``agg.gather_parameters(params,
    copies=...)`` on a copy of the weights taken between steps. On 1D/1.5D it takes effect after
    ``agg.set_feature_pattern(indptr, indices, num_features)`` (the global sparse features' CSR structure):
    the feature weights then move by rows (on 2D and 3D their column blocks do), and
    ``agg.after_step(params)`` must follow every optimizer step (`gridgnn.parallel.feature_weight_rows`).

    ``messages`` (or ``edge_features``, (nnz, d) aligned with the adjacency's stored entries in CSR order):
    the layout of a message-passing layer (`gridgnn.nn.message_passing.MessagePassing`): its edges are the
    stored entries of ``adjacency`` itself (canonical CSR; ``normalize`` must be False); ``agg.edges()`` and
    ``agg.source_rows(x)`` serve the layer. Any layer runs on 1D and 1.5D; on 2D and 3D (each rank holding a
    block of the feature columns) only a layer whose message is separable over them
    (``MessagePassing.column_separable``): another raises `ConfigError` when called, on every rank alike.
    """
    import torch.distributed as dist

    from gridgnn.data.operators import operator_matrix
    from gridgnn.grid.comm import Communicator
    from gridgnn.grid.process_grid import ProcessGrid
    from gridgnn.grid.shape import resolve_grid

    messages = messages or edge_features is not None
    if messages:
        check_message_grid(algo, separable=True)  # a layer that is not separable refuses 2D/3D when called
        if normalize:
            raise ConfigError("a message-passing layout's edges are the adjacency's own entries: pass "
                              "normalize=False")
    world = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
    shape = resolve_grid(algo, world, replication=replication, grid=grid)
    process_grid = ProcessGrid.create(shape)
    adj = operator_matrix("gcn", adjacency) if normalize else sp.csr_matrix(adjacency)
    if messages:
        adj.sum_duplicates()  # canonical: one entry per edge, in the order edge features are given
        if edge_features is not None:
            edge_features = check_edge_rows(edge_features, adj.nnz, "edge_features")
    return GridOps(process_grid, Communicator(process_grid), adj, defer_weight_gather=defer_weight_gather,
                   operator="sum" if messages else "gcn", messages=messages, edge_attr=edge_features)


def local_block(array, agg) -> Tensor:
    """The block of a global array (n,) or (n, f) that this rank holds under ``agg`` (rows ``agg.row_range``
    and, for 2-D arrays, columns ``agg.col_range(f)``), as a tensor. Raises `DataError` for an array that is
    not global (not one row per vertex) or not 1-D/2-D. Not collective."""
    array = np.asarray(array)
    if array.ndim not in (1, 2) or array.shape[0] != agg.num_nodes:
        raise DataError(f"local_block needs the global array, (n,) or (n, f) with n = {agg.num_nodes} vertices; "
                        f"got shape {array.shape}")
    r0, r1 = agg.row_range
    tensor = torch.as_tensor(array[r0:r1])
    if tensor.ndim == 2:
        c0, c1 = agg.col_range(tensor.shape[1])
        tensor = tensor[:, c0:c1]
    return tensor.contiguous()
