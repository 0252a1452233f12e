"""The plan of one GAT layer's attention on a grid, and what it records (pure): one description of its moves.

`gridgnn.spmm.attention` runs a layer's edge softmax and weighted aggregation through a rank's
`AttentionStages` (`gridgnn.spmm.attention_15d`, `attention_2d`, `attention_3d`); `attention_schedule` lists the
moves those stages make, for every algorithm at once, from the SpMM's own plans (`gridgnn.cost.algorithms`'
``schedule``) and the stage layout:

=================  ======================================================================================
field              moves (K heads, w this rank's feature columns of the layer's x)
=================  ======================================================================================
``tile``           forward, first: the score terms of the tiles' rows (3D, d > 1: all-gather on ``depth``)
``scores``         forward: s_src's rows of each tile whose coefficients this rank computes (its *owned*
                   tiles: 1.5D its replica's share, 2D the panels it keeps, 3D its one panel), broadcast on
                   ``row`` from their holder, K wide; backward the same stages reduce ds_src's parts there
``score_after``    backward, after those reduces: 1.5D's broadcast of ds_src from replica i mod c on ``rep``
``row_axes``       the axes over which a row's entries are spread: the row maxima (float32) and sums forward,
                   one sum backward, K wide each (1.5D ``rep``; 2D ``col``; 3D ``col`` then ``depth``)
``aggregate``      forward: the SpMM's forward plan at width w (panels on ``col``, x's rows on ``row``, then
                   1.5D's replica sum or 3D's depth reduce-scatter)
``values``         per aggregate stage whose panel moves on ``col`` (2D, 3D): its coefficients (nnz x K),
                   broadcast with the panel, forward and again backward (even with ``--cache-panels``)
``sddmm``          backward, per such stage: the SDDMM's part (nnz x K) reduced to the panel's owner on ``col``
``backward``       backward: the SpMM's backward plan at width w, whose stages reduce dX's parts on ``row``
                   (1.5D then broadcasts dX on ``rep``; 3D first all-gathers G on ``depth``); its panels are not
                   used: the backward reruns the aggregate stages' forward moves beside them
``grad_total``     backward: the score terms' gradient back to the dense rows (1.5D: a sum on ``rep``; 3D: a
                   reduce-scatter on ``depth``)
=================  ======================================================================================

`lower_attention` turns the plan into the records a run makes, phase by phase, in the order the stages issue
them; the planner's closed forms (each algorithm's ``attention_terms``) are tested against it rank by rank.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gridgnn.cost.algorithms import costs_of
from gridgnn.cost.spmm_cost import FLOAT32, SizeInfo
from gridgnn.cost.spmm_plan import wire_steps
from gridgnn.cost.stages import StageLayout
from gridgnn.cost.terms import Move, PlannedStage, SpMMPlan, Step
from gridgnn.grid.shape import GridShape

ROW_AXES = ("rep", "col", "depth")
"""The grid axes that can hold a row's entries, in the order the stages reduce over them."""


@dataclass(frozen=True)
class AttentionPlan:
    """One rank's moves of one GAT layer's attention of ``heads`` heads (the module table)."""

    heads: int
    tile: tuple[Move, ...]
    scores: tuple[PlannedStage, ...]
    score_after: tuple[Move, ...]
    row_axes: tuple[str, ...]
    aggregate: SpMMPlan
    values: tuple[Move | None, ...]
    sddmm: tuple[Move | None, ...]
    backward: SpMMPlan
    grad_total: tuple[Move, ...]


def attention_schedule(shape: GridShape, layout: StageLayout, coords: dict, width: int, heads: int,
                       panel_nnz: np.ndarray | None, cached: bool = False) -> AttentionPlan:
    """The `AttentionPlan` of the rank at ``coords`` for a layer of ``heads`` heads whose x has ``width`` columns
    on this rank; ``panel_nnz``: (segments,) entries of the rank's block row of Â per segment (1D/1.5D: of its
    kept blocks, or None: every block counted as having entries; needed on 2D/3D, whose panels move);
    ``cached``: the forward panels were received at set-up (``--cache-panels``)."""
    costs = costs_of(shape.algo)
    forward = costs.schedule(shape, layout, coords, width, panel_nnz, False, cached)
    backward = costs.schedule(shape, layout, coords, width, panel_nnz, True, cached)
    tile, grad_total = tile_moves(shape, layout, coords, heads)
    values, sddmm = coefficient_moves(layout, forward, panel_nnz, heads)
    return AttentionPlan(heads, tile, score_stages(layout, coords, heads), score_after(shape, layout, coords, heads),
                         row_axes(shape), forward, values, sddmm, backward, grad_total)


def row_axes(shape: GridShape) -> tuple[str, ...]:
    """The axes over which a row's attention entries are spread, in reduction order (the module table)."""
    return tuple(axis for axis in ROW_AXES if axis in shape.axes)


def score_stages(layout: StageLayout, coords: dict, heads: int) -> tuple[PlannedStage, ...]:
    """The rank's owned tiles, each with s_src's rows broadcast on ``row`` from their holder (K = ``heads``
    wide): its group's stages (1.5D its replica's share; 3D its depth slice's), those whose panel it keeps where
    panels move (2D, 3D)."""
    group = coords.get(layout.group_axis, 0) if layout.group_axis else 0
    stages = []
    for s in layout.handled_by(group):
        if layout.panel_root is not None and int(layout.panel_root[s]) != coords["col"]:
            continue
        a, b = layout.segment(s)
        stages.append(PlannedStage(s, a, b, True, None, Move("broadcast", "row", int(layout.root[s]), "dense",
                                                             b - a, heads)))
    return tuple(stages)


