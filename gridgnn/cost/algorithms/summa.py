"""The costs of 2D (`gridgnn.spmm.spmm_2d`): SUMMA on a ``pr x pc`` grid, Â panels on ``col``, X panels on ``row``.

One of the algorithm modules of `gridgnn.cost.algorithms` (read its table of what each provides). Stages,
panel roots and the refinement of row and column blocks from `gridgnn.cost.stages`. Pure, every rank at once.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gridgnn.cost.graph_stats import GraphStats
from gridgnn.cost.spmm_cost import SizeInfo
from gridgnn.cost.stages import StageLayout
from gridgnn.cost.terms import (
    Move,
    PlannedStage,
    ShapeBlocks,
    SpMMPlan,
    Term,
    feature_widths,
    packed_bytes,
    sum_terms,
    term,
)
from gridgnn.grid.shape import GridShape

DENSE_BUFFERS = 1
"""Dense (rows x width) receive buffers of a stage, beside the X panel (`gridgnn.cost.memory_model`)."""


def count_bounds(shape: GridShape, layout: StageLayout) -> tuple[list[int], list[int]]:
    """The (row, column) bounds on which Â's entries are counted: the row blocks and the stage segments (one
    column, [0, n], on a ``pr x 1`` grid: panels never move there, only row sums matter)."""
    if shape.sizes[1] == 1:
        return layout.row_bounds, [0, layout.row_bounds[-1]]
    return layout.row_bounds, layout.segments


def blocks(shape: GridShape, stats: GraphStats, layout: StageLayout, coords: dict) -> ShapeBlocks:
    """`ShapeBlocks` with ``nnz`` (pr, stages): the entries of every (row block, stage segment) panel."""
    rows, cols = count_bounds(shape, layout)
    pc = shape.sizes[1]
    nnz = stats.grouped_nnz(rows, cols)
    i, j = coords["row"], coords["col"]
    owner = layout.panel_root if pc > 1 else np.zeros(1, dtype=np.int64)
    own = np.add.reduceat(nnz, np.searchsorted(owner, np.arange(pc)), axis=1) if pc > 1 else nnz
    return ShapeBlocks(shape, stats.num_nodes, coords, layout, nnz, np.diff(rows)[i], own[i, j], nnz.sum(axis=1)[i],
                       stats=stats)


def panel_terms(blocks: ShapeBlocks, backward: bool, sz: SizeInfo) -> list[Term]:
    """The packed Â panels of one SpMM half on ``col`` (``Â[i, s]``, or ``Â[i, s]ᵀ`` in backward): every
    panel of the rank's block row with entries, its own not counted; none on a ``pr x 1`` grid."""
    shape, p = blocks.shape, blocks.shape.world_size
    pc = shape.sizes[1]
    if pc == 1:
        return []
    i, j = blocks.coords["row"], blocks.coords["col"]
    key = ("2d", backward, sz)
    if key not in blocks.cache:
        seg_rows = np.diff(blocks.segments).astype(np.int64)
        heights = np.diff(blocks.row_bounds).astype(np.int64)
        packed_rows = seg_rows[None, :] if backward else heights[:, None]
        packed = packed_bytes(packed_rows, blocks.nnz, sz)  # (pr, nseg)
        owner = blocks.layout.panel_root
        starts = np.searchsorted(owner, np.arange(pc))  # owners ascend: each column block's first segment
        own = np.add.reduceat(packed, starts, axis=1)  # (pr, pc)
        calls = (blocks.nnz > 0).sum(axis=1)
        blocks.cache[key] = (calls[i], packed.sum(axis=1)[i] - own[i, j])
    calls, nbytes = blocks.cache[key]
    phase = "spmm_backward" if backward else "spmm_forward"
    return [term(phase, "broadcast", "col", pc, calls, nbytes, p)]


def spmm_terms(blocks: ShapeBlocks, f: int, backward: bool, sz: SizeInfo, cached: bool = False) -> list[Term]:
    """One dense SpMM half of width ``f``: the packed Â panels on ``col`` (`panel_terms`; not with ``cached``,
    ``--cache-panels``), the X panels (forward) or the partial products (backward) on ``row``."""
    shape, p = blocks.shape, blocks.shape.world_size
    pr, pc = shape.sizes
    phase = "spmm_backward" if backward else "spmm_forward"
    i, j = blocks.coords["row"], blocks.coords["col"]
    seg_rows = np.diff(blocks.segments).astype(np.int64)
    heights = np.diff(blocks.row_bounds).astype(np.int64)
    fw = feature_widths(f, pc)[j]
    terms = [] if cached else panel_terms(blocks, backward, sz)
    if pr > 1:
        active = fw > 0
        dense = np.where(active, (blocks.n - heights[i]) * sz.row_bytes(fw), 0)
        terms.append(term(phase, "reduce" if backward else "broadcast", "row", pr,
                           np.where(active, len(seg_rows), 0), dense, p))
    return terms


