"""GAT's attention records, collective by collective and in order, the plan `gridgnn.cost.attention_plan`
lowers to (every algorithm, cached panels too); the plan's closed forms are tested in
``tests/cost/test_attention_plan.py``."""

from __future__ import annotations

import attention_workers as aw
import pytest
import spmm_workers as w

from gridgnn.cost.attention_plan import lower_attention
from gridgnn.grid.shape import resolve_grid
from gridgnn.launch.spawn import run_workers

N, SEED, HEADS, CHANNELS = 37, 4, 2, 3
CASES = {4: [("1d", None, None, False), ("1.5d", 2, None, False), ("2d", None, "2x2", False),
             ("2d", None, "2x2", True), ("2d", None, "1x4", False), ("3d", None, "2x2x1", True)],
         8: [("3d", None, "2x2x2", False), ("3d", None, "2x2x2", True), ("2d", None, "2x4", False),
             ("1.5d", 4, None, False)]}  # 1.5d 2x4: replicas 2 and 3 have an empty share


@pytest.mark.parametrize("world", sorted(CASES))
def test_each_rank_records_its_attention_plan_in_order(world):
    results = run_workers(aw.attention_case, world, CASES[world], N, SEED, HEADS, CHANNELS, timeout_s=240)
    adj = w.random_directed(N, seed=SEED)
    for index, (algo, replication, grid_text, cached) in enumerate(CASES[world]):
        shape = resolve_grid(algo, world, replication=replication, grid=grid_text)
        for rank in range(world):
            plan = aw.plan_for(shape, adj, rank, HEADS * CHANNELS, HEADS, cached)
            planned = [(phase, s.op, s.axis, s.bytes) for phase, s in lower_attention(plan, shape, shape.coords(rank))]
            assert results[rank][index]["records"] == planned, (algo, grid_text, cached, rank)
