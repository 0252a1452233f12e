"""``--reorder double-random``: Plexus's double random permutation on 2D and 3D (`gridgnn.cost.column_order`,
`gridgnn.spmm.column_exchange`).

The SpMM of Â with its columns in σ's order, between the moves of the dense rows into and out of that order,
equals ``Â X`` and ``Âᵀ G`` on a directed matrix (a transposed move would fail the backward), and moves what the
cost model prices, rank by rank and collective by collective. Training with it equals one process (GCN,
GraphSAGE with cached panels and full feature rows, GIN with deferred weight gathers, 3D with d = 1 and d = 2),
every rank's bytes and calls per phase are the model's, and the order spreads Â's diagonal over the blocks.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import column_workers as cw
import numpy as np
import pytest
import scipy.sparse as sp
import spmm_workers as w
from cost_oracles import block_nnz
from model_helpers import shared_datasets

from gridgnn.config import TrainConfig
from gridgnn.cost.column_order import (
    ColumnOrder,
    column_positions,
    exchange_counts,
    exchanged_rows,
    order_for,
    peer_ranges,
)
from gridgnn.cost.epoch_model import predict_run
from gridgnn.cost.graph_stats import GraphStats
from gridgnn.cost.rank_cost import shape_blocks, spmm_terms
from gridgnn.cost.spmm_plan import lower, spmm_plan
from gridgnn.cost.stages import stage_layout
from gridgnn.data.prepared import open_prepared, prepare_graph
from gridgnn.data.reorder import reorder_graph
from gridgnn.errors import ConfigError
from gridgnn.grid.shape import resolve_grid
from gridgnn.launch.spawn import run_workers
from gridgnn.nn.trace import model_spec
from gridgnn.spmm.column_exchange import ColumnExchange
from gridgnn.train.loop.trainer import Trainer
from gridgnn.train.run.auto import graph_stats
from gridgnn.train.run.resolve import reordered_for_grid
from gridgnn.train.run.training import build_aggregation, load_graph

N, SEED = 37, 3
SPMM_4 = [("2d", "2x2", 5), ("2d", "4x1", 6), ("3d", "2x2x1", 7)]
SPMM_8 = [("3d", "2x2x2", 8)]


def _trainings(root: str, folder: str) -> dict[int, list[dict]]:
    base = dict(dataset="cora", data_root=root, epochs=3, hidden=8, reorder="double-random", comm="dense",
                cache_panels=False, full_feature_rows=False, defer_weight_gather=False, nprocs=4)
    return {4: [dict(base, algo="2d"),
                dict(base, algo="2d", model="sage", cache_panels=True, full_feature_rows=True),
                dict(base, algo="3d", grid="2x2x1", model="gin", defer_weight_gather=True),
                dict(base, algo="auto", comm="auto", cache_panels=None, full_feature_rows=None,
                     defer_weight_gather=None),  # the planner settles the rest on 2D or 3D, dense
                dict(base, dataset=folder, data_root=None, algo="2d")],  # prepared with --reorder double-random
            8: [dict(base, algo="3d", grid="2x2x2", nprocs=8)]}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    cora = load_graph(TrainConfig(dataset="cora", data_root=str(shared_datasets())))
    folder = tmp_path_factory.mktemp("prepared") / "cora"
    prepare_graph(reorder_graph(cora, "double-random", 1, seed=0), folder)
    trainings = _trainings(str(shared_datasets()), str(folder))
    out = {4: run_workers(cw.run_all, 4, SPMM_4, trainings[4], N, SEED, timeout_s=300),
           8: run_workers(cw.run_all, 8, SPMM_8, trainings[8], N, SEED, timeout_s=300)}
    return trainings, out


def panel_nnz(adj, shape, column_seed: int):
    """(row blocks, segments) entries of ``Â Pσᵀ`` per panel of ``shape``'s stages."""
    layout = stage_layout(shape.algo, shape.sizes, adj.shape[0])
    moved = adj.tocoo()
    order = ColumnOrder(layout, column_seed)
    permuted = sp.csr_matrix((moved.data, (moved.row, order.position(moved.col.astype(np.int64)))), shape=adj.shape)
    return block_nnz(permuted, layout.row_bounds, layout.segments)