def attention_terms(blocks: ShapeBlocks, width: int, heads: int, sizes: SizeInfo,
                    cached: bool = False) -> list[Term]:
    """One GAT layer's attention on 2D: the SUMMA stages of width ``width`` forward and backward (panels on
    ``col`` both ways, X on ``row`` both ways, dX reduced on ``row``), plus the coefficients (K per entry)
    with every panel on ``col`` both ways and the SDDMM's reduce to the owner, the score terms of each owned
    stage on ``row`` (and their gradient's reduce), and the row maximum and sums on ``col`` (two forward, one
    backward). ``cached`` (``--cache-panels``): the panels' patterns stay put; their coefficients move."""
    shape, p = blocks.shape, blocks.shape.world_size
    pr, pc = shape.sizes
    i, j = blocks.coords["row"], blocks.coords["col"]
    stages = np.asarray(blocks.segments)
    seg_rows = np.diff(stages).astype(np.int64)
    layout = blocks.layout
    col_owner, row_owner = layout.panel_root, layout.root
    forward = spmm_terms(blocks, width, False, sizes, cached)
    terms = forward + [replace(t, phase="spmm_backward") for t in forward]
    terms += [t for t in spmm_terms(blocks, width, True, sizes) if t.axis == "row"]
    owned = col_owner[None, :] == j[:, None]  # (P, stages)
    if pr > 1:
        remote = owned & (row_owner[None, :] != i[:, None])
        calls, nbytes = owned.sum(axis=1), (remote * seg_rows[None, :]).sum(axis=1) * sizes.row_bytes(heads)
        terms += [Term(phase, op, "row", pr, calls.astype(np.int64), nbytes.astype(np.int64))
                  for phase, op in (("spmm_forward", "broadcast"), ("spmm_backward", "reduce"))]
    if pc > 1:
        rows = blocks.local_rows.astype(np.int64)
        maxima = 2 * rows * heads * sizes.value * (pc - 1) // pc  # the row maxima stay float32
        terms += [Term("spmm_forward", "all_reduce", "col", pc, np.ones(p, dtype=np.int64), maxima)]
        terms += sum_terms("spmm_forward", "col", pc, rows, heads, j, sizes, 1, p)
        terms += sum_terms("spmm_backward", "col", pc, rows, heads, j, sizes, 1, p)
        nnz = blocks.nnz[i]  # (P, stages): entries of each panel of the rank's block row
        calls = (nnz > 0).sum(axis=1).astype(np.int64)
        nbytes = (nnz * ~owned).sum(axis=1).astype(np.int64) * sizes.row_bytes(heads)
        terms += [Term(phase, op, "col", pc, calls, nbytes) for phase, op in
                  (("spmm_forward", "broadcast"), ("spmm_backward", "broadcast"), ("spmm_backward", "reduce"))]
    return terms


def graph_bytes(blocks: ShapeBlocks, sz: SizeInfo) -> np.ndarray:
    """(P,) bytes of the packed panels the rank keeps, both orientations (`gridgnn.cost.memory_model`)."""
    shape, idx = blocks.shape, sz.index
    heights = np.diff(blocks.row_bounds).astype(np.int64)
    values = 2 * blocks.local_nnz * (idx + sz.sparse_value)
    i = blocks.coords["row"]
    pc = shape.sizes[1]
    layout = blocks.layout
    count = np.bincount(layout.panel_root, minlength=pc)[blocks.coords["col"]]  # panels kept per column
    widths = np.bincount(layout.panel_root, weights=np.diff(layout.segments), minlength=pc).astype(np.int64)
    widths = widths[blocks.coords["col"]]  # Â columns of each process column
    return count * (heights[i] + 1) * idx + (widths + count) * idx + values


def panel_move(layout: StageLayout, i: int, s: int, nnz: int, transpose: bool) -> Move | None:
    """The broadcast on ``col`` of the packed panel Â[block row i, segment s] (``transpose``: its transpose)
    from its owner, with ``nnz`` entries; None when empty (never sent)."""
    if not nnz:
        return None
    a, b = layout.segment(s)
    n_i = layout.row_bounds[i + 1] - layout.row_bounds[i]
    rows, cols = (b - a, n_i) if transpose else (n_i, b - a)
    return Move("broadcast", "col", int(layout.panel_root[s]), "adj", rows, cols=cols, nnz=nnz)


def schedule(shape: GridShape, layout: StageLayout, coords: dict, width: int, panel_nnz, backward: bool,
             cached: bool = False) -> SpMMPlan:
    """One rank's plan of one SpMM half; 2D (``pr x pc``, `gridgnn.spmm.spmm_2d`) and, shared with
    `gridgnn.cost.algorithms.split3d`, 3D (``q x q x d``, `gridgnn.spmm.spmm_3d`: depth slice l runs the
    segments k*d + l). Each stage: the packed panel Â[i, segment] (backward its transpose) broadcast on ``col``
    from its owner, unless empty or ``cached`` (``--cache-panels``: received at set-up); X[segment, j]
    broadcast (forward) or the partial product reduced (backward) on ``row``, where the rank has feature
    columns. 3D with d > 1: G[i, j] all-gathered on ``depth`` before the stages (backward), the partial
    product reduce-scattered on ``depth`` after them (forward). ``panel_nnz``: (segments,) entries of the
    rank's block row of Â per segment; ``width``: the rank's feature columns f_j."""
    nnz = np.asarray(panel_nnz)
    i = coords["row"]
    depth = shape.depth
    n_i = layout.row_bounds[i + 1] - layout.row_bounds[i]
    f_j = width
    op = "reduce" if backward else "broadcast"
    stages = []
    for s in layout.handled_by(coords.get(layout.group_axis, 0)):
        a, b = layout.segment(s)
        z = int(nnz[s])
        panel = None if cached else panel_move(layout, i, s, z, backward)
        dense = Move(op, "row", int(layout.root[s]), "dense", b - a, f_j) if f_j else None
        stages.append(PlannedStage(s, a, b, z > 0, panel, dense))
    before = after = ()
    if depth > 1 and f_j:
        counts = layout.depth_counts(i)
        move = Move("all_gather" if backward else "reduce_scatter", "depth", None, "dense", n_i, f_j, counts=counts)
        before, after = ((move,), ()) if backward else ((), (move,))
    return SpMMPlan(n_i, tuple(stages), before, after)
