"""The price of message passing's halo exchange (`gridgnn.parallel.edge_halo`) on every grid (pure).

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
the same rows (of the pr row blocks) move on ``row``, each ``⌈w / pc⌉`` wide or so (its column block). On 3D
process (i, j, l) runs the edges into sub-block S[i][l]: U counts the columns of block k that S[i][l]'s rows
touch, the halo moves on ``row`` within depth slice l, and block i's rows are all-gathered on ``depth`` before
it (parts padded to the largest sub-block; backward: a reduce-scatter after the returned rows). 2D and 3D run
no message that is not separable (`halo_terms` raises `ConfigError`).

`halo_plan` is one rank's exchange as an `gridgnn.cost.terms.SpMMPlan` of whole-block moves (forward: the depth
all-gather, then the all-to-all; backward: the all-to-all back, then the reduce-scatter), which the executor
builds with its own counts and runs, and `gridgnn.cost.spmm_plan.lower` records; `halo_terms` is tested against
it rank by rank.
"""

from __future__ import annotations

import numpy as np

from gridgnn.cost.operations import DEFAULT_EDGE_ARRAYS
from gridgnn.cost.sparse_cost import index_terms
from gridgnn.cost.sparse_stages import expected_touched
from gridgnn.cost.spmm_cost import SizeInfo
from gridgnn.cost.terms import Move, ShapeBlocks, SpMMPlan, Term, feature_widths, gather_term, scatter_sum_term
from gridgnn.errors import ConfigError


def _dest_bounds(blocks: ShapeBlocks) -> tuple[list[int], int]:
    """The bounds of the row sets whose edges one rank runs, and how many there are per row block: 3D's
    sub-blocks S[k][l] (d per block), else the row blocks themselves (1)."""
    if blocks.shape.algo == "3d":
        return list(blocks.segments), blocks.shape.depth
    return list(blocks.row_bounds), 1


def _dest_index(blocks: ShapeBlocks) -> np.ndarray:
    """(P,) each rank's row set in `_dest_bounds`: i·d + l on 3D, i elsewhere."""
    _, d = _dest_bounds(blocks)
    i = blocks.coords["row"]
    return i * d + blocks.coords["depth"] if d > 1 else i


def halo_row_counts(blocks: ShapeBlocks) -> tuple[np.ndarray, np.ndarray]:
    """(P,) rows each rank receives in a forward halo exchange and in a backward one (cached per shape). U[s, k]:
    the columns of block k the rows of set s touch; forward, set s receives them from every other block; backward,
    the holder of block k in depth slice l gets back the rows of every other block's set in slice l."""
    if "halo_rows" not in blocks.cache:
        bounds = list(blocks.row_bounds)
        dest, d = _dest_bounds(blocks)
        stats = blocks.stats
        if stats is not None and stats.exact:
            u = stats.touched(dest, bounds)
        else:
            u = expected_touched(stats.grouped_nnz(dest, bounds), bounds)
        q = len(bounds) - 1
        by_slice = u.reshape(q, d, q)  # (row block of the set, depth slice, holder block)
        own = by_slice[np.arange(q), :, np.arange(q)]  # (q, d): a set's touches of its own block
        forward = (by_slice.sum(axis=2) - own).reshape(-1)
        backward = (by_slice.sum(axis=0).T - own)  # (holder block, slice)
        i = blocks.coords["row"]
        slices = blocks.coords["depth"] if d > 1 else np.zeros_like(i)
        blocks.cache["halo_rows"] = (forward[_dest_index(blocks)], backward[i, slices])
    return blocks.cache["halo_rows"]


def edge_counts(blocks: ShapeBlocks) -> np.ndarray:
    """(P,) the edges each rank's message passing runs: every stored entry of its rows (its block row, replicated
    on a 2D grid row and on the replicas of 1.5D; on 3D its sub-block's rows)."""
    if "edges" not in blocks.cache:
        dest, _ = _dest_bounds(blocks)
        per_set = blocks.stats.grouped_nnz(dest, [0, blocks.n])[:, 0]
        blocks.cache["edges"] = per_set[_dest_index(blocks)]
    return blocks.cache["edges"]


def check_halo_shape(blocks: ShapeBlocks, separable: bool = False) -> None:
    """`ConfigError` (one line) for a grid that runs no such message: 2D and 3D unless ``separable``."""
    algo = blocks.shape.algo
    if algo in ("2d", "3d") and not separable:
        raise ConfigError(f"a message that is not separable over feature columns runs on the 1d and 1.5d grids; "
                          f"not on {algo}")


def _column_widths(blocks: ShapeBlocks, width: int) -> np.ndarray:
    """(P,) the columns of a ``width``-wide matrix each rank holds (all of them on 1D/1.5D)."""
    if not blocks.shape.splits_features:
        return np.full(blocks.shape.world_size, width, dtype=np.int64)
    return feature_widths(width, blocks.shape.col_blocks)[blocks.coords["col"]]


