"""The plan of a GAT layer's attention (`gridgnn.cost.attention_plan`): the planner's closed forms (each
algorithm's ``attention_terms``) sum its records per rank, phase and (collective, axis), on every algorithm, in
every wire precision, with and without cached panels; and it owns the tiles each algorithm's docstring says.
(That a run records exactly these steps, in order, is checked in ``tests/spmm/test_attention_runs_its_plan.py``.)"""

from __future__ import annotations

import numpy as np
import pytest
from attention_workers import plan_for
from cost_oracles import assert_terms_sum_steps
from model_helpers import random_stats

from gridgnn.cost.attention_plan import lower_attention
from gridgnn.cost.epoch_model import attention_terms
from gridgnn.cost.rank_cost import shape_blocks
from gridgnn.cost.spmm_cost import SizeInfo
from gridgnn.cost.stages import stage_layout
from gridgnn.grid.shape import resolve_grid

CASES = ([("1d", p, {}) for p in (1, 3)]
         + [("1.5d", p, {"replication": c}) for p, c in [(4, 2), (6, 3)]]
         + [("2d", p, {"grid": g}) for p, g in [(6, "2x3"), (6, "3x2"), (4, "1x4"), (4, "4x1")]]
         + [("3d", p, {"grid": g}) for p, g in [(8, "2x2x2"), (12, "2x2x3"), (3, "1x1x3"), (4, "2x2x1")]])


@pytest.mark.parametrize("algo,p,extra", CASES)
@pytest.mark.parametrize("precision,cached", [("fp32", False), ("bf16", True), ("int8", False)])
def test_closed_forms_sum_the_plan(algo, p, extra, precision, cached):
    adj, stats = random_stats(41, density=0.15, seed=2, features=3, classes=2)
    shape = resolve_grid(algo, p, **extra)
    blocks = shape_blocks(shape, stats)
    sizes = SizeInfo(precision=precision)
    for heads, channels in ((1, 3), (2, 4), (3, 1)):  # K * C = 3, 8, 3: empty feature blocks on 4 columns
        width = heads * channels
        terms = attention_terms(blocks, width, heads, sizes, cached)
        for rank in range(p):
            plan = plan_for(shape, adj, rank, width, heads, cached)
            assert_terms_sum_steps(terms, lower_attention(plan, shape, shape.coords(rank), sizes), rank,
                                   (heads, rank), by_phase=True)


def test_the_owned_tiles_and_the_axes_of_a_row():
    adj, stats = random_stats(41, density=0.15, seed=2, features=3, classes=2)
    two = resolve_grid("2d", 6, grid="2x3")  # rank (1, 2) keeps the panels of column block 2
    plan = plan_for(two, adj, 5, 8, 2, False)
    layout = stage_layout("2d", (2, 3), 41)
    assert [s.segment for s in plan.scores] == np.flatnonzero(layout.panel_root == 2).tolist()
    assert plan.row_axes == ("col",) and plan.tile == plan.grad_total == ()
    three = resolve_grid("3d", 8, grid="2x2x2")  # rank (0, 1, 1): its one panel is stage 1 of depth slice 1
    plan = plan_for(three, adj, 3, 8, 2, False)
    assert [s.segment for s in plan.scores] == [1 * 2 + 1] and plan.row_axes == ("col", "depth")
    assert [m.op for m in plan.tile + plan.grad_total] == ["all_gather", "reduce_scatter"]
    rep = resolve_grid("1.5d", 4, replication=2)  # rank (1, 0): its replica's share, blocks 0 and... of 2: 0
    plan = plan_for(rep, adj, 2, 8, 2, False)
    assert [s.segment for s in plan.scores] == [0] and plan.row_axes == ("rep",)
    assert [(m.op, m.root) for m in plan.score_after] == [("broadcast", 1)]
