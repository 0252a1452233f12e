"""The price of reducing the feature weights by rows (``--defer-weight-gather`` on sparse input features).

`gridgnn.parallel.feature_weight_rows` is the executor: a weight read only by products of the input features
(`gridgnn.cost.operations.ModelOps.feature_weights`) has, on the processes holding block row i, a gradient that
is zero outside the rows T_i of the feature columns block row i's vertices have. The processes of one axis
group (`feature_row_axis`) send the rows they touch to the rows' owners (an all-to-all), each owner updates its
rows, and after the step the owners send the updated rows back to the processes that read them (a second
all-to-all). This module says on which axis that runs and what it moves; pure, every rank at once.

What one process holds of such a weight, and so the rows it exchanges:

=========  ========================================  ==============================================
grid       the weight's rows (feature ids)           values per row
=========  ========================================  ==============================================
1D/1.5D    all F rows                                the weight's whole width
2D         its column block F_j of the input         the whole width (``dim`` 0: the product
           (``dim`` 0 of `ModelOps.parameter_slices`)  reduce-scatters partial products)
2D         all F rows (``dim`` 1)                    its column block of the output (the product
                                                     gathers the input, or keeps full feature rows)
=========  ========================================  ==============================================

The owners of a row range ``[lo, hi)`` are balanced blocks of it over the processes of the axis
(`gridgnn.partition.block_bounds`), as `FeatureWeightRows` cuts them.
"""

from __future__ import annotations

import numpy as np

from gridgnn.cost.spmm_cost import SizeInfo
from gridgnn.cost.terms import ShapeBlocks, Term, feature_widths
from gridgnn.grid.shape import GridShape
from gridgnn.partition import block_bounds


def feature_row_axis(shape: GridShape) -> str | None:
    """The axis on which ``shape`` exchanges its feature weights' rows: ``row`` on 1D/1.5D with more than one
    block row, and on 2D/3D with more than one block row and more than one column block; else None (on 2D/3D
    with one column block every gradient is all-reduced whole). `GridOps` asks here too."""
    if shape.size("row") < 2 or (shape.splits_features and shape.col_blocks < 2):
        return None
    return "row"


def feature_row_sum_axis(shape: GridShape) -> str | None:
    """``depth`` on 3D with d > 1: its processes hold other rows of the same block row and own the same weight
    rows, whose sums they all-reduce after the exchange; else None."""
    return "depth" if shape.depth > 1 else None


def member_bounds(shape: GridShape, layout) -> list[int]:
    """The vertex rows each process of the exchange holds, as consecutive bounds: the row blocks, or on 3D the
    sub-blocks S[k][l] (k-major: process (i, ., l) holds sub-block i * d + l, `gridgnn.cost.stages`)."""
    return layout.segments if shape.algo == "3d" else layout.row_bounds


def row_exchange_terms(blocks: ShapeBlocks, ranges: np.ndarray, widths: np.ndarray,
                       sizes: SizeInfo) -> dict[str, Term] | None:
    """The reduce and the refresh (two ``weight_grad`` all-to-alls on ``row``) of one group of feature weights
    exchanged together: ``ranges`` (C, 2), the feature rows ``[lo, hi)`` the processes of column block j hold
    of them (C = 1 on 1D/1.5D), and ``widths`` (C,), their values per row there, summed over the group. Process
    (i, j) receives, per step, ``counts_j[r, i]`` rows from every other r (the gradient rows of its own rows),
    then ``counts_j[i, q]`` rows from every other owner q (the updated rows it reads); ``counts_j`` from
    `GraphStats.feature_touch_in`. On 3D (`feature_row_sum_axis`) process (i, j, l) exchanges with the
    processes of depth slice l, and between the two the own rows' sums are all-reduced on ``depth`` (skipped
    where a process owns no rows, as `FeatureWeightRows` skips it). The terms by step: ``reduce``, ``sum``
    (3D) and ``refresh`` (`gridgnn.cost.weight_grad_steps`). None without the features' structure."""
    shape = blocks.shape
    size, p = shape.size("row"), shape.world_size
    i = blocks.coords["row"]
    zeros = np.zeros(p, dtype=np.int64)
    j = blocks.coords.get("col", zeros)
    depth = shape.depth
    slice_ = blocks.coords.get("depth", zeros)
    bounds = member_bounds(shape, blocks.layout)
    received = np.zeros((2, p), dtype=np.int64)
    summed = np.zeros(p, dtype=np.int64)  # values of the own rows all-reduced on depth
    for block in range(len(ranges)):
        lo, hi = (int(b) for b in ranges[block])
        owner_cuts = block_bounds(hi - lo, size, allow_empty=True, what="feature columns")
        counts = blocks.stats.feature_touch_in(bounds, [lo + b for b in owner_cuts]) \
            if blocks.stats is not None else None
        if counts is None:
            return None
        mine = j == block
        for level in range(depth):
            at = counts[level::depth]  # (row blocks, owners): the members of depth slice `level`
            others = at - np.diag(np.diag(at))  # a process keeps its own rows
            ranks = mine & (slice_ == level)
            for step, rows in enumerate((others.sum(axis=0)[i], others.sum(axis=1)[i])):  # reduce, then refresh
                received[step] += np.where(ranks, rows * int(widths[block]) * sizes.value, 0)
        summed += np.where(mine, np.diff(owner_cuts)[i] * int(widths[block]), 0)
    ones = np.ones(p, dtype=np.int64)
    terms = {kind: Term("weight_grad", "all_to_all", "row", size, ones, received[step])
             for step, kind in enumerate(("reduce", "refresh"))}
    if feature_row_sum_axis(shape) is not None:
        calls = (summed > 0).astype(np.int64)
        terms["sum"] = Term("weight_grad", "all_reduce", "depth", depth, calls,
                            2 * summed * sizes.value * (depth - 1) // depth * calls)
    return terms


def weight_groups(shapes: list[tuple[int, ...]], dims: list[int | None], col_blocks: int,
                  num_features: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The (ranges, widths) of `row_exchange_terms` for feature weights of ``shapes`` (each (F, w)) read along
    ``dims`` (None on 1D/1.5D: whole; 0 or 1 on 2D: `ModelOps.parameter_slices`), grouped as `GridOps`
    exchanges them: one group per distinct row range (all weights together on 1D/1.5D; on 2D those read by
    input-column block, then those read by output-column block)."""
    if col_blocks == 1:
        return [(np.array([[0, num_features]]), np.array([sum(w for _, w in shapes)]))]
    groups = []
    input_blocks = block_bounds(num_features, col_blocks, allow_empty=True, what="feature columns")
    by_input = [w for (_, w), dim in zip(shapes, dims, strict=True) if dim == 0]
    by_output = [w for (_, w), dim in zip(shapes, dims, strict=True) if dim == 1]
    if by_input:
        ranges = np.array([[input_blocks[k], input_blocks[k + 1]] for k in range(col_blocks)])
        groups.append((ranges, np.full(col_blocks, sum(by_input), dtype=np.int64)))
    if by_output:
        ranges = np.tile([0, num_features], (col_blocks, 1))
        groups.append((ranges, sum(feature_widths(w, col_blocks) for w in by_output)))
    return groups