def halo_terms(blocks: ShapeBlocks, width: int, backward: bool, sz: SizeInfo, separable: bool = False) -> list[Term]:
    """One halo exchange of width ``width`` (forward, or its backward): one all-to-all on ``row`` (2D/3D: of each
    rank's column block); on 3D the block's all-gather on ``depth`` before it (backward: the reduce-scatter
    after it)."""
    check_halo_shape(blocks, separable)
    num_rows, p = blocks.shape.sizes[0], blocks.shape.world_size
    phase = "spmm_backward" if backward else "spmm_forward"
    widths = _column_widths(blocks, width)
    terms = []
    d = blocks.shape.depth
    if d > 1:
        i, ones = blocks.coords["row"], np.ones(p, dtype=np.int64)
        chunk = blocks.sub.max(axis=1)[i]
        if backward:
            terms.append(scatter_sum_term(phase, "depth", d, chunk, blocks.sub[i, blocks.coords["depth"]], widths,
                                          sz, ones, p))
        else:
            terms.append(gather_term(phase, "depth", d, chunk, widths, sz, ones, p))
    if num_rows > 1:
        rows = halo_row_counts(blocks)[1 if backward else 0]
        nbytes = rows * sz.row_bytes(widths)
        terms.append(Term(phase, "all_to_all", "row", num_rows, np.ones(p, dtype=np.int64), nbytes.astype(np.int64)))
    return terms


def halo_counts(touched: np.ndarray, coords: dict, depth: int, backward: bool) -> np.ndarray:
    """The rows the rank at ``coords`` receives from each process of its ``row`` group in one halo exchange, from
    U = ``touched`` (row sets, row blocks: the columns of block k the rows of set s touch; the sets are 3D's
    sub-blocks S[k][l], segment k·d + l, else the row blocks): forward, what its set reads of every other block;
    backward, what every other block's set in its depth slice read of its block."""
    i, here = coords["row"], (coords["depth"] if depth > 1 else 0)
    counts = (touched[here::depth, i] if backward else touched[i * depth + here]).astype(np.int64)
    counts[i] = 0
    return counts


def halo_plan(shape, layout, coords: dict, width: int, counts, backward: bool) -> SpMMPlan:
    """One rank's halo exchange of a ``width``-wide x (this rank's columns) as whole-block moves (module
    docstring); ``counts``: the rows it receives from each process of its ``row`` group (`halo_counts`; the
    executor's from its exchange)."""
    i, d = coords["row"], shape.depth
    rows = layout.row_bounds[i + 1] - layout.row_bounds[i]
    counts = np.asarray(counts, dtype=np.int64)
    exchange = Move("all_to_all", "row", None, "dense", int(counts.sum()), width,
                    counts=tuple(int(c) for c in counts), carries="halo")
    depth = ()
    if d > 1:
        sub = layout.depth_counts(i)
        depth = (Move("reduce_scatter" if backward else "all_gather", "depth", None, "dense", rows, width, counts=sub),)
    if backward:
        return SpMMPlan(rows, (), (), (exchange,) + depth)
    return SpMMPlan(rows, (), depth + (exchange,), ())


def halo_setup_terms(blocks: ShapeBlocks, separable: bool = False) -> list[Term]:
    """The halo's index exchange at set-up (the module table): two all-to-alls on ``row``; none when R = 1."""
    check_halo_shape(blocks, separable)
    if blocks.shape.sizes[0] == 1:
        return []
    return index_terms(blocks, halo_row_counts(blocks)[1])


def halo_memory_bytes(blocks: ShapeBlocks, ops, sz: SizeInfo) -> np.ndarray:
    """(P,) bytes of message passing on each rank: the block row's edge lists (destination and source, int64)
    and edge features (float32); per halo exchange of width w the source rows (m + halo) and the per-edge values
    its layer's autograd keeps until backward reaches it (`SourceRows.edge_values`, default two arrays of w: the
    message before and after its non-linearity); and, once, the most per-edge values any one layer holds only
    while it runs (`SourceRows.edge_temporaries`, default two arrays of w: the gathered rows and a gradient).
    Kept values add up over the layers, temporaries do not: a rank runs one layer at a time."""
    halos = [op for layer in ops.layers for op in layer.halos]
    p = blocks.shape.world_size
    if not halos:
        return np.zeros(p, dtype=np.int64)
    edges = edge_counts(blocks)
    m = np.diff(np.asarray(blocks.row_bounds))[blocks.coords["row"]]
    halo = halo_row_counts(blocks)[0]
    edge_features = max(op.edge_features for op in halos)
    total = edges * (16 + 4 * edge_features)
    temporaries = np.zeros(p)
    for layer in ops.layers:
        if not layer.halos:
            continue
        kept, held = np.zeros(p), np.zeros(p)  # a layer states its counts once, whatever its halos
        for op in layer.halos:
            share = _column_widths(blocks, op.width) / max(op.width, 1)  # 2D: the rank's share of the columns
            total = total + (m + halo) * op.width * share * sz.value
            kept = np.maximum(kept, edges * _or_default(op.edge_values, op.width) * share * sz.value)
            held = np.maximum(held, edges * _or_default(op.edge_temporaries, op.width) * share * sz.value)
        total, temporaries = total + kept, np.maximum(temporaries, held)
    return (total + temporaries).astype(np.int64)


def _or_default(count: int | None, width: int) -> int:
    """A layer's per-edge count, or for a record that states none `DEFAULT_EDGE_ARRAYS` of ``width``."""
    return DEFAULT_EDGE_ARRAYS * width if count is None else count
