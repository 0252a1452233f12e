"""``--defer-weight-gather`` on 1D, 1.5D and 2D (3D with d = 1) with sparse features
(`gridgnn.parallel.feature_weight_rows`): the weights read only by the features' products (on 2D each rank's
column block of them) move by rows: each block row sends the gradient rows its
vertices' feature columns touch to their owners and fetches the updated rows it reads after the step. On Cora
(1,433 bag-of-words features): training equals ``--algo local`` and the plain run's weights to rounding; every
rank's step bytes and calls are the model's per phase; the weight-gradient phase moves less than the
all-reduce; a checkpoint holds whole weights and Adam's moments, so a run resumed from it on another grid is
the uninterrupted run."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import sparse_workers as sw
from model_helpers import shared_datasets

from gridgnn.config import TrainConfig
from gridgnn.cost.epoch_model import predict_epoch
from gridgnn.grid.shape import resolve_grid
from gridgnn.launch.spawn import run_workers
from gridgnn.nn.trace import model_spec
from gridgnn.sparse.cut import block_row_columns
from gridgnn.train.loop.trainer import Trainer
from gridgnn.train.run.resolve import reordered_for_grid
from gridgnn.train.run.training import build_aggregation, load_graph


def _cases(root: str) -> list[dict]:
    base = dict(dataset="cora", data_root=root, epochs=4, hidden=8, nprocs=4, weight_decay=5e-4)
    return [dict(base, algo="1d"),
            dict(base, algo="1d", model="sage", comm="sparse", reorder="metis-balanced"),
            dict(base, algo="1.5d", replication=2, model="gat", heads=2, hidden=4),
            dict(base, algo="1d", model="gin", comm="cover", reorder="metis-balanced"),
            dict(base, algo="1d", order="aggregate-first"),  # (Â X) W: no weight reads the features themselves
            dict(base, algo="2d"),  # X W reduce-scatters: each rank's input-column block of W (its rows F_j)
            dict(base, algo="2d", model="sage", full_feature_rows=True, reorder="metis-balanced"),  # W's columns
            dict(base, algo="3d", grid="2x2x1", model="gin"),
            dict(base, algo="2d", model="gat", heads=2, hidden=4),  # attention vectors read whole, beside the rows
            dict(base, algo="3d", grid="2x2x2", nprocs=8)]  # the own rows' sums all-reduced on depth


TAKES_EFFECT = [True, True, True, True, False, True, True, True, True, True]


@pytest.fixture(scope="module")
def trained():
    cases = _cases(str(shared_datasets()))
    both = [dict(kwargs, defer_weight_gather=defer) for kwargs in cases for defer in (False, True)]
    runs = [None] * len(both)  # per run: every rank's output
    for nprocs in sorted({kwargs["nprocs"] for kwargs in both}):
        mine = [k for k, kwargs in enumerate(both) if kwargs["nprocs"] == nprocs]
        ranks = run_workers(sw.train_with_weights, nprocs, [both[k] for k in mine], timeout_s=300)
        for position, k in enumerate(mine):
            runs[k] = [rank[position] for rank in ranks]
    return cases, runs


def test_training_equals_local_and_the_plain_run(trained):
    cases, runs = trained
    for index, kwargs in enumerate(cases):
        plain, deferred = runs[2 * index], runs[2 * index + 1]
        assert deferred[0]["setup"][0]["defer_weight_gather"] is TAKES_EFFECT[index], kwargs
        assert plain[0]["setup"][0]["defer_weight_gather"] is False, kwargs
        local = dataclasses.replace(TrainConfig(**kwargs), algo="local", nprocs=1, replication=1, comm="dense",
                                    reorder="none", grid=None, full_feature_rows=False)
        graph = load_graph(local)
        reference = Trainer(local, graph, build_aggregation(local, graph)).fit()
        np.testing.assert_allclose(deferred[0]["loss"], [r.loss for r in reference.epochs], rtol=1e-4)
        assert deferred[0]["acc"] == [(r.train_acc, r.val_acc, r.test_acc) for r in reference.epochs], kwargs
        assert deferred[0]["best_epoch"] == plain[0]["best_epoch"], kwargs
        for rank in deferred:  # every rank's weights whole at the end, the plain run's to rounding
            for which in ("final", "best"):
                for name, value in rank[which].items():
                    np.testing.assert_allclose(value, plain[0][which][name], rtol=1e-4, atol=1e-6,
                                               err_msg=f"{kwargs} {which} {name}")


def test_each_step_is_the_model_and_moves_fewer_weight_gradient_bytes(trained):
    cases, runs = trained
    for index, kwargs in enumerate(cases):
        plain, deferred = runs[2 * index][0]["comm"], runs[2 * index + 1][0]["comm"]
        run = TrainConfig(**kwargs, defer_weight_gather=True)
        shape = resolve_grid(run.algo, run.nprocs, replication=run.replication, grid=run.grid)
        ordered = reordered_for_grid(run, load_graph(run), shape)
        predicted = predict_epoch(model_spec(run, ordered), ordered, shape, comm=run.comm)
        rows = [t for t in predicted.terms if t.phase == "weight_grad" and t.op == "all_to_all"]
        assert len(rows) == (2 if TAKES_EFFECT[index] else 0), kwargs  # the reduce and the refresh
        for epoch in deferred:
            for phase, values in epoch["by_phase"].items():
                assert values == predicted.bytes_by_phase[phase].tolist(), (kwargs, phase)
                assert epoch["calls_by_phase"][phase] == predicted.calls_by_phase[phase].tolist(), (kwargs, phase)
        for before, after in zip(plain, deferred, strict=True):
            less = np.array(after["by_phase"]["weight_grad"]) < np.array(before["by_phase"]["weight_grad"])
            assert less.all() if TAKES_EFFECT[index] else after["by_phase"] == before["by_phase"], kwargs
            assert after["by_phase"]["spmm_forward"] == before["by_phase"]["spmm_forward"], kwargs


def test_the_touch_counts_are_the_executors_rows():
    """`GraphStats.feature_touch_counts` (the model's) counts the rows `block_row_columns` (the executor's)
    finds, by owner block."""
    from gridgnn.cost.graph_stats import GraphStats
    from gridgnn.partition import block_bounds

    graph = load_graph(TrainConfig(dataset="cora", data_root=str(shared_datasets())))
    stats = GraphStats.from_graph(graph)
    bounds = block_bounds(graph.num_nodes, 3)
    counts = stats.feature_touch_counts(bounds, 3)
    owners = block_bounds(graph.num_features, 3)
    for r, ids in enumerate(block_row_columns(graph.features.indptr, graph.features.indices, bounds,
                                              graph.num_features)):
        assert counts[r].tolist() == np.histogram(ids, bins=owners)[0].tolist()
    assert 0 < counts.sum(axis=1).max() < graph.num_features  # a block row touches part of the features


@pytest.mark.parametrize("first, then", [("1d", "2d"), ("2d", "1d")])
def test_a_checkpoint_holds_whole_weights_and_moments(tmp_path, first, then):
    """Two row-deferred epochs on one grid with a checkpoint at 2, resumed on the other to 5 epochs: the
    uninterrupted run (stale rows or moments of rows a rank did not own would change the losses)."""
    base = dict(dataset="cora", data_root=str(shared_datasets()), epochs=5, hidden=8, nprocs=4, algo=first)
    folder = str(tmp_path / "ckpt")
    cases = [dict(base, defer_weight_gather=True, epochs=2, checkpoint_dir=folder, checkpoint_every=2),
             dict(base, algo=then, checkpoint_dir=folder, resume=True),
             dict(base)]
    out = run_workers(sw.train_with_weights, 4, cases, timeout_s=300)[0]
    resumed, whole = out[1], out[2]
    np.testing.assert_allclose(resumed["loss"], whole["loss"], rtol=1e-4)
    assert resumed["acc"] == whole["acc"]
    for name, value in resumed["final"].items():
        np.testing.assert_allclose(value, whole["final"][name], rtol=1e-4, atol=1e-6)


def test_a_prepared_graph_moves_its_feature_weights_by_rows_as_priced(tmp_path):
    """The workers of a prepared folder read the features' structure from the memory-mapped CSR: the run takes
    effect (``setup.defer_weight_gather``), its bytes equal the prediction on every rank, and it trains as one
    process."""
    import json
    import subprocess
    import sys

    from gridgnn.cli.main import main

    root = str(shared_datasets())
    folder = tmp_path / "cora"
    assert main(["prepare", "cora", "--data-root", root, "--out", str(folder)]) == 0
    out = tmp_path / "m.json"
    done = subprocess.run([sys.executable, "-m", "gridgnn", "train", "--dataset", str(folder), "--algo", "1d",
                           "--nprocs", "2", "--epochs", "3", "--defer-weight-gather", "--comm", "dense",
                           "--reorder", "none", "--quiet", "--metrics-out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    metrics = json.loads(out.read_text())
    assert metrics["setup"]["prepared_graph"] and metrics["setup"]["defer_weight_gather"] is True
    for epoch in metrics["epochs"]:
        assert epoch["comm"]["by_phase"] == epoch["comm"]["predicted_by_phase"]
        assert epoch["comm"]["calls_by_phase"] == epoch["comm"]["predicted_calls_by_phase"]
    local = TrainConfig(dataset="cora", data_root=root, epochs=3)
    graph = load_graph(local)
    reference = Trainer(local, graph, build_aggregation(local, graph)).fit()
    np.testing.assert_allclose([e["loss"] for e in metrics["epochs"]], [r.loss for r in reference.epochs],
                               rtol=1e-4)
