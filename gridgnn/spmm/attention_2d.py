"""`Stages2D`: graph attention (`gridgnn.spmm.attention`) on the stages of `gridgnn.spmm.spmm_2d.SpMM2D`.

The SpMM builds its `Stages2D` (`SpMM2D.attention_stages`) and hands itself over as a
`gridgnn.spmm.attention_planned.PlannedSpMM`: this module does not import the SpMM's, so the dependency goes one
way (spmm_2d -> attention_2d).
"""

from __future__ import annotations

import torch

from gridgnn.sparse.attention import EdgeBlock
from gridgnn.spmm.attention_planned import PanelStages, PlannedSpMM


class Stages2D(PanelStages):
    """Attention on the SUMMA stages (`gridgnn.cost.attention_plan`): the owner (i, panel_root[s]) of panel
    Â[i, a:b] computes its coefficients. The score terms s_src[a:b] reach the owners by ``row`` broadcasts within
    their grid column; rows split over the grid row get their maximum and sum by all-reduces on ``col``; the
    coefficients (K per entry) travel with the panel on ``col`` while X[a:b, j] travels on ``row``: the SpMM's
    forward plan, run with one more move per stage. Backward: each process forms its columns' part of the SDDMM,
    reduced on ``col`` to the panel's owner, and its part of αᵀ G, reduced on ``row`` to the rows' owner as the
    SpMM's backward plan says; the score terms' gradients stay partial (the ``col`` all-reduce of
    `gridgnn.parallel.grid_ops.GridOps.head_sum` completes them). Tiles are keyed by their stage segment."""

    def __init__(self, spmm: PlannedSpMM):
        self.spmm, self.comm = spmm, spmm.comm
        self.blocks = {s: EdgeBlock.from_csr(panel.block(False).csr) for s, panel in spmm.own.items()}
        self.row_ids = torch.arange(*spmm.row_range, device=spmm.grid.device)

    def col_ids(self, s: int) -> torch.Tensor:
        return torch.arange(*self.spmm.layout.segment(s), device=self.row_ids.device)
