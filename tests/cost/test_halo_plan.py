"""Message passing's halo exchange as a plan (`gridgnn.cost.halo_cost.halo_plan`): its closed forms
(`halo_terms`) sum the plan's records per rank and (collective, axis), on every grid, in fp32 and int8; and a run
records it, collective by collective in order, from the executor's own plan (`EdgeHalo.plan`) and from the
graph's alike."""

from __future__ import annotations

import halo_workers as hw
import numpy as np
import pytest
import spmm_workers as w
from cost_oracles import assert_terms_sum_steps
from model_helpers import random_stats

from gridgnn.cost.halo_cost import halo_counts, halo_plan, halo_terms
from gridgnn.cost.rank_cost import shape_blocks
from gridgnn.cost.spmm_cost import SizeInfo
from gridgnn.cost.spmm_plan import lower
from gridgnn.cost.stages import stage_layout
from gridgnn.cost.terms import feature_widths
from gridgnn.grid.shape import resolve_grid
from gridgnn.launch.spawn import run_workers

CASES = ([("1d", p, {}) for p in (1, 3)] + [("1.5d", 4, {"replication": 2})]
         + [("2d", p, {"grid": g}) for p, g in [(6, "2x3"), (4, "4x1")]]
         + [("3d", p, {"grid": g}) for p, g in [(8, "2x2x2"), (12, "2x2x3"), (4, "2x2x1")]])


def graph_plan(shape, stats, rank: int, width: int, backward: bool):
    """The plan of ``rank`` from the graph: U over the row sets (3D: the sub-blocks) and the row blocks."""
    layout = stage_layout(shape.algo, shape.sizes, stats.num_nodes)
    sets = layout.segments if layout.group_axis == "depth" else layout.row_bounds
    touched = stats.touched(list(sets), list(layout.row_bounds))
    coords = shape.coords(rank)
    local = int(feature_widths(width, shape.col_blocks)[coords.get("col", 0)])
    counts = halo_counts(touched, coords, shape.depth, backward)
    return halo_plan(shape, layout, coords, local, counts, backward)


@pytest.mark.parametrize("algo,p,extra", CASES)
def test_closed_forms_sum_the_plan(algo, p, extra):
    _, stats = random_stats(43, density=0.12, seed=3, features=3, classes=2)
    shape = resolve_grid(algo, p, **extra)
    blocks = shape_blocks(shape, stats)
    for precision in ("fp32", "int8"):
        sizes = SizeInfo(precision=precision)
        for width in (1, 5):
            for backward in (False, True):
                terms = halo_terms(blocks, width, backward, sizes, separable=True)
                for rank in range(p):
                    plan = graph_plan(shape, stats, rank, width, backward)
                    assert_terms_sum_steps(terms, lower(plan, shape, shape.coords(rank), sizes), rank,
                                           (precision, width, backward, rank))


RUNS = {4: [("1d", None, None), ("1.5d", 2, None), ("2d", None, "2x2"), ("3d", None, "2x2x1")],
        8: [("3d", None, "2x2x2")]}


@pytest.mark.parametrize("world", sorted(RUNS))
def test_a_run_records_the_plan_in_order(world):
    n, seed, width = 37, 6, 5
    results = run_workers(hw.halo_case, world, RUNS[world], n, seed, width, timeout_s=240)
    adj = w.random_directed(n, seed=seed)
    stats = hw.stats_of(adj)
    for index, (algo, c, grid_text) in enumerate(RUNS[world]):
        shape = resolve_grid(algo, world, replication=c, grid=grid_text)
        for rank in range(world):
            got = results[rank][index]
            np.testing.assert_allclose(got["rows"], got["expected_rows"])  # the sources' rows, halo included
            for half, backward in enumerate((False, True)):
                planned = [(s.op, s.axis, s.bytes) for s in
                           lower(graph_plan(shape, stats, rank, width, backward), shape, shape.coords(rank))]
                assert got["records"][half] == planned, (algo, grid_text, rank, backward)
                assert got["own_plan"][half] == planned, (algo, grid_text, rank, backward)
