"""`Stages15D`: graph attention (`gridgnn.spmm.attention`) on the stages of `gridgnn.spmm.spmm_15d.SpMM15D`.

The SpMM builds its `Stages15D` (`SpMM15D.attention_stages`) and hands itself over as a
`gridgnn.spmm.attention_planned.PlannedSpMM`: this module does not import the SpMM's, so the dependency goes one
way (spmm_15d -> attention_15d).
"""

from __future__ import annotations

import torch

from gridgnn.sparse.attention import EdgeBlock
from gridgnn.spmm.attention import RowStages
from gridgnn.spmm.attention_planned import PlannedMoves, PlannedSpMM


class Stages15D(PlannedMoves, RowStages):
    """Attention on the 1D/1.5D stage structure (`gridgnn.cost.attention_plan`): tiles Â[i, j] for j in this
    replica's share (the plan's owned tiles, `score_stages`: the SpMM's share stages); column block j of a
    row-distributed matrix arrives by their ``row`` broadcasts, parts of column block j are reduced on ``row``
    to (j, k) and made whole on ``rep`` (`score_after`), and row reductions over the replicas' shares are
    all-reduces on ``rep``; the aggregation runs through the same moves at x's width (`RowStages`). Tiles
    are keyed by their column block j."""

    def __init__(self, spmm: PlannedSpMM):
        self.spmm, self.comm = spmm, spmm.comm
        self.blocks = {j: EdgeBlock.from_csr(block.csr) for j, block in spmm.blocks.items()}
        self.row_ids = torch.arange(*spmm.row_range, device=spmm.grid.device)

    def col_ids(self, j: int) -> torch.Tensor:
        return torch.arange(*self.spmm.layout.segment(j), device=self.row_ids.device)
