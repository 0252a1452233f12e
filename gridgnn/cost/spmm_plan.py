"""The plan of one distributed SpMM, and what it costs: one description of the step, run and priced (pure).

Each algorithm's cost module (`gridgnn.cost.algorithms`) writes ``schedule``: from the grid shape, the stages
(`gridgnn.cost.stages`) and the entries of the rank's Â panels, one rank's `SpMMPlan` of the forward (``Â X``)
or backward (``Âᵀ G``) half of a dense SpMM: its stages in issue order, each with the `Move` s it asks for,
and the moves before and after them. The SpMM modules run that plan (`gridgnn.spmm.staged.StagedSpMM`: each
move becomes one `gridgnn.grid.comm.Communicator` call), and `lower` turns the same moves into the `Step`
records the communicator makes (its byte convention and wire precision): `spmm_steps` is the two composed.
A measured run records exactly these steps (``tests/spmm/test_spmm_distributed.py``, record by record on every
algorithm at world sizes 1-9), and the vectorized cost model `gridgnn.cost.rank_cost`, which prices every rank
at once for the planner, must agree with their sums rank by rank (``tests/cost/test_spmm_plan.py``).

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
block (f_j = 0) are not run. In a wire precision other than fp32 the sums travel as other collectives
(`gridgnn.grid.comm`): an all-reduce as an all-to-all and an all-gather, a reduce-scatter as an all-to-all;
`lower` records them so.

The sparse variants carry the same plan's moves with fewer rows: ``--comm sparse`` on 2D and 3D
(`gridgnn.spmm.sparse_summa`, which runs its carried plan) each stage's row move as an all-to-all of the rows
the receiver's panel touches (`carried_by_rows`) and 3D's depth moves as all-to-alls of the rows a slice makes
non-zero (`carried_by_depth`); ``--comm sparse`` and ``cover`` on 1D/1.5D (`gridgnn.spmm.sparse_15d`,
`cover_15d`) all the stages' row moves as one all-to-all (``merged``), which their exchange object runs where
the plan puts it.
`sparse_spmm_plan` builds those plans from the graph, `lower` records them like any other, and the vectorized
`gridgnn.cost.sparse_cost` is tested against them rank by rank. ``--reorder double-random`` wraps the plan of
``Â Pσᵀ`` between two all-to-alls on ``row`` (`column_ordered`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gridgnn.cost.algorithms import costs_of
from gridgnn.cost.column_order import ColumnOrder, exchange_counts, peer_ranges, row_group
from gridgnn.cost.sparse_stages import slice_counts
from gridgnn.cost.spmm_cost import FLOAT32, SizeInfo
from gridgnn.cost.stages import stage_layout
from gridgnn.cost.terms import Move, SpMMPlan, Step, dense_step, feature_widths
from gridgnn.grid.shape import GridShape
from gridgnn.partition import block_bounds
from gridgnn.sparse.layout import packed_nbytes

__all__ = ["Step", "carried_by_depth", "carried_by_rows", "column_ordered", "lower", "price", "sparse_spmm_plan",
           "spmm_plan", "spmm_steps", "wire_steps"]


def spmm_plan(shape: GridShape, rank: int, n: int, width: int, panel_nnz: np.ndarray | None = None, *,
              backward: bool, parts: tuple[int, ...] | None = None, cached: bool = False,
              column_seed: int | None = None) -> SpMMPlan:
    """The `SpMMPlan` of ``rank`` for one SpMM half of a dense operand ``width`` columns wide on ``shape`` (n
    vertices; on 2D/3D the rank holds its feature block of them).

    ``panel_nnz``: nnz of Â per (row block, segment of `stage_layout`), shape (row blocks, segments); used by
    2D and 3D, whose panels move. ``parts``: a vertex partition the row blocks follow (`gridgnn.cost.stages`).
    ``cached``: the Â panels were received at set-up (``--cache-panels``). ``column_seed``: ``--reorder
    double-random``'s σ (2D, 3D; ``panel_nnz`` then counts ``Â Pσᵀ``), whose moves wrap the plan.
    """
    layout = stage_layout(shape.algo, shape.sizes, n, parts)
    coords = shape.coords(rank)
    row = None if panel_nnz is None else np.asarray(panel_nnz)[coords["row"]]
    local_width = int(feature_widths(width, shape.col_blocks)[coords.get("col", 0)])
    plan = costs_of(shape.algo).schedule(shape, layout, coords, local_width, row, backward, cached)
    if column_seed is None:
        return plan
    ranges = peer_ranges(layout, row_group(layout, coords))
    into, back = exchange_counts(ColumnOrder(layout, column_seed), ranges, coords["row"])
    return column_ordered(plan, local_width, into, back, backward)


def spmm_steps(shape: GridShape, rank: int, n: int, width: int, panel_nnz: np.ndarray | None = None, *,
               backward: bool, sizes: SizeInfo = FLOAT32, parts: tuple[int, ...] | None = None) -> list[Step]:
    """The collectives ``rank`` records for one SpMM half (`spmm_plan` then `lower`), in issue order."""
    plan = spmm_plan(shape, rank, n, width, panel_nnz, backward=backward, parts=parts)
    return lower(plan, shape, shape.coords(rank), sizes)


def sparse_spmm_plan(shape: GridShape, rank: int, stats, width: int, *, backward: bool, comm: str = "sparse",
                     parts: tuple[int, ...] | None = None, cached: bool = False) -> SpMMPlan:
    """The plan of ``rank`` for one SpMM half as ``--comm sparse`` (or ``cover``, 1D/1.5D) carries it, on the graph
    of the exact `gridgnn.cost.graph_stats.GraphStats` ``stats``: the dense plan (`spmm_plan`) with its row moves
    carried by `carried_by_rows` (the touched rows U, or the pairs' covers) and 3D's depth moves by
    `carried_by_depth` (the rows each slice makes non-zero)."""
    layout = stage_layout(shape.algo, shape.sizes, stats.num_nodes, parts)
    coords = shape.coords(rank)
    panel_nnz = stats.grouped_nnz(layout.row_bounds, layout.segments) if shape.splits_features else None
    plan = spmm_plan(shape, rank, stats.num_nodes, width, panel_nnz, backward=backward, parts=parts, cached=cached)
    rows = stats.covers(layout.row_bounds)[0] if comm == "cover" else stats.touched(layout.row_bounds, layout.segments)
    plan = carried_by_rows(plan, coords["row"], rows, backward, merged=not shape.splits_features)
    if shape.depth > 1 and plan.before + plan.after:
        plan = carried_by_depth(plan, coords, slice_counts(stats.indptr, stats.indices, layout.segments, shape.depth))
    return plan


def carried_by_rows(plan: SpMMPlan, me: int, rows: np.ndarray, backward: bool, merged: bool = False) -> SpMMPlan:
    """``plan`` with each stage's row move (on ``row``, from or to the stage's root) carried as an all-to-all of
    the rows that need to travel: ``rows[i, s]`` of segment s for the process at ``row`` coordinate i (forward
    from the root to i; backward, the partial sums, from i to the root), none to or from the root itself. ``me``:
    this rank's ``row`` coordinate. ``merged`` (1D/1.5D): all the stages' moves as one all-to-all, before the
    stages (forward) or after them, before the replica move (backward)."""
    peers = rows.shape[0]
    stages, total = [], np.zeros(peers, dtype=np.int64)
    for stage in plan.stages:
        move = stage.dense
        if move is None:
            stages.append(stage)
            continue
        counts = np.zeros(peers, dtype=np.int64)
        if backward and move.root == me:
            counts[:] = rows[:, stage.segment]
            counts[me] = 0
        elif not backward and move.root != me:
            counts[move.root] = rows[me, stage.segment]
        total += counts
        carried = None if merged else _exchange(move, counts)
        stages.append(replace(stage, dense=carried))
    if not merged:
        return replace(plan, stages=tuple(stages))
    width = next((st.dense.width for st in plan.stages if st.dense is not None), 0)
    carried = "reduce" if backward else "broadcast"
    exchange = (_exchange(Move(carried, "row", None, "dense", 0, width), total),) if peers > 1 else ()
    if backward:
        return replace(plan, stages=tuple(stages), after=exchange + plan.after)
    return replace(plan, stages=tuple(stages), before=plan.before + exchange)


def carried_by_depth(plan: SpMMPlan, coords: dict, rows: np.ndarray) -> SpMMPlan:
    """``plan`` (3D, d > 1) with its depth moves carried as all-to-alls of the rows a slice's partial product makes
    non-zero: ``rows[s, l]`` (S, d), rows of sub-block s with an entry in depth slice l's columns. Forward the
    process of sub-block m receives from slice l the rows of its sub-block that slice l touches; backward it
    receives from slice l the rows of l's sub-block it reads."""
    d = rows.shape[1]
    i, m = coords["row"], coords["depth"]
    block = rows[i * d:(i + 1) * d]  # (sub-block, slice) of block i

    def carried(move: Move) -> Move:
        counts = block[:, m].copy() if move.op == "all_gather" else block[m].copy()
        counts[m] = 0
        return _exchange(move, counts)

    return replace(plan, before=tuple(carried(mv) for mv in plan.before), after=tuple(carried(mv) for mv in plan.after))


