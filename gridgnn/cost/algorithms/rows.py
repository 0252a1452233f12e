"""The costs of 1D and 1.5D (`gridgnn.spmm.spmm_15d`): block rows of Â stay put, X's blocks travel on ``row``.

One of the algorithm modules of `gridgnn.cost.algorithms` (read its table of what each provides). Grid
``R x c`` (1D: c = 1); stages and shares from `gridgnn.cost.stages`. Pure, every rank at once.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gridgnn.cost.graph_stats import GraphStats
from gridgnn.cost.spmm_cost import SizeInfo
from gridgnn.cost.stages import StageLayout
from gridgnn.cost.terms import Move, PlannedStage, ShapeBlocks, SpMMPlan, Term, sum_terms, term
from gridgnn.grid.shape import GridShape

DENSE_BUFFERS = 1
"""Dense (rows x width) receive buffers of a stage, beside the X panel (`gridgnn.cost.memory_model`)."""


def count_bounds(shape: GridShape, layout: StageLayout) -> tuple[list[int], list[int]]:
    """The (row, column) bounds on which Â's entries are counted: the row blocks, and the column blocks."""
    return layout.row_bounds, layout.segments


def blocks(shape: GridShape, stats: GraphStats, layout: StageLayout, coords: dict) -> ShapeBlocks:
    """`ShapeBlocks` with ``nnz`` (R, c): the entries of block row i in replica k's share of column blocks."""
    rows, cols = count_bounds(shape, layout)
    num_rows, c = shape.sizes[0], shape.replication
    nnz = stats.grouped_nnz(rows, cols, np.arange(num_rows) % c, num_groups=c)
    i, k = coords["row"], coords.get("rep", np.zeros_like(coords["row"]))
    return ShapeBlocks(shape, stats.num_nodes, coords, layout, nnz, np.diff(rows)[i], nnz[i, k], nnz[i, k],
                       stats=stats)


def panel_terms(blocks: ShapeBlocks, backward: bool, sz: SizeInfo) -> list[Term]:
    """None: 1D and 1.5D never send Â (``--cache-panels`` has nothing to keep)."""
    return []


def spmm_terms(blocks: ShapeBlocks, f: int, backward: bool, sz: SizeInfo, cached: bool = False) -> list[Term]:
    """One dense SpMM half of width ``f``: the stage broadcasts (forward) or reduces (backward) on ``row``, then
    the replica all-reduce (forward) or broadcast (backward) on ``rep`` (``cached`` changes nothing: no
    panels move)."""
    shape, p = blocks.shape, blocks.shape.world_size
    num_rows, c = shape.sizes[0], shape.replication
    phase = "spmm_backward" if backward else "spmm_forward"
    sizes = np.diff(blocks.row_bounds).astype(np.int64)
    share = np.arange(num_rows) % c
    share_rows = np.bincount(share, weights=sizes, minlength=c).astype(np.int64)
    share_count = np.bincount(share, minlength=c).astype(np.int64)
    i, k = blocks.coords["row"], blocks.coords.get("rep", np.zeros(p, dtype=np.int64))
    row_bytes = sz.row_bytes(f)
    stage = (share_rows[k] - np.where(i % c == k, sizes[i], 0)) * row_bytes
    terms = []
    if num_rows > 1:
        terms.append(term(phase, "reduce" if backward else "broadcast", "row", num_rows, share_count[k], stage, p))
    if c > 1:
        if backward:
            terms.append(term(phase, "broadcast", "rep", c, 1, np.where(k != i % c, sizes[i] * row_bytes, 0), p))
        else:
            terms += sum_terms(phase, "rep", c, sizes[i], f, k, sz, 1, p)
    return terms


def attention_terms(blocks: ShapeBlocks, width: int, heads: int, sizes: SizeInfo,
                    cached: bool = False) -> list[Term]:
    """One GAT layer's attention: the stage broadcasts of the source scores (K wide) and of x' (``width``),
    the replica sums of the row maxima and sums, and the SpMMs of the aggregation and its backward (``cached``
    changes nothing: no panels move)."""

    def spmm(f: int, backward: bool) -> list[Term]:
        return spmm_terms(blocks, f, backward, sizes)

    def stages(f: int, phase: str) -> list[Term]:  # the row broadcasts of a forward SpMM, without its rep sum
        return [replace(t, phase=phase) for t in spmm(f, False) if t.axis == "row"]

    def row_sums(phase: str) -> list[Term]:  # two all-reduces of m·K values on rep: forward the maxima (kept in
        if blocks.shape.replication == 1:  # float32) and the sums; backward two sums
            return []
        p, c = blocks.shape.world_size, blocks.shape.replication
        rows = np.diff(blocks.row_bounds).astype(np.int64)[blocks.coords["row"]]
        sums = sum_terms(phase, "rep", c, rows, heads, blocks.coords["rep"], sizes, 1, p)
        if phase == "spmm_backward":
            return sums + sums
        return [term(phase, "all_reduce", "rep", c, 1, 2 * rows * heads * sizes.value * (c - 1) // c, p)] + sums

    forward = stages(heads, "spmm_forward") + row_sums("spmm_forward") + spmm(width, False)
    backward = stages(width, "spmm_backward") + spmm(width, True) + row_sums("spmm_backward") + spmm(heads, True)
    return forward + backward


def graph_bytes(blocks: ShapeBlocks, sz: SizeInfo) -> np.ndarray:
    """(P,) bytes of the rank's Â blocks of its share and their transposes (`gridgnn.cost.memory_model`)."""
    shape, idx = blocks.shape, sz.index
    heights = np.diff(blocks.row_bounds).astype(np.int64)
    values = 2 * blocks.local_nnz * (idx + sz.sparse_value)
    i = blocks.coords["row"]
    c = shape.replication
    k = blocks.coords.get("rep", np.zeros_like(i))
    share = np.arange(len(heights)) % c
    count = np.bincount(share, minlength=c)[k]
    share_rows = np.bincount(share, weights=heights, minlength=c).astype(np.int64)[k]
    return count * (heights[i] + 1) * idx + (share_rows + count) * idx + values


def schedule(shape: GridShape, layout: StageLayout, coords: dict, width: int, panel_nnz, backward: bool,
             cached: bool = False) -> SpMMPlan:
    """One rank's plan of one SpMM half (`gridgnn.spmm.spmm_15d` runs it): for each segment of the replica's
    share, X[segment] broadcast on ``row`` from its block's process (forward) or the partial product
    Â[i, segment]ᵀ G[i] reduced there (backward); then, with c > 1, the replica sum of Y[i] on ``rep``
    (forward) or dX[i] broadcast on ``rep`` from replica i mod c (backward). ``panel_nnz``: (segments,)
    entries of the rank's blocks (None: not known, every stage multiplies); ``cached`` changes nothing (Â never
    moves)."""
    c = shape.replication
    i, k = coords["row"], coords.get(layout.group_axis, 0)
    n_i = layout.row_bounds[i + 1] - layout.row_bounds[i]
    op = "reduce" if backward else "broadcast"
    stages = []
    for s in layout.handled_by(k):
        a, b = layout.segment(s)
        entries = panel_nnz is None or int(panel_nnz[s]) > 0
        stages.append(PlannedStage(s, a, b, entries, None, Move(op, "row", int(layout.root[s]), "dense", b - a, width)))
    after = ()
    if c > 1:
        after = ((Move("broadcast", "rep", i % c, "dense", n_i, width),) if backward
                 else (Move("all_reduce", "rep", None, "dense", n_i, width),))
    return SpMMPlan(n_i, tuple(stages), (), after)
