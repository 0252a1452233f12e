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
from gridgnn.cost.terms import ShapeBlocks, Step, Term, dense_step, sum_terms, term
from gridgnn.grid.shape import GridShape
from gridgnn.partition import block_bounds

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


def plan_steps(shape: GridShape, layout: StageLayout, coords: dict, width: int, panel_nnz, backward: bool,
               sz: SizeInfo) -> list[Step]:
    """One rank's collectives of one SpMM half, in issue order (``panel_nnz`` unused: Â never moves)."""
    num_rows = shape.sizes[0]
    c = shape.replication
    i, k = coords["row"], coords.get(layout.group_axis, 0)
    n_i = layout.row_bounds[i + 1] - layout.row_bounds[i]
    steps = []
    if num_rows > 1:
        for s in layout.handled_by(k):
            a, b = layout.segment(s)
            steps.append(dense_step("reduce" if backward else "broadcast", "row", int(layout.root[s]), s, b - a, width,
                                i, sz))
    if c > 1 and backward:
        steps.append(dense_step("broadcast", "rep", i % c, None, n_i, width, k, sz))
    elif c > 1 and sz.exact:
        steps.append(Step("all_reduce", "rep", None, None, "dense", n_i, width, 0,
                          2 * n_i * width * sz.value * (c - 1) // c))
    elif c > 1:  # in the wire precision: the all-to-all of the chunks, then the all-gather of their sums
        chunks = np.diff(block_bounds(n_i, c, allow_empty=True, what="rows"))
        row = sz.row_bytes(width)
        steps += [Step("all_to_all", "rep", None, None, "dense", int(chunks[k]), width, 0,
                       (c - 1) * int(chunks[k]) * row),
                  Step("all_gather", "rep", None, None, "dense", int(chunks.max()), width, 0,
                       (c - 1) * int(chunks.max()) * row)]
    return steps
