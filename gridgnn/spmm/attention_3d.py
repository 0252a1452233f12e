"""`Stages3D`: graph attention (`gridgnn.spmm.attention`) on the stages of `gridgnn.spmm.spmm_3d.SpMM3D`.

The SpMM builds its `Stages3D` (`SpMM3D.attention_stages`) and hands itself over as a
`gridgnn.spmm.attention_planned.PlannedSpMM`: this module does not import the SpMM's, so the dependency goes one
way (spmm_3d -> attention_3d).
"""

from __future__ import annotations

import torch

from gridgnn.cost.terms import PlannedStage
from gridgnn.sparse.attention import EdgeBlock
from gridgnn.spmm.attention_planned import PanelStages, PlannedSpMM


class Stages3D(PanelStages):
    """Attention on the Split-3D stages (`gridgnn.cost.attention_plan`): process (i, j, l) computes the
    coefficients of its own panel Â[block i, S[j][l]] (rows: the whole block i). The score terms of block i's
    rows are all-gathered on ``depth``; s_src[S[j][l]] comes from (j, j, l) on ``row``; a row's entries lie on
    the ``col`` and ``depth`` groups, so its maximum and sum are all-reduced on both. The coefficients (K per
    entry) travel with each panel on ``col`` and the partial products are reduce-scattered on ``depth``: the
    SpMM's forward plan, run with one more move per stage. Backward: G all-gathered on ``depth``, each process's
    columns' part of the SDDMM reduced on ``col`` to the panel's owner, αᵀ G reduced on ``row`` as the SpMM's
    backward plan says; the gradient of the block's score terms reduce-scattered on ``depth`` (the ``col``
    all-reduce of `GridOps.head_sum` completes it). Tiles are keyed by their stage k (the root of the stage's
    rows and panel)."""

    def __init__(self, spmm: PlannedSpMM):
        self.spmm, self.comm = spmm, spmm.comm
        self.blocks = {spmm.j: EdgeBlock.from_csr(spmm.own.block(False).csr)}
        i = spmm.i
        self.row_ids = torch.arange(spmm.bounds[i], spmm.bounds[i + 1], device=spmm.grid.device)

    def _key(self, stage: PlannedStage) -> int:
        return int(self.spmm.layout.root[stage.segment])

    def col_ids(self, k: int) -> torch.Tensor:
        return torch.arange(*self.spmm._slice(k), device=self.row_ids.device)
