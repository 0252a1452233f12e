"""End to end for model kinds: a graph prepared for one model holds that model's operator (and, slow: trains
it on a grid from the CLI, losses = the local run's, predicted communication = measured in the metrics file);
the same folder is refused, in one line and before any worker starts, by a model that needs another operator;
``plan --model`` prices the model's own products."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gridgnn.cli.main import main
from gridgnn.config import TrainConfig
from gridgnn.cost.epoch_model import ModelSpec, predict_epoch
from gridgnn.cost.graph_stats import GraphStats
from gridgnn.data.operators import operator_matrix
from gridgnn.data.prepared import open_prepared
from gridgnn.grid.shape import resolve_grid
from gridgnn.nn.trace import model_spec
from gridgnn.train.loop.trainer import Trainer
from gridgnn.train.run.grid_train import model_operator
from gridgnn.train.run.training import build_aggregation, load_graph

DATA = ["--dataset", "csbm:nodes=90,classes=3,features=11", "--directed"]


def _prepare_gin(tmp_path):
    folder = tmp_path / "prepared"
    assert main(["prepare", DATA[1], "--directed", "--model", "gin", "--out", str(folder)]) == 0
    return folder


def test_prepared_folder_holds_its_models_operator_and_refuses_another(tmp_path, capsys):
    folder = _prepare_gin(tmp_path)
    prepared = open_prepared(folder)
    graph = load_graph(TrainConfig(dataset=DATA[1], directed=True))
    assert prepared.operator == "sum" and prepared.norm_adj.nnz == graph.adj.nnz  # A itself, no self-loops
    np.testing.assert_array_equal(prepared.norm_adj[0:90].toarray(), operator_matrix("sum", graph.adj).toarray())
    gin = TrainConfig(dataset=str(folder), model="gin", algo="2d", nprocs=2)
    assert model_operator(gin, prepared) is prepared.norm_adj  # what every worker cuts its blocks from
    capsys.readouterr()
    assert main(["train", "--dataset", str(folder), "--model", "sage", "--algo", "1d", "--nprocs", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds the 'sum' operator" in err[0] and "--model sage" in err[0], err


@pytest.mark.slow
def test_prepared_gin_trains_on_a_grid_from_the_cli(tmp_path):
    folder = _prepare_gin(tmp_path)
    metrics = tmp_path / "m.json"
    argv = ["train", "--dataset", str(folder), "--model", "gin", "--gin-train-eps", "--epochs", "3", "--algo",
            "2d", "--nprocs", "2", "--quiet", "--metrics-out", str(metrics)]
    assert main(argv) == 0
    recorded = json.loads(metrics.read_text())
    assert recorded["config"]["model"] == "gin" and recorded["config"]["gin_train_eps"] is True
    for epoch in recorded["epochs"]:
        assert epoch["comm"]["predicted_by_phase"] == epoch["comm"]["by_phase"]
    config = TrainConfig(dataset=DATA[1], directed=True, model="gin", epochs=3, gin_train_eps=True)
    graph = load_graph(config)
    reference = Trainer(config, graph, build_aggregation(config, graph)).fit()
    assert [e["loss"] for e in recorded["epochs"]] == pytest.approx([r.loss for r in reference.epochs], rel=1e-4)


def test_plan_prices_each_models_products(capsys):
    args = ["plan", "--num-nodes", "1000", "--num-edges", "8000", "--num-features", "64", "--num-classes", "5",
            "--nprocs", "4", "--algo", "2d", "--comm", "dense", "--json", "--no-cache-panels", "--no-full-feature-rows",
            "--no-defer-weight-gather", "--profile", "gpu-cluster"]  # plan lists sparse and every switch too by default
    bytes_by_model = {}
    for flags in ([], ["--model", "sage"], ["--model", "sage", "--sage-normalize"], ["--model", "gin"]):
        assert main(args + flags) == 0
        entry = json.loads(capsys.readouterr().out)[0]
        bytes_by_model[" ".join(flags) or "gcn"] = entry["bytes_per_rank"]
    stats = GraphStats.from_counts(1000, 8000, 64, 5, self_loops=False)
    sage = model_spec(ModelSpec(64, 5, model="sage"), stats)
    expected = predict_epoch(sage, stats, resolve_grid("2d", 4)).bytes.max()
    assert bytes_by_model["--model sage"] == expected
    # SAGE adds the root product's column exchange, normalize the row-norm all-reduces, GIN the MLP's second
    assert bytes_by_model["gcn"] < bytes_by_model["--model sage"] < bytes_by_model["--model sage --sage-normalize"]
    assert bytes_by_model["--model gin"] > bytes_by_model["gcn"]


def test_statistics_count_each_models_operator():
    graph = load_graph(TrainConfig(dataset=DATA[1], directed=True))
    for operator, self_loops in (("gcn", True), ("mean", False), ("sum", False)):
        matrix = operator_matrix(operator, graph.adj)
        stats = GraphStats.from_graph(graph, self_loops=self_loops)
        assert stats.nnz == matrix.nnz
        np.testing.assert_array_equal(stats.indptr, matrix.indptr)
    mean = operator_matrix("mean", graph.adj)
    rows = np.asarray(mean.sum(axis=1)).ravel()
    empty = np.diff(mean.indptr) == 0
    np.testing.assert_allclose(rows[~empty], 1.0, rtol=1e-6)  # a mean; an isolated row aggregates zeros
    assert GraphStats.from_counts(10, 30, 4, 2, self_loops=False).nnz == 30
