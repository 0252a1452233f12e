"""The plan of one distributed SpMM: the collectives one rank runs, as pure data (no process group).

From the sizes, the grid shape and the nnz of Â's panels, `spmm_steps` lists one rank's collectives of the
forward (``Â X``) or backward (``Âᵀ G``) half of a dense SpMM, stage by stage in issue order, each a `Step`
with the bytes the rank receives (the byte convention of `gridgnn.grid.comm`). The stages come from
`gridgnn.cost.stages`, the same `StageLayout` the SpMM modules loop over; a measured run records exactly
these steps (``tests/test_spmm_distributed.py`` compares them record by record on every algorithm at world
sizes 1-9), and the vectorized cost model `gridgnn.cost.rank_cost` must agree with their sums rank by rank
(``tests/test_spmm_plan.py``).

What each algorithm's stage s does (rows ``[a, b)`` of the segment; n_i this rank's block of Â rows; f_j its
feature columns; a collective on a group of one process is skipped):

=====  ============================================  ==================================================
algo   forward                                       backward
=====  ============================================  ==================================================
1.5d   broadcast X[a:b] on row; then one all-reduce  reduce Â[i, s]ᵀ G on row; then one broadcast of
       of Y[i] on rep                                dX[i] on rep from replica i mod c
2d     broadcast the packed Â[i, s] (n_i rows) on    broadcast the packed Â[i, s]ᵀ (b - a rows) on col;
       col; broadcast X[a:b, j] on row               reduce Â[i, s]ᵀ G[i, j] on row
3d     as 2d for the q stages of depth slice l;      all-gather G[i, j] on depth; then as 2d
       then a reduce-scatter of Y[i, j] on depth
=====  ============================================  ==================================================

An Â panel without entries is not sent (every process knows its nnz); dense steps of an empty feature
block (f_j = 0) are not run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gridgnn.cost.spmm_cost import FLOAT32, SizeInfo
from gridgnn.cost.stages import StageLayout, stage_layout
from gridgnn.grid.shape import GridShape
from gridgnn.partition import block_bounds
from gridgnn.sparse.layout import packed_nbytes


@dataclass(frozen=True)
class Step:
    """One collective of one rank.

    ``op``: broadcast, reduce, all_reduce, all_gather or reduce_scatter; ``axis``: the grid axis it runs on;
    ``root``: the root's coordinate on that axis (None for the all-* collectives); ``stage``: the segment it
    belongs to (None for the whole-block collectives); ``operand``: ``"adj"`` (a packed Â panel of ``rows``
    rows and ``nnz`` entries) or ``"dense"`` (``rows`` x ``width`` values; all-gather and reduce-scatter count
    the padded chunk); ``bytes``: what this rank receives.
    """

    op: str
    axis: str
    root: int | None
    stage: int | None
    operand: str
    rows: int
    width: int
    nnz: int
    bytes: int


def spmm_steps(shape: GridShape, rank: int, n: int, width: int, panel_nnz: np.ndarray | None = None, *,
               backward: bool, sizes: SizeInfo = FLOAT32, parts: tuple[int, ...] | None = None) -> list[Step]:
    """The collectives of ``rank`` for one SpMM half of width ``width`` on ``shape`` (n vertices), in issue
    order.

    ``panel_nnz``: nnz of Â per (row block, segment of `stage_layout`), shape (row blocks, segments); used by
    2D and 3D, whose panels move (1D/1.5D never send Â). ``parts``: a vertex partition the row blocks
    follow (`gridgnn.cost.stages`).
    """
    layout = stage_layout(shape.algo, shape.sizes, n, parts)
    coords = shape.coords(rank)
    if shape.algo in ("1d", "1.5d"):
        return _steps_15d(shape, layout, coords, width, backward, sizes)
    return _steps_summa(shape, layout, coords, width, np.asarray(panel_nnz), backward, sizes)


def price(steps: list[Step]) -> tuple[int, int]:
    """(bytes received, collective calls) of ``steps``."""
    return sum(step.bytes for step in steps), len(steps)


def _dense(op, axis, root, stage, rows, width, me, sz: SizeInfo) -> Step:
    """A broadcast or reduce of (rows x width) values: received by every process but the root."""
    return Step(op, axis, root, stage, "dense", rows, width, 0, 0 if me == root else rows * width * sz.value)


def _steps_15d(shape, layout: StageLayout, coords, f, backward, sz) -> list[Step]:
    num_rows = shape.sizes[0]
    c = shape.replication
    i, k = coords["row"], coords.get(layout.group_axis, 0)
    n_i = layout.row_bounds[i + 1] - layout.row_bounds[i]
    steps = []
    if num_rows > 1:
        for s in layout.handled_by(k):
            a, b = layout.segment(s)
            steps.append(_dense("reduce" if backward else "broadcast", "row", int(layout.root[s]), s, b - a, f,
                                i, sz))
    if c > 1 and backward:
        steps.append(_dense("broadcast", "rep", i % c, None, n_i, f, k, sz))
    elif c > 1:
        steps.append(Step("all_reduce", "rep", None, None, "dense", n_i, f, 0,
                          2 * n_i * f * sz.value * (c - 1) // c))
    return steps


def _steps_summa(shape, layout: StageLayout, coords, width, nnz, backward, sz) -> list[Step]:
    """2D (``pr x pc``) and 3D (``q x q x d``, depth slice l runs the segments k*d + l)."""
    i, j = coords["row"], coords["col"]
    pr, pc = shape.sizes[0], shape.sizes[1]
    depth = shape.depth
    mine = layout.handled_by(coords.get(layout.group_axis, 0))
    n_i = layout.row_bounds[i + 1] - layout.row_bounds[i]
    f_j = int(np.diff(block_bounds(width, pc, allow_empty=True, what="feature columns"))[j])
    chunk = max(np.diff(layout.segments[i * depth:(i + 1) * depth + 1])) if depth > 1 else 0
    gathered = depth > 1 and f_j > 0
    steps = []
    if gathered and backward:
        steps.append(Step("all_gather", "depth", None, None, "dense", chunk, f_j, 0,
                          (depth - 1) * chunk * f_j * sz.value))
    for s in mine:
        a, b = layout.segment(s)
        z = int(nnz[i, s])
        if pc > 1 and z:
            root = int(layout.panel_root[s])
            rows = b - a if backward else n_i
            steps.append(Step("broadcast", "col", root, s, "adj", rows, 0, z,
                              0 if root == j else packed_nbytes(rows, z, sz.index, sz.sparse_value)))
        if pr > 1 and f_j:
            steps.append(_dense("reduce" if backward else "broadcast", "row", int(layout.root[s]), s, b - a, f_j,
                                i, sz))
    if gathered and not backward:
        steps.append(Step("reduce_scatter", "depth", None, None, "dense", chunk, f_j, 0,
                          (depth - 1) * chunk * f_j * sz.value))
    return steps
