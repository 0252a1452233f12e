"""Distributed training equals single-process training, epoch by epoch, on every algorithm."""

from __future__ import annotations

import numpy as np
import pytest
import train_workers as tw
from cost_oracles import training_step_spmm_cost

from gridgnn.config import TrainConfig
from gridgnn.grid.shape import resolve_grid
from gridgnn.launch.spawn import run_workers
from gridgnn.partition import block_bounds
from gridgnn.train.loop.trainer import Trainer
from gridgnn.train.run.training import build_aggregation, load_graph

DATA_ROOT = "../shared/datasets"
GRIDS = [("1d", 4, {}), ("1.5d", 4, {"replication": 2}), ("2d", 4, {}), ("2d", 6, {"grid": "2x3"}),
         ("3d", 8, {})]


def _local(**kwargs):
    config = TrainConfig(**kwargs)
    graph = load_graph(config)
    return Trainer(config, graph, build_aggregation(config, graph)).fit(), graph


def _compare(reference, out):
    ref_loss = np.array([r.loss for r in reference.epochs])
    np.testing.assert_allclose(out["loss"], ref_loss, rtol=1e-4)
    assert out["acc"] == [(r.train_acc, r.val_acc, r.test_acc) for r in reference.epochs]


@pytest.mark.parametrize("dropout", [pytest.param(0.0, marks=pytest.mark.slow), 0.5])  # 0.5: the masks too
def test_cora_ten_epochs_match_local_on_every_grid(dropout):
    kwargs = dict(dataset="cora", data_root=DATA_ROOT, epochs=10, dropout=dropout)
    reference, _ = _local(**kwargs)
    for algo, p, extra in GRIDS:
        outs = run_workers(tw.train_worker, p, dict(kwargs, algo=algo, nprocs=p, **extra), timeout_s=300)
        _compare(reference, outs[0])
        for other in outs[1:]:  # replicated weights stay bit-identical on every rank
            for mine, theirs in zip(outs[0]["weights"], other["weights"], strict=True):
                np.testing.assert_array_equal(mine, theirs)


@pytest.mark.slow  # directed graphs and odd class counts on every grid: test_models_distributed
def test_directed_graph_with_classes_not_dividing_the_grid():
    kwargs = dict(dataset="csbm:nodes=300,classes=5,features=13", directed=True, epochs=8, dropout=0.5)
    reference, graph = _local(**kwargs)
    assert (graph.adj != graph.adj.T).nnz > 0, "the test graph must be directed"
    for algo, p, extra in [("2d", 6, {"grid": "2x3"}), ("3d", 8, {}), ("1.5d", 6, {"replication": 3})]:
        out = run_workers(tw.train_worker, p, dict(kwargs, algo=algo, nprocs=p, **extra), timeout_s=300)[0]
        _compare(reference, out)


def test_aggregate_first_1d_volume_is_cagnets_and_auto_moves_20x_less():
    kwargs = dict(dataset="cora", data_root=DATA_ROOT, epochs=2, algo="1d", nprocs=4)
    graph = load_graph(TrainConfig(**kwargs))
    n, widths = graph.num_nodes, [graph.num_features, 16, graph.num_classes]
    shape = resolve_grid("1d", 4)
    bounds = block_bounds(n, 4)
    spmm = {}
    for order in ("aggregate-first", "auto"):
        out = run_workers(tw.train_worker, 4, dict(kwargs, order=order), timeout_s=300)[0]
        epoch = out["comm"][-1]
        measured = [f + b for f, b in zip(epoch["by_phase"]["spmm_forward"], epoch["by_phase"]["spmm_backward"],
                                          strict=True)]
        for rank in range(4):
            model = training_step_spmm_cost(shape, rank, n, widths, order)
            assert measured[rank] == model.forward_bytes + model.backward_bytes
            assert (epoch["calls_by_phase"]["spmm_forward"][rank] + epoch["calls_by_phase"]["spmm_backward"][rank]
                    == model.forward_calls + model.backward_calls)
        spmm[order] = measured
    for rank in range(4):
        own = bounds[rank + 1] - bounds[rank]
        assert spmm["aggregate-first"][rank] <= 4 * (n - own) * (widths[0] + 2 * widths[1] + widths[2])
        assert spmm["aggregate-first"][rank] >= 20 * spmm["auto"][rank]


@pytest.mark.slow
def test_cora_200_epochs_reach_local_accuracy_on_every_algorithm():
    kwargs = dict(dataset="cora", data_root=DATA_ROOT, epochs=200)
    reference, _ = _local(**kwargs)
    local_test = reference.epochs[-1].test_acc
    assert local_test >= 0.80
    for algo, p, extra in GRIDS[:3] + [("3d", 4, {"grid": "2x2x1"})]:
        out = run_workers(tw.train_worker, p, dict(kwargs, algo=algo, nprocs=p, **extra), timeout_s=600)[0]
        assert abs(out["acc"][-1][2] - local_test) <= 0.005, algo


def test_distributed_runs_are_bit_identical_run_after_run():
    kwargs = dict(dataset="csbm:nodes=400", epochs=5, algo="2d", nprocs=4, dropout=0.5)
    first = run_workers(tw.train_worker, 4, kwargs, timeout_s=300)
    second = run_workers(tw.train_worker, 4, kwargs, timeout_s=300)
    assert first[0]["loss"] == second[0]["loss"] and first[0]["acc"] == second[0]["acc"]
    for a, b in zip(first, second, strict=True):
        for mine, again in zip(a["weights"], b["weights"], strict=True):
            np.testing.assert_array_equal(mine, again)


@pytest.mark.parametrize(("algo", "p", "extra"), [("1.5d", 4, {"replication": 2}), ("3d", 8, {})])
def test_overlap_changes_no_number(algo, p, extra):
    """Training with the SpMM stages overlapped equals training without, bit for bit, bytes for bytes."""
    kwargs = dict(dataset="csbm:nodes=400", epochs=3, algo=algo, nprocs=p, dropout=0.5, **extra)
    blocking = run_workers(tw.train_worker, p, dict(kwargs, overlap=False), timeout_s=300)
    overlapped = run_workers(tw.train_worker, p, dict(kwargs, overlap=True), timeout_s=300)
    assert blocking[0]["loss"] == overlapped[0]["loss"] and blocking[0]["acc"] == overlapped[0]["acc"]
    assert [c["bytes"] for c in blocking[0]["comm"]] == [c["bytes"] for c in overlapped[0]["comm"]]
    for epoch in overlapped[0]["comm"]:
        assert epoch["exposed_comm_time_s"] <= epoch["comm_time_s"] + 1e-3
    for a, b in zip(blocking, overlapped, strict=True):
        for plain, fast in zip(a["weights"], b["weights"], strict=True):
            np.testing.assert_array_equal(plain, fast)
