"""`Stages15D`: graph attention (`gridgnn.spmm.attention`) on the stages of `gridgnn.spmm.spmm_15d.SpMM15D`.

The SpMM builds its `Stages15D` (`SpMM15D.attention_stages`) and hands itself over as a `RowBlockSpMM`: this
module does not import the SpMM's, so the dependency goes one way (spmm_15d -> attention_15d).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol

import torch

from gridgnn.cost.terms import Move, PlannedStage, SpMMPlan
from gridgnn.grid.comm import Communicator
from gridgnn.grid.overlap import Pending
from gridgnn.grid.process_grid import ProcessGrid
from gridgnn.sparse.attention import EdgeBlock
from gridgnn.sparse.csr import SparseBlock
from gridgnn.spmm.attention import RowStages


class RowBlockSpMM(Protocol):
    """What `Stages15D` reads of a 1D/1.5D SpMM (`gridgnn.spmm.spmm_15d.SpMM15D` is one) on an ``R x c``
    grid: this rank's block row ``i`` (global rows ``row_range``), the vertex blocks' ``bounds`` (R + 1
    ints), the column blocks of its replica's ``share`` and their kept tiles
    ``blocks[j]`` (Â[i, j], n_i x n_j), the ``replication`` c, its plan of an SpMM half (``plan``) with how a
    planned stage's rows travel and a whole-block move runs (``_send_rows``, ``_return_rows``, ``_run_whole``:
    `gridgnn.spmm.staged`), the grid and its collectives."""

    grid: ProcessGrid
    comm: Communicator
    blocks: dict[int, SparseBlock]
    bounds: list[int]
    i: int
    share: list[int]
    replication: int

    @property
    def row_range(self) -> tuple[int, int]: ...

    def plan(self, width: int, backward: bool) -> SpMMPlan: ...

    def _send_rows(self, stage: PlannedStage, x: torch.Tensor) -> Pending: ...

    def _return_rows(self, stage: PlannedStage, part: torch.Tensor) -> Pending: ...

    def _run_whole(self, move: Move, tensor: torch.Tensor) -> torch.Tensor: ...


class Stages15D(RowStages):
    """Attention on the 1D/1.5D stage structure: tiles Â[i, j] for j in this replica's share; column block
    j of a row-distributed matrix arrives by the ``row`` broadcasts of the SpMM's forward plan, parts of
    column block j are reduced on ``row`` to (j, k) and made whole on ``rep`` by its backward plan's moves,
    and row reductions over the replicas' shares are all-reduces on ``rep``."""

    def __init__(self, spmm: RowBlockSpMM):
        self.spmm, self.comm = spmm, spmm.comm
        self.blocks = {j: EdgeBlock.from_csr(block.csr) for j, block in spmm.blocks.items()}
        self.row_ids = torch.arange(*spmm.row_range, device=spmm.grid.device)

    def col_ids(self, j: int) -> torch.Tensor:
        return torch.arange(self.spmm.bounds[j], self.spmm.bounds[j + 1], device=self.row_ids.device)

    def gather(self, t: torch.Tensor) -> Iterator[tuple[int, torch.Tensor]]:
        """Column block j of ``t`` (rows of block j, all columns) for each j of the share: the ``row`` moves of
        the SpMM's forward plan. Collective on ``row``."""
        t = t.contiguous()
        stages = self.spmm.plan(t.shape[1], backward=False).stages
        for stage, held in self.comm.pipeline(stages, lambda stage: self.spmm._send_rows(stage, t)):
            yield stage.segment, held

    def reduce(self, parts: Iterable[tuple[int, torch.Tensor]], like: torch.Tensor) -> torch.Tensor:
        """The sum over the grid of every part of this rank's own column block (rows of ``like``): the moves
        of the SpMM's backward plan. Collective on ``row`` (reduces) then ``rep`` (broadcast)."""
        plan = self.spmm.plan(like.shape[1], backward=True)
        stage_of = {stage.segment: stage for stage in plan.stages}
        mine = None
        with self.comm.in_flight() as flight:
            for j, part in parts:
                part = part.contiguous()
                flight.add(self.spmm._return_rows(stage_of[j], part))
                if j == self.spmm.i:
                    mine = part
        mine = like.new_zeros(like.shape) if mine is None else mine
        for move in plan.after:  # dX[i] from replica i mod c
            mine = self.spmm._run_whole(move, mine)
        return mine

    def all_reduce(self, t: torch.Tensor, op: str) -> torch.Tensor:
        """Sum or maximum over the replicas of this block row. Collective on ``rep``."""
        return self.comm.all_reduce(t.contiguous(), "rep", op) if self.spmm.replication > 1 else t

    def phase(self, name: str):
        return self.comm.phase(name)
