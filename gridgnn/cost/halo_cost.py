"""The price of message passing's halo exchange (`gridgnn.parallel.edge_halo`) on 1D and 1.5D (pure).

Process (i, k) holds block row i of A's pattern (every edge into its rows) and needs, of every other block j,
the U[i, j] rows its edges touch (`gridgnn.cost.sparse_stages.touched_counts` over the row blocks; for
statistics without the graph, `expected_touched`). Per `SourceRows` record of width w, in the byte convention
of `gridgnn.grid.comm` (bytes a rank receives):

=============  ===============================================================================
when           collectives on ``row`` (none when R = 1)
=============  ===============================================================================
set-up         two all-to-alls (phase ``other``): 8 (R - 1) bytes of counts, 8 bytes per id its
               holders ask of it (Σ_{i≠j} U[i, j] for holder j)
forward        one all-to-all: Σ_{j≠i} U[i, j] rows of w values (``spmm_forward``)
backward       when x needs a gradient, one all-to-all: Σ_{i≠j} U[i, j] rows back to holder j
               (``spmm_backward``)
=============  ===============================================================================

Each 1.5D replica runs its own group, as 1D. On 2D a separable message runs on each process's feature columns:
the same rows (of the pr row blocks) move on ``row``, each ``⌈w / pc⌉`` wide or so (its column block). 3D, and 2D
for a message that is not separable, run none (`halo_terms` raises `ConfigError`).
"""

from __future__ import annotations

import numpy as np

from gridgnn.cost.sparse_cost import index_terms
from gridgnn.cost.sparse_stages import expected_touched, touched_counts
from gridgnn.cost.spmm_cost import SizeInfo
from gridgnn.cost.terms import ShapeBlocks, Term, feature_widths
from gridgnn.errors import ConfigError


def halo_row_counts(blocks: ShapeBlocks) -> tuple[np.ndarray, np.ndarray]:
    """(P,) rows each rank receives in a forward halo exchange and in a backward one (cached per shape)."""
    if "halo_rows" not in blocks.cache:
        bounds = list(blocks.row_bounds)
        stats = blocks.stats
        if stats is not None and stats.exact:
            u = touched_counts(stats.column_major(), bounds, bounds)
        else:
            u = expected_touched(stats.grouped_nnz(bounds, bounds), bounds)
        own = np.diag(u)
        i = blocks.coords["row"]
        blocks.cache["halo_rows"] = ((u.sum(axis=1) - own)[i], (u.sum(axis=0) - own)[i])
    return blocks.cache["halo_rows"]


def check_halo_shape(blocks: ShapeBlocks, separable: bool = False) -> None:
    """`ConfigError` (one line) for a grid that runs no such message: 3D, and 2D unless ``separable``."""
    algo = blocks.shape.algo
    if algo == "3d" or (algo == "2d" and not separable):
        allowed = "1d, 1.5d and 2d" if separable else "1d and 1.5d"
        raise ConfigError(f"a message-passing model runs on the {allowed} grids; not on {algo}")


def _column_widths(blocks: ShapeBlocks, width: int) -> np.ndarray:
    """(P,) the columns of a ``width``-wide matrix each rank holds (all of them on 1D/1.5D)."""
    if not blocks.shape.splits_features:
        return np.full(blocks.shape.world_size, width, dtype=np.int64)
    return feature_widths(width, blocks.shape.col_blocks)[blocks.coords["col"]]


def halo_terms(blocks: ShapeBlocks, width: int, backward: bool, sz: SizeInfo, separable: bool = False) -> list[Term]:
    """One halo exchange of width ``width`` (forward, or its backward): one all-to-all on ``row`` (2D: of each
    rank's column block)."""
    check_halo_shape(blocks, separable)
    num_rows, p = blocks.shape.sizes[0], blocks.shape.world_size
    if num_rows == 1:
        return []
    rows = halo_row_counts(blocks)[1 if backward else 0]
    phase = "spmm_backward" if backward else "spmm_forward"
    nbytes = rows * sz.row_bytes(_column_widths(blocks, width))
    return [Term(phase, "all_to_all", "row", num_rows, np.ones(p, dtype=np.int64), nbytes.astype(np.int64))]


def halo_setup_terms(blocks: ShapeBlocks, separable: bool = False) -> list[Term]:
    """The halo's index exchange at set-up (the module table): two all-to-alls on ``row``; none when R = 1."""
    check_halo_shape(blocks, separable)
    if blocks.shape.sizes[0] == 1:
        return []
    return index_terms(blocks, halo_row_counts(blocks)[1])


def halo_memory_bytes(blocks: ShapeBlocks, ops, sz: SizeInfo) -> np.ndarray:
    """(P,) bytes of message passing on each rank: the block row's edge lists (destination and source, int64)
    and edge features (float32), and per halo exchange of width w the source rows (m + halo) and the per-edge
    values its layer's autograd keeps (`SourceRows.edge_values`; by default three arrays of w: the gathered
    source rows, the message before and after its non-linearity)."""
    halos = [op for layer in ops.layers for op in layer.halos]
    p = blocks.shape.world_size
    if not halos:
        return np.zeros(p, dtype=np.int64)
    edges = blocks.stats.grouped_nnz(list(blocks.row_bounds), [0, blocks.n])[blocks.coords["row"], 0]
    m = np.diff(np.asarray(blocks.row_bounds))[blocks.coords["row"]]
    halo = halo_row_counts(blocks)[0]
    edge_features = max(op.edge_features for op in halos)
    total = edges * (16 + 4 * edge_features)
    for op in halos:
        share = _column_widths(blocks, op.width) / max(op.width, 1)  # 2D: the rank's share of the columns
        per_edge = (op.edge_values or 3 * op.width) * share
        total = total + (m + halo) * op.width * share * sz.value + edges * per_edge * sz.value
    return total.astype(np.int64)
