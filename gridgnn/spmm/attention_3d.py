"""`Stages3D`: graph attention (`gridgnn.spmm.attention`) on the stages of `gridgnn.spmm.spmm_3d.SpMM3D`.

The SpMM builds its `Stages3D` (`SpMM3D.attention_stages`) and hands itself over as a `Split3DSpMM`: this
module does not import the SpMM's, so the dependency goes one way (spmm_3d -> attention_3d).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol

import torch

from gridgnn.cost.stages import StageLayout
from gridgnn.cost.terms import Move, PlannedStage, SpMMPlan
from gridgnn.grid.comm import Communicator
from gridgnn.grid.overlap import Pending
from gridgnn.grid.process_grid import ProcessGrid
from gridgnn.sparse.attention import EdgeBlock, head_segments
from gridgnn.sparse.packed import PackedPanel


class Split3DSpMM(Protocol):
    """What `Stages3D` reads of a Split-3D SpMM (`gridgnn.spmm.spmm_3d.SpMM3D` is one) on a ``q x q x d``
    grid: this rank's coordinates ``i`` (``row``) and ``j`` (``col``), the vertex blocks' ``bounds`` (q + 1
    ints), the rows S[k][l] of stage k in this rank's depth slice (``_slice(k)`` = (a, b)), the row counts of
    block i's d sub-blocks (``_depth_counts()``), feature columns ``col_range(w)``, each stage's panel
    non-zeros ``panel_nnz[k]``, the panel this rank keeps (``own``, Â[block i, S[j][l]]) and any stage's panel
    as ``_panel(k, transpose)`` (a `Pending`, or None when empty; collective on ``col`` unless kept), its
    stages (``layout``) and plan of an SpMM half (``plan``) with how a planned stage's panel and rows arrive
    and a whole-block move runs (``_operand``, ``_send_rows``, ``_run_whole``: `gridgnn.spmm.staged`), the grid
    and its collectives."""

    grid: ProcessGrid
    comm: Communicator
    i: int
    j: int
    bounds: list[int]
    panel_nnz: list[int]
    own: PackedPanel
    layout: StageLayout

    def plan(self, width: int, backward: bool) -> SpMMPlan: ...

    def _operand(self, stage: PlannedStage, transpose: bool) -> Pending | None: ...

    def _send_rows(self, stage: PlannedStage, x: torch.Tensor) -> Pending: ...

    def _run_whole(self, move: Move, tensor: torch.Tensor) -> torch.Tensor: ...

    def col_range(self, width: int) -> tuple[int, int]: ...

    def _slice(self, k: int) -> tuple[int, int]: ...

    def _depth_counts(self) -> list[int]: ...

    def _panel(self, k: int, transpose: bool) -> Pending | None: ...


class Stages3D:
    """Attention on the Split-3D stages: process (i, j, l) computes the coefficients of its own panel
    Â[block i, S[j][l]] (rows: the whole block i). The score terms of block i's rows are all-gathered on
    ``depth``; s_src[S[j][l]] comes from (j, j, l) on ``row``; a row's entries lie on the ``col`` and ``depth``
    groups, so its maximum and sum are all-reduced on both. The coefficients (K per entry) travel with each
    panel on ``col`` and the partial products are reduce-scattered on ``depth``: the SpMM's forward plan, run
    with one more move per stage.
    Backward: G all-gathered on ``depth``, each process's columns' part of the SDDMM reduced on ``col`` to the
    panel's owner, αᵀ G reduced on ``row`` as in `SpMM3D.backward`; the gradient of the block's score terms
    reduce-scattered on ``depth`` (the ``col`` all-reduce of `GridOps.head_sum` completes it)."""

    def __init__(self, spmm: Split3DSpMM):
        self.spmm, self.comm = spmm, spmm.comm
        self.blocks = {spmm.j: EdgeBlock.from_csr(spmm.own.block(False).csr)}
        i = spmm.i
        self.row_ids = torch.arange(spmm.bounds[i], spmm.bounds[i + 1], device=spmm.grid.device)

    def col_ids(self, k: int) -> torch.Tensor:
        return torch.arange(*self.spmm._slice(k), device=self.row_ids.device)

    def tile_rows(self, s_dst: torch.Tensor) -> torch.Tensor:
        """(n_i, K): the score terms of block i's rows. Collective on ``depth``."""
        return self.comm.all_gather_rows(s_dst.contiguous(), "depth", self.spmm._depth_counts())

    def grad_total(self, t: torch.Tensor) -> torch.Tensor:
        """Block rows' partial gradient -> this rank's rows, summed over ``depth`` (still partial over
        ``col``). Collective on ``depth``."""
        return self.comm.reduce_scatter_rows(t.contiguous(), "depth", self.spmm._depth_counts())

    def gather(self, t: torch.Tensor) -> Iterator[tuple[int, torch.Tensor]]:
        """Rows S[j][l] of ``t`` for the owned stage j, from (j, j, l). Collective on ``row``."""
        j = self.spmm.j
        a, b = self.spmm._slice(j)
        held = t.contiguous() if self.spmm.i == j else t.new_empty((b - a, t.shape[1]))
        yield from self.comm.pipeline([j], lambda _: self.comm.broadcast_async(held, "row", root=j))

    def reduce(self, parts: Iterable[tuple[int, torch.Tensor]], like: torch.Tensor) -> torch.Tensor:
        """The sum over the grid column of the parts of stage j, landing on (j, j, l) (zeros elsewhere).
        Collective on ``row``."""
        mine = None
        for k, part in parts:
            part = part.contiguous()
            self.comm.reduce(part, "row", root=k)
            if k == self.spmm.i:
                mine = part
        return like.new_zeros(like.shape) if mine is None else mine

    def all_reduce(self, t: torch.Tensor, op: str) -> torch.Tensor:
        """Sum or maximum over the processes holding a block row's entries. Collective on ``col``, ``depth``."""
        t = self.comm.all_reduce(t.contiguous(), "col", op)
        return self.comm.all_reduce(t, "depth", op)

    def phase(self, name: str):
        return self.comm.phase(name)

    def _stage(self, x: torch.Tensor, kept: dict, heads: int):
        """Issue a stage k of the SpMM's forward plan: panel k's pattern (its ``panel`` move, or kept) and
        coefficients on ``col``, X[S[k][l], j] on ``row`` (its ``dense`` move)."""

        def issue(stage: PlannedStage):
            k = self._index(stage)
            panel = self.spmm._operand(stage, transpose=False)
            nnz, values = self.spmm.panel_nnz[k], None
            if nnz:
                held = kept[k].contiguous() if k in kept else x.new_empty((nnz, heads))
                values = self.comm.broadcast_async(held, "col", root=k)
            return panel, values, (self.spmm._send_rows(stage, x) if stage.dense is not None else None)

        return issue

    def _index(self, stage: PlannedStage) -> int:
        """The stage index k (the root of its rows on ``row`` and of its panel on ``col``) of a planned stage."""
        return int(self.spmm.layout.root[stage.segment])

    def _block(self, k: int, panel) -> EdgeBlock:
        return self.blocks[k] if k in self.blocks else EdgeBlock.from_csr(panel.csr)

    def aggregate(self, kept: dict[int, torch.Tensor], x: torch.Tensor, heads: int, width: int) -> torch.Tensor:
        """(rows S[i][l], f_j): the layer's stages summed, then reduce-scattered on ``depth``. Collective on
        ``col``, ``row`` and ``depth``."""
        segments = head_segments(heads, width, self.spmm.col_range(width))
        n_i = self.row_ids.shape[0]
        partial = x.new_zeros((n_i, x.shape[1]))
        plan = self.spmm.plan(x.shape[1], backward=False)
        for stage, (panel, values, held) in self.comm.pipeline(plan.stages, self._stage(x, kept, heads)):
            if panel is not None and held is not None:
                partial += self._block(self._index(stage), panel).aggregate(values, held, segments)
        for move in plan.after:  # the reduce-scatter on depth
            partial = self.spmm._run_whole(move, partial)
        return partial if x.shape[1] else x.new_zeros(x.shape)

    def aggregate_backward(self, kept, grad, x, heads, width):
        """(dX block, the owned panel's dα). Collective on ``depth`` (G), ``col`` (panels, coefficients,
        SDDMM reduce) and ``row`` (X, dX reduces)."""
        segments = head_segments(heads, width, self.spmm.col_range(width))
        f = x.shape[1]
        full = grad.contiguous()
        for move in self.spmm.plan(f, backward=True).before:  # the all-gather on depth
            full = self.spmm._run_whole(move, full)
        grad_x, d_kept = None, {}
        stages = self.spmm.plan(f, backward=False).stages  # the forward's moves, run again
        with self.comm.in_flight() as flight:
            for stage, (panel, values, held) in self.comm.pipeline(stages, self._stage(x, kept, heads)):
                k, a, b = self._index(stage), stage.start, stage.stop
                if panel is not None:
                    block = self._block(k, panel)
                    d_part = block.sddmm(full, held, segments, heads) if held is not None else \
                        grad.new_zeros((block.nnz, heads))
                    flight.add(self.comm.reduce_async(d_part, "col", root=k))
                    if k in self.blocks:
                        d_kept[k] = d_part
                if stage.dense is None:
                    continue
                part = block.aggregate_t(values, full, segments) if panel is not None else \
                    grad.new_zeros((b - a, f))
                flight.add(self.comm.reduce_async(part, "row", root=k))
                if k == self.spmm.i:
                    grad_x = part
        for k in self.blocks:
            d_kept.setdefault(k, grad.new_zeros((self.blocks[k].nnz, heads)))
        return (grad.new_zeros(grad.shape) if grad_x is None else grad_x), d_kept
