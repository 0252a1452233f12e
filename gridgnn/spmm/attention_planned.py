"""Graph attention's moves on a grid, read from its plan (`gridgnn.cost.attention_plan`): one executor for them.

`PlannedMoves` gives every grid's `gridgnn.spmm.attention.AttentionStages` the collectives that carry score
terms and row reductions: the owned tiles' s_src rows (``gather``) and ds_src parts (``reduce``), the sums and
maxima over a row's processes (``all_reduce``), and 3D's depth moves of the tiles' rows (``tile_rows``,
``grad_total``). `PanelStages` adds the weighted aggregation and its backward where Â's panels move (2D, 3D):
the SpMM's forward plan with each stage's coefficients beside its panel, the SDDMM's parts reduced to the
panels' owners, and dX's parts reduced as the SpMM's backward plan says. 1D/1.5D aggregate with
`gridgnn.spmm.attention.RowStages`, through ``gather`` and ``reduce``.

What they read of the SpMM is `PlannedSpMM` (`gridgnn.spmm.staged.StagedSpMM` is one); this module imports no
SpMM module, so the dependency goes one way.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol

import torch

from gridgnn.cost.attention_plan import AttentionPlan, row_axes, score_after, score_stages, tile_moves
from gridgnn.cost.stages import StageLayout
from gridgnn.cost.terms import Move, PlannedStage, kept
from gridgnn.grid.comm import Communicator
from gridgnn.grid.overlap import Pending
from gridgnn.grid.process_grid import ProcessGrid
from gridgnn.sparse.attention import EdgeBlock, head_segments


class PlannedSpMM(Protocol):
    """What the planned moves read of a distributed SpMM: its grid, collectives and stages (``layout``), this
    rank's ``row`` coordinate ``i``, rows and feature columns, its attention plan, and how a planned stage's
    panel and rows arrive, its rows return and a whole-block move runs (`gridgnn.spmm.staged`). Each grid's
    stages also read, to key and build their tiles: 1D/1.5D ``blocks`` (Â[i, j] of the share); 2D ``own``
    (its kept panels by segment); 3D ``j``, ``bounds``, ``own`` and ``_slice``."""

    grid: ProcessGrid
    comm: Communicator
    layout: StageLayout
    i: int

    @property
    def row_range(self) -> tuple[int, int]: ...

    def col_range(self, width: int) -> tuple[int, int]: ...

    def attention_plan(self, width: int, heads: int) -> AttentionPlan: ...

    def _operand(self, stage: PlannedStage, transpose: bool) -> Pending | None: ...

    def _send_rows(self, stage: PlannedStage, x: torch.Tensor) -> Pending: ...

    def _return_rows(self, stage: PlannedStage, part: torch.Tensor) -> Pending: ...

    def _run_whole(self, move: Move, tensor: torch.Tensor) -> torch.Tensor: ...


class PlannedMoves:
    """The score terms' and row reductions' moves of the attention plan (module docstring). Needs ``spmm`` (a
    `PlannedSpMM`) and ``comm``; tiles are keyed by `_key`."""

    spmm: PlannedSpMM
    comm: Communicator

    def _key(self, stage: PlannedStage) -> int:
        """The key of a stage's tile in ``blocks`` and in the per-tile dicts (default: its segment)."""
        return stage.segment

    def _scores(self, heads: int) -> tuple[PlannedStage, ...]:
        return self._kept_moves(heads)[0]

    def _kept_moves(self, heads: int) -> tuple:
        """(owned tiles, ds_src's after-moves, (tile, grad_total) moves) for ``heads`` heads, built once and kept
        (they depend only on the grid and the heads)."""
        layout, coords, shape = self.spmm.layout, self.spmm.grid.coords, self.spmm.grid.shape
        return kept(self, "_moves", heads, lambda: (score_stages(layout, coords, heads),
                                                    score_after(shape, layout, coords, heads),
                                                    tile_moves(shape, layout, coords, heads)))

    def gather(self, t: torch.Tensor) -> Iterator[tuple[int, torch.Tensor]]:
        """The rows of ``t`` (m x K) of each owned tile's columns, from their holder. Collective on ``row``."""
        t = t.contiguous()
        for stage, held in self.comm.pipeline(self._scores(t.shape[1]), lambda stage: self.spmm._send_rows(stage, t)):
            yield self._key(stage), held

    def reduce(self, parts: Iterable[tuple[int, torch.Tensor]], like: torch.Tensor) -> torch.Tensor:
        """The sum over the grid of every owned tile's part, landing in the rows' holder's rows of ``like`` (others
        zero; then 1.5D's broadcast over the replicas). Collective on ``row`` (and ``rep``)."""
        stages = {self._key(stage): stage for stage in self._scores(like.shape[1])}
        out, mine, r0 = like.new_zeros(like.shape), [], self.spmm.row_range[0]
        with self.comm.in_flight() as flight:
            for s, part in parts:
                part = part.contiguous()
                flight.add(self.spmm._return_rows(stages[s], part))
                if stages[s].dense.root == self.spmm.i:
                    mine.append((stages[s], part))  # summed once the reduce is waited for
        for stage, part in mine:
            out[stage.start - r0:stage.stop - r0] = part
        for move in self._kept_moves(like.shape[1])[1]:
            out = self.spmm._run_whole(move, out)
        return out

    def all_reduce(self, t: torch.Tensor, op: str) -> torch.Tensor:
        """Sum or maximum over the processes holding a row's entries. Collective on the plan's row axes."""
        for axis in row_axes(self.spmm.grid.shape):
            t = self.comm.all_reduce(t.contiguous(), axis, op)
        return t

    def _tile_moves(self, heads: int) -> tuple[tuple[Move, ...], tuple[Move, ...]]:
        return self._kept_moves(heads)[2]

    def tile_rows(self, s_dst: torch.Tensor) -> torch.Tensor:
        """The score terms of the tiles' rows (3D: the whole block row, all-gathered on ``depth``)."""
        for move in self._tile_moves(s_dst.shape[1])[0]:
            s_dst = self.spmm._run_whole(move, s_dst.contiguous())
        return s_dst

    def grad_total(self, t: torch.Tensor) -> torch.Tensor:
        """The tiles' rows' gradient back to this rank's rows (1.5D: summed over ``rep``; 3D: reduce-scattered
        on ``depth``, still partial over ``col`` for `gridgnn.parallel.grid_ops.GridOps.head_sum`)."""
        for move in self._tile_moves(t.shape[1])[1]:
            t = self.spmm._run_whole(move, t.contiguous())
        return t

    def phase(self, name: str):
        return self.comm.phase(name)