def _stats(adj, column_seed: int) -> GraphStats:
    return GraphStats("directed", adj.shape[0], adj.nnz, 1, 1, None, adj.indptr, adj.indices,
                      column_seed=column_seed)


def test_the_spmm_is_a_times_x_and_its_transpose_and_moves_what_is_priced(runs):
    _, out = runs
    adj = w.random_directed(N, seed=SEED)
    dense = adj.toarray()
    for world, cases in ((4, SPMM_4), (8, SPMM_8)):
        for index, (algo, grid_text, column_seed) in enumerate(cases):
            shape = resolve_grid(algo, world, grid=grid_text)
            blocks = shape_blocks(shape, _stats(adj, column_seed))
            for k, width in enumerate(w.WIDTHS):
                x, g = (t.numpy() for t in w.dense_inputs(N, width, SEED))
                forward = spmm_terms(blocks, width, backward=False)
                backward = spmm_terms(blocks, width, backward=True)
                moved = 0
                for rank in range(world):
                    got = out[world][rank]["spmm"][index][k]
                    (r0, r1), (c0, c1) = got["rows"], got["cols"]
                    np.testing.assert_allclose(got["y"], (dense @ x)[r0:r1, c0:c1], rtol=1e-5, atol=1e-5)
                    np.testing.assert_allclose(got["grad"], (dense.T @ g)[r0:r1, c0:c1], rtol=1e-5, atol=1e-5)
                    for phase, terms in (("spmm_forward", forward), ("spmm_backward", backward)):
                        records = [r for r in got["records"] if r[3] == phase]
                        assert sum(r[2] for r in records) == sum(int(t.bytes[rank]) for t in terms), \
                            (algo, grid_text, width, rank, phase)
                        assert len(records) == sum(int(t.calls[rank]) for t in terms), (algo, grid_text, rank)
                        moved += sum(r[2] for r in records if r[0] == "all_to_all")
                    # the plan it runs, and the one built from the graph: the same steps as its records
                    nnz = panel_nnz(adj, shape, column_seed)
                    for half, transposed in enumerate((False, True)):
                        phase = "spmm_backward" if transposed else "spmm_forward"
                        recorded = sorted(r[:3] for r in got["records"] if r[3] == phase)
                        planned = lower(spmm_plan(shape, rank, N, width, nnz, backward=transposed,
                                                  column_seed=column_seed), shape, shape.coords(rank))
                        assert sorted((s.op, s.axis, s.bytes) for s in planned) == recorded, (algo, rank, phase)
                        assert sorted(got["own_plan"][half]) == recorded, (algo, rank, phase)
                assert moved > 0, (algo, grid_text)  # the rows did move into σ's order and back


def test_training_equals_one_process_and_the_model_per_rank_and_phase(runs):
    trainings, out = runs
    for world, cases in trainings.items():
        results = out[world][0]["train"]
        for kwargs, got in zip(cases, results, strict=True):
            assert got["reorder"] == "double-random" and got["comm_mode"] == "dense", kwargs
            assert got["algo"] in ("2d", "3d"), kwargs
            local = dataclasses.replace(TrainConfig(**kwargs), algo="local", nprocs=1, grid=None, comm="dense",
                                        reorder="none", cache_panels=False, full_feature_rows=False,
                                        defer_weight_gather=False)
            if kwargs["data_root"] is None:  # the prepared folder: its graph is Cora's
                local = dataclasses.replace(local, dataset="cora", data_root=str(shared_datasets()))
            graph = load_graph(local)
            reference = Trainer(local, graph, build_aggregation(local, graph)).fit()
            np.testing.assert_allclose(got["loss"], [r.loss for r in reference.epochs], rtol=1e-4)
            assert got["acc"] == [(r.train_acc, r.val_acc, r.test_acc) for r in reference.epochs], kwargs
            if kwargs["algo"] == "auto":
                continue  # the settled options are not returned; the pinned cases check the model
            run = TrainConfig(**kwargs)
            shape = resolve_grid(run.algo, run.nprocs, grid=run.grid)
            source = open_prepared(run.dataset) if run.data_root is None else load_graph(run)
            ordered = reordered_for_grid(run, source, shape)
            assert ordered.meta["column_seed"] == run.seed
            predicted = predict_run(model_spec(run, ordered), graph_stats(ordered, run.model), shape, run)
            assert any(t.op == "all_to_all" and t.phase == "spmm_forward" for t in predicted.terms), kwargs
            for epoch in got["comm"]:
                for phase, values in epoch["by_phase"].items():
                    assert values == predicted.bytes_by_phase[phase].tolist(), (kwargs, phase)
                    assert epoch["calls_by_phase"][phase] == predicted.calls_by_phase[phase].tolist(), (kwargs, phase)