def score_after(shape: GridShape, layout: StageLayout, coords: dict, heads: int) -> tuple[Move, ...]:
    """After ds_src's parts are reduced to their owners: 1.5D broadcasts them from replica i mod c on ``rep``."""
    if shape.replication == 1:
        return ()
    i = coords["row"]
    return (Move("broadcast", "rep", i % shape.replication, "dense", _rows_of(layout, i), heads),)


def tile_moves(shape: GridShape, layout: StageLayout, coords: dict, heads: int) -> tuple[tuple[Move, ...],
                                                                                           tuple[Move, ...]]:
    """(``tile``, ``grad_total``) of the module table: 3D with d > 1 all-gathers the score terms of block i's rows
    on ``depth`` and reduce-scatters their gradient; 1.5D sums the gradient over ``rep``; else nothing."""
    i = coords["row"]
    n_i = _rows_of(layout, i)
    if shape.depth > 1:
        counts = layout.depth_counts(i)
        return ((Move("all_gather", "depth", None, "dense", n_i, heads, counts=counts),),
                (Move("reduce_scatter", "depth", None, "dense", n_i, heads, counts=counts),))
    if shape.replication > 1:
        return (), (Move("all_reduce", "rep", None, "dense", n_i, heads),)
    return (), ()


def coefficient_moves(layout: StageLayout, forward: SpMMPlan, panel_nnz: np.ndarray | None,
                      heads: int) -> tuple[tuple[Move | None, ...], tuple[Move | None, ...]]:
    """Per stage of the forward plan where panels move (2D, 3D): the coefficients' broadcast from the panel's
    owner on ``col`` and the SDDMM part's reduce to it (nnz x K each; None for an empty panel, and everywhere
    on 1D/1.5D)."""
    values, sddmm = [], []
    for stage in forward.stages:
        nnz = int(panel_nnz[stage.segment]) if layout.panel_root is not None else 0
        root = int(layout.panel_root[stage.segment]) if nnz else None
        values.append(Move("broadcast", "col", root, "dense", nnz, heads) if nnz else None)
        sddmm.append(Move("reduce", "col", root, "dense", nnz, heads) if nnz else None)
    return tuple(values), tuple(sddmm)


def _rows_of(layout: StageLayout, i: int) -> int:
    return layout.row_bounds[i + 1] - layout.row_bounds[i]


def lower_attention(plan: AttentionPlan, shape: GridShape, coords: dict,
                    sizes: SizeInfo = FLOAT32) -> list[tuple[str, Step]]:
    """The (phase, `Step`) records of running ``plan`` on the rank at ``coords``, in the order the attention
    stages issue them without overlap (`gridgnn.cost.spmm_plan.wire_steps`: the byte convention and the wire
    precision; the row maxima stay float32)."""
    out: list[tuple[str, Step]] = []

    def add(phase: str, moves, stage: int | None = None) -> None:
        for move in moves:
            if move is not None:
                out.extend((phase, step) for step in _wire(move, stage, shape, coords, sizes))

    forward, backward = "spmm_forward", "spmm_backward"
    add(forward, plan.tile)
    for stage in plan.scores:
        add(forward, (stage.dense,), stage.segment)
    add(forward, (Move("all_max", axis, None, "dense", _tile_rows(plan), plan.heads) for axis in plan.row_axes))
    add(forward, (Move("all_reduce", axis, None, "dense", _tile_rows(plan), plan.heads) for axis in plan.row_axes))
    for stage, values in zip(plan.aggregate.stages, plan.values, strict=True):
        add(forward, (stage.panel, values, stage.dense), stage.segment)
    add(forward, plan.aggregate.after)
    add(backward, plan.backward.before)
    for stage, values, sddmm, back in zip(plan.aggregate.stages, plan.values, plan.sddmm, plan.backward.stages,
                                          strict=True):
        add(backward, (stage.panel, values, stage.dense, sddmm, back.dense), stage.segment)
    add(backward, plan.backward.after)
    add(backward, (Move("all_reduce", axis, None, "dense", _tile_rows(plan), plan.heads) for axis in plan.row_axes))
    add(backward, plan.grad_total)
    for stage in plan.scores:
        move = stage.dense
        add(backward, (Move("reduce", move.axis, move.root, "dense", move.rows, move.width),), stage.segment)
    add(backward, plan.score_after)
    return out


def _tile_rows(plan: AttentionPlan) -> int:
    """Rows of the tiles' score terms: the rank's block row of Â."""
    return plan.aggregate.rows


def _wire(move: Move, stage: int | None, shape: GridShape, coords: dict, sizes: SizeInfo) -> list[Step]:
    size, me = shape.size(move.axis), coords[move.axis]
    if move.op == "all_max":  # a softmax's shift: float32 in every precision
        if size == 1:
            return []
        return [Step("all_reduce", move.axis, None, stage, "dense", move.rows, move.width, 0,
                     2 * move.rows * move.width * sizes.value * (size - 1) // size)]
    return wire_steps(move, stage, size, me, sizes)
