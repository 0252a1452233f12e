"""`Stages2D`: graph attention (`gridgnn.spmm.attention`) on the stages of `gridgnn.spmm.spmm_2d.SpMM2D`.

The SpMM builds its `Stages2D` (`SpMM2D.attention_stages`) and hands itself over as a `SummaSpMM`: this module
does not import the SpMM's, so the dependency goes one way (spmm_2d -> attention_2d).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol

import torch

from gridgnn.cost.terms import PlannedStage, SpMMPlan
from gridgnn.grid.comm import Communicator
from gridgnn.grid.overlap import Pending
from gridgnn.grid.process_grid import ProcessGrid
from gridgnn.sparse.attention import EdgeBlock, head_segments
from gridgnn.sparse.packed import PackedPanel


class SummaSpMM(Protocol):
    """What `Stages2D` reads of a SUMMA SpMM (`gridgnn.spmm.spmm_2d.SpMM2D` is one) on a ``pr x pc`` grid:
    this rank's coordinate ``i`` on ``row`` (global rows ``row_range``; feature columns ``col_range(w)``), the
    stage segments ``stages[s]`` = (a, b) with the ``row`` coordinate of their X rows (``stage_root[s]``) and
    the ``col`` coordinate of their Â panel (``panel_root[s]``), each panel's non-zeros ``panel_nnz[s]``, the
    panels this rank keeps (``own[s]``, n_i x (b - a)) and any stage's panel as ``_panel(s, transpose)`` (a
    `Pending`, or None when empty; collective on ``col`` unless kept), its plan of an SpMM half (``plan``)
    and how a planned stage's panel and rows arrive (``_operand``, ``_send_rows``: `gridgnn.spmm.staged`), the
    grid and its collectives."""

    grid: ProcessGrid
    comm: Communicator
    i: int
    stages: list[tuple[int, int]]
    stage_root: list[int]
    panel_root: list[int]
    panel_nnz: list[int]
    own: dict[int, PackedPanel]

    @property
    def row_range(self) -> tuple[int, int]: ...

    def col_range(self, width: int) -> tuple[int, int]: ...

    def _panel(self, s: int, transpose: bool) -> Pending | None: ...

    def plan(self, width: int, backward: bool) -> SpMMPlan: ...

    def _operand(self, stage: PlannedStage, transpose: bool) -> Pending | None: ...

    def _send_rows(self, stage: PlannedStage, x: torch.Tensor) -> Pending: ...


class Stages2D:
    """Attention on the SUMMA stages: the owner (i, panel_root[s]) of panel Â[i, a:b] computes its
    coefficients. The score terms s_src[a:b] reach the owners by ``row`` broadcasts within their grid column;
    rows split over the grid row get their maximum and sum by all-reduces on ``col``; the coefficients (K per
    entry) travel with the panel on ``col`` while X[a:b, j] travels on ``row``: the SpMM's forward plan, run
    with one more move per stage.
    Backward: each process forms its columns' part of the SDDMM, reduced on ``col`` to the panel's owner,
    and its part of αᵀ G, reduced on ``row`` to the rows' owner as in `SpMM2D.backward`; the score terms'
    gradients stay partial (the ``col`` all-reduce of `gridgnn.parallel.grid_ops.GridOps.head_sum`
    completes them)."""

    def __init__(self, spmm: SummaSpMM):
        self.spmm, self.comm = spmm, spmm.comm
        self.blocks = {s: EdgeBlock.from_csr(panel.block(False).csr) for s, panel in spmm.own.items()}
        self.row_ids = torch.arange(*spmm.row_range, device=spmm.grid.device)

    def col_ids(self, s: int) -> torch.Tensor:
        return torch.arange(*self.spmm.stages[s], device=self.row_ids.device)

    def _row_root(self, s: int) -> int:
        return self.spmm.stage_root[s]

    def gather(self, t: torch.Tensor) -> Iterator[tuple[int, torch.Tensor]]:
        """Rows a:b of ``t`` for each owned stage [a, b). Collective on ``row`` (this grid column)."""
        r0 = self.spmm.row_range[0]

        def issue(s: int):
            a, b = self.spmm.stages[s]
            root = self._row_root(s)
            held = t[a - r0:b - r0].contiguous() if root == self.spmm.i else t.new_empty((b - a, t.shape[1]))
            return self.comm.broadcast_async(held, "row", root=root)

        yield from self.comm.pipeline(sorted(self.blocks), issue)

    def reduce(self, parts: Iterable[tuple[int, torch.Tensor]], like: torch.Tensor) -> torch.Tensor:
        """Rows of ``like`` holding the sum over the grid column of every owned stage's part (other rows
        zero). Collective on ``row``."""
        out, mine, r0 = like.new_zeros(like.shape), [], self.spmm.row_range[0]
        with self.comm.in_flight() as flight:
            for s, part in parts:
                part = part.contiguous()
                flight.add(self.comm.reduce_async(part, "row", root=self._row_root(s)))
                if self._row_root(s) == self.spmm.i:
                    mine.append((s, part))
        for s, part in mine:
            a, b = self.spmm.stages[s]
            out[a - r0:b - r0] = part
        return out

    def all_reduce(self, t: torch.Tensor, op: str) -> torch.Tensor:
        """Sum or maximum over the grid row. Collective on ``col``."""
        return self.comm.all_reduce(t.contiguous(), "col", op)

    def tile_rows(self, s_dst: torch.Tensor) -> torch.Tensor:
        return s_dst

    def grad_total(self, t: torch.Tensor) -> torch.Tensor:
        return t

    def phase(self, name: str):
        return self.comm.phase(name)

    def _values(self, s: int, kept: dict, heads: int, dtype: torch.dtype):
        """Collective on ``col``: the coefficients of panel s, from its owner (None for an empty panel)."""
        nnz = self.spmm.panel_nnz[s]
        if nnz == 0:
            return None
        held = kept[s].contiguous() if s in kept else torch.empty((nnz, heads), dtype=dtype,
                                                                   device=self.row_ids.device)
        return self.comm.broadcast_async(held, "col", root=self.spmm.panel_root[s])

    def _stage(self, x: torch.Tensor, kept: dict, heads: int):
        """Issue a stage of the SpMM's forward plan: the panel's pattern (its ``panel`` move, or kept) and
        coefficients on ``col``, X[a:b, j] on ``row`` (its ``dense`` move)."""

        def issue(stage: PlannedStage):
            panel = self.spmm._operand(stage, transpose=False)
            values = self._values(stage.segment, kept, heads, x.dtype)
            return panel, values, (self.spmm._send_rows(stage, x) if stage.dense is not None else None)

        return issue

    def _block(self, s: int, panel) -> EdgeBlock:
        return self.blocks[s] if s in self.blocks else EdgeBlock.from_csr(panel.csr)

    def aggregate(self, kept: dict[int, torch.Tensor], x: torch.Tensor, heads: int, width: int) -> torch.Tensor:
        """(m, f_j): Σ over the stages of the coefficients times X[a:b, j], per head. Collective on ``col``
        and ``row``."""
        segments = head_segments(heads, width, self.spmm.col_range(width))
        out = x.new_zeros(x.shape)
        stages = self.spmm.plan(x.shape[1], backward=False).stages
        for stage, (panel, values, held) in self.comm.pipeline(stages, self._stage(x, kept, heads)):
            if panel is not None and held is not None:
                out += self._block(stage.segment, panel).aggregate(values, held, segments)
        return out

    def aggregate_backward(self, kept, grad, x, heads, width):
        """(dX block, the owned panels' dα). Collective on ``col`` (panels, coefficients, SDDMM reduces) and
        ``row`` (X, dX reduces)."""
        segments = head_segments(heads, width, self.spmm.col_range(width))
        grad_x, r0 = x.new_zeros(x.shape), self.spmm.row_range[0]
        rows, d_kept = [], {}
        stages = self.spmm.plan(x.shape[1], backward=False).stages  # the forward's moves, run again
        with self.comm.in_flight() as flight:
            for stage, (panel, values, held) in self.comm.pipeline(stages, self._stage(x, kept, heads)):
                s, a, b = stage.segment, stage.start, stage.stop
                if panel is not None:
                    block = self._block(s, panel)
                    d_part = block.sddmm(grad, held, segments, heads) if held is not None else \
                        grad.new_zeros((block.nnz, heads))
                    flight.add(self.comm.reduce_async(d_part, "col", root=self.spmm.panel_root[s]))
                    if s in self.blocks:
                        d_kept[s] = d_part
                if stage.dense is None:
                    continue
                part = block.aggregate_t(values, grad, segments) if panel is not None else \
                    grad.new_zeros((b - a, x.shape[1]))
                flight.add(self.comm.reduce_async(part, "row", root=stage.dense.root))
                if stage.dense.root == self.spmm.i:
                    rows.append((a - r0, b - r0, part))
        for lo, hi, part in rows:
            grad_x[lo:hi] = part
        for s in self.blocks:
            d_kept.setdefault(s, grad.new_zeros((self.blocks[s].nnz, heads)))
        return grad_x, d_kept
