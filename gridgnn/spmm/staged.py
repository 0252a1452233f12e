"""`StagedSpMM`: the one executor of an SpMM plan (`gridgnn.cost.spmm_plan`), shared by 1D, 1.5D, 2D and 3D.

An algorithm's SpMM module builds its rank's blocks of Â and says where a stage's operand comes from; the
collectives, their order and the local products are the plan's, run here the same way on every grid, so the
moves a run makes are the moves the cost model prices (`gridgnn.cost.spmm_plan.lower`).

Forward (``Y = Â X``): ``acc`` (plan.rows x f) = 0; for each planned stage, the operand (the kept block, a
kept panel, or the panel's broadcast on ``col``) and X[a:b] (the ``dense`` move: a broadcast on ``row`` from
its root) are issued, and ``acc += operand @ X[a:b]``; then the ``after`` moves (an all-reduce on ``rep``, a
reduce-scatter on ``depth``) turn ``acc`` into this rank's block of Y. Backward (``dX = Âᵀ G``): the ``before``
moves (an all-gather on ``depth``) rebuild G's block row; for each stage the transposed operand times G is
reduced on ``row`` to the stage's root, which keeps it as rows ``[a, b)`` of dX; then the ``after`` moves (a
broadcast on ``rep``). With overlap the next stage's moves are in flight while this stage multiplies
(`gridgnn.grid.overlap`): the same collectives, issued in the same order, and the same sums; without overlap
each is waited for as it is issued, so the records come in the plan's order (with overlap a stage's reduce may
be recorded after the next stage's panel).
"""

from __future__ import annotations

from abc import abstractmethod

import numpy as np
import torch

from gridgnn.cost.algorithms import costs_of
from gridgnn.cost.attention_plan import AttentionPlan, attention_schedule
from gridgnn.cost.terms import Move, PlannedStage, SpMMPlan, kept
from gridgnn.grid.overlap import Pending
from gridgnn.spmm.base import DistributedSpMM
from gridgnn.spmm.panels import send_panel