def test_sigma_permutes_each_class_into_itself_and_counts_the_moved_rows():
    layout = stage_layout("3d", (3, 3, 2), 50)
    sigma = column_positions(layout, seed=1)
    assert sorted(sigma.tolist()) == list(range(50))
    order = ColumnOrder(layout, seed=1)
    assert np.array_equal(order.vertex(sigma), np.arange(50))  # σ⁻¹, pointwise, in any order of ids
    assert np.array_equal(order.position([7, 3, 7]), sigma[[7, 3, 7]])
    for k in range(3):  # each depth slice's vertices keep to that slice
        for group in range(2):
            a, b = layout.segment(k * 2 + group)
            members = set(np.concatenate([np.arange(*layout.segment(j * 2 + group)) for j in range(3)]).tolist())
            assert set(sigma[a:b].tolist()) <= members
    counts = exchanged_rows(layout, order)
    for k in range(3):
        for group in range(2):
            a, b = layout.segment(k * 2 + group)
            assert counts[k, group] == sum(not a <= s < b for s in sigma[a:b])
            # per peer, as the plan moves them: into σ's order each position comes from its vertex's holder,
            # back each vertex from its position's holder; the executor's exchange agrees
            ranges = peer_ranges(layout, group)
            def holder(v, ranges=ranges):  # the process of this row group holding vertex (or position) v
                return next(p for p, (lo, hi) in enumerate(ranges) if lo <= v < hi)

            into, back = exchange_counts(order, ranges, k)
            assert into.tolist() == [sum(holder(order.vertex([c])[0]) == p != k for c in range(a, b))
                                     for p in range(3)]
            assert back.tolist() == [sum(holder(sigma[v]) == p != k for v in range(a, b)) for p in range(3)]
            exchange = ColumnExchange(None, ranges, k, order)
            assert (exchange.recv_rows, exchange.send_rows) == (into.tolist(), back.tolist())
    two = column_positions(stage_layout("2d", (3, 2), 50), seed=4)
    assert np.array_equal(order_for(50, 3, 1, seed=4).position(np.arange(50)), two)
    assert not np.array_equal(order_for(50, 3, 1, seed=5).position(np.arange(50)), two)


def test_the_second_order_spreads_the_diagonal_over_the_blocks():
    """On Cora at 4 x 4 (P = 16) the most loaded 2D process multiplies fewer entries of Â than under one random
    order, whose diagonal blocks keep every self-loop and symmetric pair."""
    config = TrainConfig(dataset="cora", data_root=str(shared_datasets()))
    graph = load_graph(config)
    shape = resolve_grid("2d", 16)
    loads = {}
    for order in ("random", "double-random"):
        ordered = reorder_graph(graph, order, 4, seed=0)
        loads[order] = shape_blocks(shape, GraphStats.from_graph(ordered)).local_nnz
    assert loads["double-random"].sum() == loads["random"].sum()
    assert loads["double-random"].max() < 0.95 * loads["random"].max(), loads
    single = reorder_graph(graph, "random", 4, seed=0)
    double = reorder_graph(graph, "double-random", 4, seed=0)
    assert np.array_equal(single.meta["reorder_order"], double.meta["reorder_order"])  # the same vertex order
    assert "column_seed" not in single.meta and double.meta["column_seed"] == 0