def column_ordered(plan: SpMMPlan, width: int, into: np.ndarray, back: np.ndarray, backward: bool) -> SpMMPlan:
    """``plan`` (2D or 3D, built on ``Â Pσᵀ``) between the moves of ``--reorder double-random``
    (`gridgnn.spmm.column_exchange`): forward, the input moved into σ's order before everything; backward, the
    result moved back to the vertex order after everything; each one all-to-all on ``row`` of ``width`` (the rank's
    feature columns; none when 0) receiving ``into`` or ``back`` rows from each peer
    (`gridgnn.cost.column_order.exchange_counts`)."""
    if width == 0:
        return plan
    move = _exchange(Move("permute", "row", None, "dense", 0, width), back if backward else into)
    return replace(plan, after=plan.after + (move,)) if backward else replace(plan, before=(move,) + plan.before)


def _exchange(move: Move, counts: np.ndarray) -> Move:
    """``move`` as an all-to-all on its axis, receiving ``counts[p]`` rows from the process at coordinate p."""
    counts = tuple(int(c) for c in counts)
    return Move("all_to_all", move.axis, move.root, "dense", sum(counts), move.width, counts=counts,
                carries=move.op)


def lower(plan: SpMMPlan, shape: GridShape, coords: dict, sizes: SizeInfo = FLOAT32) -> list[Step]:
    """The `Step` records of running ``plan`` on the rank at ``coords``, in issue order."""
    steps = []
    for move in plan.before:
        steps += wire_steps(move, None, shape.size(move.axis), coords[move.axis], sizes)
    for stage in plan.stages:
        for move in (stage.panel, stage.dense):
            if move is not None:
                steps += wire_steps(move, stage.segment, shape.size(move.axis), coords[move.axis], sizes)
    for move in plan.after:
        steps += wire_steps(move, None, shape.size(move.axis), coords[move.axis], sizes)
    return steps


