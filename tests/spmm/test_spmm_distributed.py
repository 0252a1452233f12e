"""Every algorithm at world sizes 1..9 against the single-process product, forward and backward.

Also checks that the bytes and calls each rank recorded equal the closed-form cost model exactly, that its
records are the plan's steps (`gridgnn.cost.spmm_plan`) one for one, and that the number of collectives
agrees with torch's own `CommDebugMode`.
"""

from __future__ import annotations

import numpy as np
import pytest
import spmm_workers as w
import torch
from cost_oracles import block_nnz, spmm_cost

from gridgnn.cost.spmm_plan import spmm_steps
from gridgnn.cost.stages import stage_layout
from gridgnn.grid.shape import resolve_grid
from gridgnn.launch.spawn import run_workers

N, SEED = 61, 3
CASES = {
    1: [("1d", None, None), ("1.5d", 1, None), ("2d", None, "1x1"), ("3d", None, "1x1x1")],
    2: [("1d", None, None), ("1.5d", 2, None), ("2d", None, "1x2"), ("2d", None, "2x1"), ("3d", None, "1x1x2")],
    3: [("1d", None, None), ("1.5d", 3, None), ("2d", None, "1x3"), ("3d", None, "1x1x3")],
    4: [("1d", None, None), ("1.5d", 2, None), ("1.5d", 4, None), ("2d", None, "2x2"), ("2d", None, "1x4"),
        ("3d", None, "2x2x1")],
    6: [("1d", None, None), ("1.5d", 2, None), ("1.5d", 3, None), ("2d", None, "2x3"), ("2d", None, "3x2"),
        ("3d", None, "1x1x6")],
    8: [("1d", None, None), ("1.5d", 2, None), ("2d", None, "2x4"), ("3d", None, "2x2x2")],
    9: [("1d", None, None), ("1.5d", 3, None), ("2d", None, "3x3"), ("3d", None, "3x3x1")],
}


def _panel_nnz(adj, shape):
    layout = stage_layout(shape.algo, shape.sizes, adj.shape[0])
    return block_nnz(adj, layout.row_bounds, layout.segments) if shape.algo in ("2d", "3d") else None


def _planned(shape, rank, width, panel_nnz) -> list[tuple]:
    """The plan's collectives of one forward and one backward SpMM, as the workers record them (sorted)."""
    return sorted((step.op, step.axis, step.bytes, phase)
                  for phase, backward in (("spmm_forward", False), ("spmm_backward", True))
                  for step in spmm_steps(shape, rank, N, width, panel_nnz, backward=backward))


def _check_blocks(per_rank: list[dict], key: str, reference: np.ndarray) -> None:
    assembled = np.full(reference.shape, np.nan)
    scale = max(np.abs(reference).max(), 1e-30)
    for res in per_rank:
        (r0, r1), (c0, c1) = res["rows"], res["cols"]
        expected = reference[r0:r1, c0:c1]
        assert res[key].shape == expected.shape
        np.testing.assert_allclose(res[key], expected, rtol=1e-5, atol=1e-6 * scale)
        assembled[r0:r1, c0:c1] = res[key]
    assert not np.isnan(assembled).any(), f"{key}: some entries are held by no rank"
    assert np.linalg.norm(assembled - reference) <= 1e-5 * np.linalg.norm(reference)


@pytest.mark.parametrize("world_size", sorted(CASES))
def test_spmm_matches_single_process_and_cost_model(world_size):
    cases = CASES[world_size]
    device = w.test_device()
    if device == "cuda" and world_size > torch.cuda.device_count():
        pytest.skip(f"needs {world_size} GPUs")
    results = run_workers(w.run_cases, world_size, cases, N, SEED, timeout_s=240,
                          backend="nccl" if device == "cuda" else "gloo")
    adj = w.random_directed(N, seed=SEED)
    dense = adj.toarray().astype(np.float64)
    for case_index, (algo, c, grid_text) in enumerate(cases):
        shape = resolve_grid(algo, world_size, replication=c, grid=grid_text)
        panel_nnz = _panel_nnz(adj, shape)
        for width_index, width in enumerate(w.WIDTHS):
            per_rank = [results[r][case_index][width_index] for r in range(world_size)]
            x, g = (t.double().numpy() for t in w.dense_inputs(N, width, SEED))
            _check_blocks(per_rank, "y", dense @ x)
            _check_blocks(per_rank, "grad", dense.T @ g)
            assert sum(res["stored_nnz"] for res in per_rank) == adj.nnz  # each block kept by one rank
            for rank, res in enumerate(per_rank):
                cost = spmm_cost(shape, rank, N, width, panel_nnz)
                measured = (res["forward_bytes"], res["forward_calls"], res["backward_bytes"],
                            res["backward_calls"])
                assert measured == (cost.forward_bytes, cost.forward_calls, cost.backward_bytes,
                                    cost.backward_calls), (algo, grid_text, c, width, rank)
                assert res["records"] == _planned(shape, rank, width, panel_nnz), (algo, grid_text, c, width, rank)
                assert res["debug_calls"] == res["forward_calls"] + res["backward_calls"]
                if world_size > 1 and res["forward_calls"]:
                    assert res["phases"] == ["spmm_forward", "spmm_backward"]


@pytest.mark.parametrize("world_size", [4, 6])
def test_overlapped_stages_give_identical_numbers_and_counts(world_size):
    """Overlap reorders nothing: the same collectives in the same order, the same products summed in the
    same order; only who waits when changes. Without overlap the records come in the plan's issue order."""
    if w.test_device() == "cuda" and world_size > torch.cuda.device_count():
        pytest.skip(f"needs {world_size} GPUs")
    cases = CASES[world_size]
    results = run_workers(w.run_overlap_pairs, world_size, cases, N, SEED, timeout_s=240,
                          backend="nccl" if w.test_device() == "cuda" else "gloo")
    adj = w.random_directed(N, seed=SEED)
    for rank, rank_results in enumerate(results):
        for case, (blocking, overlapped) in zip(cases, rank_results, strict=True):
            algo, c, grid_text = case
            shape = resolve_grid(algo, world_size, replication=c, grid=grid_text)
            panel_nnz = _panel_nnz(adj, shape)
            for plain, fast in zip(blocking, overlapped, strict=True):
                # without overlap every collective is recorded as it is issued: the plan's order, move by move
                assert plain["sequence"] == [[(s.op, s.axis, s.bytes) for s in spmm_steps(
                    shape, rank, N, plain["width"], panel_nnz, backward=backward)] for backward in (False, True)], case
                assert plain["own_plan"] == plain["sequence"], case  # the plan the SpMM itself runs
                np.testing.assert_array_equal(plain["y"], fast["y"], err_msg=str(case))
                np.testing.assert_array_equal(plain["grad"], fast["grad"], err_msg=str(case))
                assert plain["records"] == fast["records"], case
                assert fast["exposed_within_total"] and plain["exposed_within_total"]