@pytest.mark.parametrize("kwargs, words", [
    (dict(algo="1d"), "only 2D and 3D"),
    (dict(algo="1.5d", replication=2), "only 2D and 3D"),
    (dict(algo="2d", comm="sparse"), "--comm dense"),
    (dict(algo="2d", model="gat"), "not implemented for --model gat"),
])
def test_what_it_cannot_run_is_refused_in_one_line(kwargs, words):
    with pytest.raises(ConfigError, match=words):
        TrainConfig(dataset="cora", nprocs=4, reorder="double-random", **kwargs).validate()


def test_the_command_line_refuses_1d_and_plan_prices_2d_and_3d_only(tmp_path):
    root = str(shared_datasets())
    train = subprocess.run([sys.executable, "-m", "gridgnn", "train", "--dataset", "cora", "--data-root", root,
                            "--nprocs", "4", "--algo", "1d", "--reorder", "double-random"],
                           capture_output=True, text=True, timeout=120)
    assert train.returncode == 2 and "Traceback" not in train.stderr
    assert len(train.stderr.strip().splitlines()) == 1 and "only 2D and 3D" in train.stderr
    plan = subprocess.run([sys.executable, "-m", "gridgnn", "plan", "--dataset", "cora", "--data-root", root,
                           "--nprocs", "4", "8", "--reorder", "double-random", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert plan.returncode == 0, plan.stderr
    entries = json.loads(plan.stdout)
    assert {e["world_size"] for e in entries} == {4, 8}
    assert {e["algo"] for e in entries} <= {"2d", "3d"}
    assert {e["comm"] for e in entries} == {"dense"} and {e["reorder"] for e in entries} == {"double-random"}


def test_a_checkpoint_resumes_on_another_order_and_grid(tmp_path):
    """Two epochs in the double random order on 2D with a checkpoint, resumed in the graph's own order on 1D to
    four epochs: the uninterrupted run (the checkpoint holds weights in no vertex order)."""
    import sparse_workers as sw

    base = dict(dataset="cora", data_root=str(shared_datasets()), epochs=4, hidden=8, nprocs=4, algo="1d",
                comm="dense", reorder="none", cache_panels=False, full_feature_rows=False, defer_weight_gather=False)
    folder = str(tmp_path / "ckpt")
    cases = [dict(base, algo="2d", reorder="double-random", epochs=2, checkpoint_dir=folder, checkpoint_every=2),
             dict(base, checkpoint_dir=folder, resume=True),
             dict(base)]
    out = run_workers(sw.train_with_weights, 4, cases, timeout_s=300)[0]
    resumed, whole = out[1], out[2]
    np.testing.assert_allclose(resumed["loss"], whole["loss"], rtol=1e-4)
    assert resumed["acc"] == whole["acc"]


def test_plan_refuses_what_train_refuses(tmp_path):
    root = str(shared_datasets())
    for extra, words in ((["--algo", "1d"], "only 2D and 3D"), (["--model", "gat"], "--model gat"),
                         (["--comm", "sparse"], "--comm dense")):
        plan = subprocess.run([sys.executable, "-m", "gridgnn", "plan", "--dataset", "cora", "--data-root", root,
                               "--nprocs", "4", "--reorder", "double-random", *extra],
                              capture_output=True, text=True, timeout=120)
        assert plan.returncode == 2 and "Traceback" not in plan.stderr, plan.stderr
        assert len(plan.stderr.strip().splitlines()) == 1 and words in plan.stderr, plan.stderr


def test_a_double_random_folder_trains_on_1d_in_its_vertex_order(tmp_path):
    """A 1D process holds whole rows: the folder's vertex order (``random``) serves it, pinned or planned."""
    cora = load_graph(TrainConfig(dataset="cora", data_root=str(shared_datasets())))
    folder = tmp_path / "cora"
    prepare_graph(reorder_graph(cora, "double-random", 1, seed=0), folder)
    for reorder in ("random", "auto"):
        metrics = tmp_path / f"{reorder}.json"
        run = subprocess.run([sys.executable, "-m", "gridgnn", "train", "--dataset", str(folder), "--nprocs", "2",
                              "--algo", "1d", "--reorder", reorder, "--epochs", "2", "--metrics-out", str(metrics)],
                             capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr
        assert json.loads(metrics.read_text())["config"]["reorder"] == "random"