class PanelStages(PlannedMoves):
    """``aggregate`` and ``aggregate_backward`` where Â's panels move (2D, 3D), from the attention plan. Needs
    ``blocks`` (the owned tiles, keyed by `_key`)."""

    blocks: dict[int, EdgeBlock]

    def _block(self, key: int, panel) -> EdgeBlock:
        return self.blocks[key] if key in self.blocks else EdgeBlock.from_csr(panel.csr)

    def _issue(self, plan: AttentionPlan, x: torch.Tensor, kept: dict):
        """Issue stage n of the plan's aggregation: the panel's pattern (its ``panel`` move, or kept) and
        coefficients on ``col``, x's rows on ``row``."""

        def issue(n: int):
            stage, move = plan.aggregate.stages[n], plan.values[n]
            values = None
            if move is not None:
                key = self._key(stage)
                held = kept[key].contiguous() if key in kept else x.new_empty((move.rows, move.width))
                values = self.comm.broadcast_async(held, move.axis, root=move.root)
            rows = self.spmm._send_rows(stage, x) if stage.dense is not None else None
            return self.spmm._operand(stage, transpose=False), values, rows

        return issue

    def aggregate(self, kept: dict[int, torch.Tensor], x: torch.Tensor, heads: int, width: int) -> torch.Tensor:
        """This rank's block of Σ over the tiles of the coefficients times x's rows, per head (x: this rank's
        rows and feature block of a ``width`` = K·C wide matrix). Collective on ``col``, ``row`` (and 3D's
        ``depth``)."""
        segments = head_segments(heads, width, self.spmm.col_range(width))
        plan = self.spmm.attention_plan(x.shape[1], heads)
        acc = x.new_zeros((plan.aggregate.rows, x.shape[1]))
        for n, (panel, values, held) in self.comm.pipeline(range(len(plan.aggregate.stages)),
                                                           self._issue(plan, x, kept)):
            if panel is not None and held is not None:
                acc += self._block(self._key(plan.aggregate.stages[n]), panel).aggregate(values, held, segments)
        for move in plan.aggregate.after:  # 3D's reduce-scatter on depth
            acc = self.spmm._run_whole(move, acc)
        return acc if x.shape[1] else x.new_zeros(x.shape)

    def aggregate_backward(self, kept, grad, x, heads, width):
        """(dX block, the owned tiles' dα). Collective on ``col`` (panels, coefficients, SDDMM reduces), ``row``
        (x's rows, dX's reduces) and 3D's ``depth`` (G's all-gather)."""
        segments = head_segments(heads, width, self.spmm.col_range(width))
        plan = self.spmm.attention_plan(x.shape[1], heads)
        full = grad
        for move in plan.backward.before:  # 3D: G's rows of the whole block row
            full = self.spmm._run_whole(move, full.contiguous())
        grad_x, r0, rows, d_kept = grad.new_zeros(grad.shape), self.spmm.row_range[0], [], {}
        with self.comm.in_flight() as flight:
            for n, (panel, values, held) in self.comm.pipeline(range(len(plan.aggregate.stages)),
                                                              self._issue(plan, x, kept)):
                stage, sddmm, back = plan.aggregate.stages[n], plan.sddmm[n], plan.backward.stages[n]
                key = self._key(stage)
                if panel is not None:
                    block = self._block(key, panel)
                    d_part = block.sddmm(full, held, segments, heads) if held is not None else \
                        grad.new_zeros((block.nnz, heads))
                    flight.add(self.comm.reduce_async(d_part, sddmm.axis, root=sddmm.root))
                    if key in self.blocks:
                        d_kept[key] = d_part
                if back.dense is None:
                    continue
                part = block.aggregate_t(values, full, segments) if panel is not None else \
                    grad.new_zeros((stage.stop - stage.start, x.shape[1]))
                flight.add(self.spmm._return_rows(back, part))
                if back.dense.root == self.spmm.i:
                    rows.append((stage.start - r0, stage.stop - r0, part))  # summed once the reduce is waited for
        for lo, hi, part in rows:
            grad_x[lo:hi] = part
        for move in plan.backward.after:  # none on 2D and 3D today; run as the plan records it
            grad_x = self.spmm._run_whole(move, grad_x)
        for key in self.blocks:
            d_kept.setdefault(key, grad.new_zeros((self.blocks[key].nnz, heads)))
        return grad_x, d_kept