class StagedSpMM(DistributedSpMM):
    """A distributed SpMM that runs its `SpMMPlan`. Subclasses provide ``layout`` (their `StageLayout`),
    `_row_nnz`, `_operand` and, where panels can be kept, `_keeps`; the sparse variants carry the plan with
    fewer rows (their `plan`, `_send_rows`, `_return_rows`, `_run_whole`)."""

    def plan(self, width: int, backward: bool) -> SpMMPlan:
        """This rank's plan of one SpMM half whose dense blocks here are ``width`` columns wide (its algorithm's
        ``schedule``, `gridgnn.cost.algorithms`; without the panels kept by ``--cache-panels``). Not
        collective."""
        return costs_of(self.grid.algo).schedule(self.grid.shape, self.layout, self.grid.coords, width,
                                                 self._row_nnz(), backward, self._keeps(backward))

    def planned(self, width: int, backward: bool) -> SpMMPlan:
        """`plan`, built once per (width, direction) and kept: a plan is pure and its inputs (the blocks, the
        kept panels, the exchanges' counts) are fixed at set-up, so no SpMM call rebuilds it. Not collective."""
        return kept(self, "_plans", (width, backward), lambda: self.plan(width, backward))

    def attention_plan(self, width: int, heads: int) -> AttentionPlan:
        """This rank's plan of one GAT layer of ``heads`` heads whose x is ``width`` columns wide here
        (`gridgnn.cost.attention_plan`), built once per (width, heads) and kept. Not collective."""
        return kept(self, "_attention_plans", (width, heads), lambda: attention_schedule(
            self.grid.shape, self.layout, self.grid.coords, width, heads, self._row_nnz(), self._keeps(False)))

    @abstractmethod
    def _row_nnz(self) -> np.ndarray:
        """(segments,) int64: stored entries of this rank's Â blocks (panels) of its block row per segment."""

    def _keeps(self, transpose: bool) -> bool:
        """Whether this rank received the panels of this orientation at set-up (``--cache-panels``)."""
        return False

    @abstractmethod
    def _operand(self, stage: PlannedStage, transpose: bool):
        """Stage's Â block (``transpose``: its transpose) as something with ``wait()`` that delivers a
        `gridgnn.sparse.csr.SparseBlock` (kept: a `gridgnn.grid.overlap.Ready` on 1D/1.5D, the finished
        `Pending` of a `gridgnn.spmm.panels.PanelCache` on 2D/3D; moved: the ``panel`` move's broadcast,
        collective on ``col``), or None when it has no entries."""

    def _send_rows(self, stage: PlannedStage, x: torch.Tensor) -> Pending:
        """Forward: the stage's rows of X from its root (its ``dense`` move: a broadcast, collective on the
        move's axis). Returns a `Pending` that delivers the (b - a) x f rows."""
        move, r0 = stage.dense, self.row_range[0]
        if move.root == self.grid.index(move.axis):
            held = x[stage.start - r0:stage.stop - r0].contiguous()
        else:
            held = x.new_empty((stage.stop - stage.start, x.shape[1]))
        return self.comm.broadcast_async(held, move.axis, root=move.root)

    def _return_rows(self, stage: PlannedStage, part: torch.Tensor) -> Pending:
        """Backward: the stage's partial product summed at its root, in place (its ``dense`` move: a reduce,
        collective on the move's axis)."""
        return self.comm.reduce_async(part, stage.dense.axis, root=stage.dense.root)

    def _run_whole(self, move: Move, tensor: torch.Tensor) -> torch.Tensor:
        """A ``before`` or ``after`` move of the rank's whole block (collective on the move's axis)."""
        if move.op == "all_reduce":
            return self.comm.all_reduce(tensor, move.axis)
        if move.op == "broadcast":
            return self.comm.broadcast(tensor, move.axis, root=move.root)
        if move.op == "reduce_scatter":
            return self.comm.reduce_scatter_rows(tensor, move.axis, list(move.counts))
        if move.op == "all_gather":
            return self.comm.all_gather_rows(tensor, move.axis, list(move.counts))
        raise ValueError(f"no whole-block move {move.op}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """This rank's block of X -> its block of Y (same rows and columns). Collective on the axes of the
        plan's moves (the algorithm module's docstring names them)."""
        width = x.shape[1]
        plan = self.planned(width, backward=False)
        acc = x.new_zeros((plan.rows, width))

        def issue(stage: PlannedStage):
            operand = self._operand(stage, transpose=False)
            return operand, (self._send_rows(stage, x) if stage.dense is not None else None)

        for _, (block, held) in self.comm.pipeline(plan.stages, issue):
            if block is not None and held is not None:
                block.matmul_add(held, acc)
        for move in plan.after:
            acc = self._run_whole(move, acc)
        return acc if width else x.new_zeros(x.shape)

    def backward(self, grad_y: torch.Tensor) -> torch.Tensor:
        """This rank's block of G -> its block of dX. Collective on the axes of the plan's moves."""
        width = grad_y.shape[1]
        plan = self.planned(width, backward=True)
        full = grad_y
        for move in plan.before:
            full = self._run_whole(move, full)
        grad_x, r0, mine = grad_y.new_zeros(grad_y.shape), self.row_range[0], []
        with self.comm.in_flight() as flight:
            for stage, (block,) in self.comm.pipeline(plan.stages, lambda st: (self._operand(st, transpose=True),)):
                if stage.dense is None:
                    continue
                part = block.matmul(full) if block is not None else full.new_zeros((stage.stop - stage.start, width))
                flight.add(self._return_rows(stage, part))
                if stage.dense.root == self.grid.index(stage.dense.axis):
                    mine.append((stage.start - r0, stage.stop - r0, part))  # summed once the move is waited for
        for lo, hi, part in mine:
            grad_x[lo:hi] = part
        for move in plan.after:
            grad_x = self._run_whole(move, grad_x)
        return grad_x


class PanelMovingSpMM(StagedSpMM):
    """A `StagedSpMM` whose Â panels move on ``col`` (2D, 3D): it keeps them in ``cache`` (a
    `gridgnn.spmm.panels.PanelCache`, filled at set-up by ``--cache-panels``) and its own in ``own``; subclasses say
    which cache key and which own panel a stage has (`_panel_key`, `_own_panel`)."""

    moves_panels = True

    @abstractmethod
    def _panel_key(self, stage: PlannedStage) -> int:
        """The stage's key in ``cache``."""

    @abstractmethod
    def _own_panel(self, stage: PlannedStage):
        """This rank's `gridgnn.sparse.packed.PackedPanel` for the stage where it owns it (else anything: only
        read where the rank is the move's root)."""

    def _keeps(self, transpose: bool) -> bool:
        return self.cache.keeps(transpose)

    def _operand(self, stage: PlannedStage, transpose: bool):
        """Stage's panel: kept (not collective) or its ``panel`` move (collective on ``col``); None if empty."""
        if not stage.entries:
            return None
        if stage.panel is None:
            return self.cache.kept(self._panel_key(stage), transpose)
        return send_panel(self.comm, stage.panel, self._own_panel(stage), self.index_dtype, self.dtype, transpose)