def wire_steps(move: Move, stage: int | None, size: int, me: int, sz: SizeInfo) -> list[Step]:
    """How the communicator carries ``move`` on an axis of ``size`` processes, from the process at coordinate
    ``me``: the records it makes (none on a group of one), with the bytes received (`gridgnn.grid.comm`'s
    byte convention; activations in the wire precision of ``sz``)."""
    if size == 1:
        return []
    if move.operand == "adj":
        nbytes = 0 if me == move.root else packed_nbytes(move.rows, move.nnz, sz.index, sz.sparse_value)
        return [Step(move.op, move.axis, move.root, stage, "adj", move.rows, 0, move.nnz, nbytes)]
    rows, width = move.rows, move.width
    if move.op in ("broadcast", "reduce"):
        return [dense_step(move.op, move.axis, move.root, stage, rows, width, me, sz)]
    if move.op == "all_to_all":  # rows received from the other processes (never from itself)
        received = rows - move.counts[me]
        return [Step("all_to_all", move.axis, move.root, stage, "dense", received, width, 0,
                     received * sz.row_bytes(width))]
    if move.op == "all_reduce" and sz.exact:
        return [Step("all_reduce", move.axis, None, stage, "dense", rows, width, 0,
                     2 * rows * width * sz.value * (size - 1) // size)]
    if move.op == "all_reduce":  # a reduce-scatter of balanced row chunks, then an all-gather of their sums
        chunks = np.diff(block_bounds(rows, size, allow_empty=True, what="rows"))
        mine, largest = int(chunks[me]), int(chunks.max())
        return [Step("all_to_all", move.axis, None, stage, "dense", mine, width, 0,
                     (size - 1) * mine * sz.row_bytes(width)),
                Step("all_gather", move.axis, None, stage, "dense", largest, width, 0,
                     (size - 1) * largest * sz.row_bytes(width))]
    chunk = max(move.counts)
    if move.op == "all_gather":
        return [Step("all_gather", move.axis, None, stage, "dense", chunk, width, 0,
                     (size - 1) * chunk * sz.row_bytes(width))]
    if move.op == "reduce_scatter" and sz.exact:
        return [Step("reduce_scatter", move.axis, None, stage, "dense", chunk, width, 0,
                     (size - 1) * chunk * width * sz.value)]
    if move.op == "reduce_scatter":  # an all-to-all of the parts, unpadded
        mine = move.counts[me]
        return [Step("all_to_all", move.axis, None, stage, "dense", mine, width, 0,
                     (size - 1) * mine * sz.row_bytes(width))]
    raise ValueError(f"no wire rule for {move.op} of {move.operand}")


def price(steps: list[Step]) -> tuple[int, int]:
    """(bytes received, collective calls) of ``steps``."""
    return sum(step.bytes for step in steps), len(steps)
