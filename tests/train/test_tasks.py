"""Tasks (issue 33): multiclass with unlabelled vertices, multilabel and regression targets with missing
entries. Targets are read into one canonical form; every algorithm trains every task as one process does;
the metrics equal scikit-learn's; bad targets are one line."""

from __future__ import annotations

import math

import model_workers as mw
import numpy as np
import pytest
import torch
from sklearn.metrics import f1_score, mean_absolute_error, mean_squared_error, r2_score, roc_auc_score
from task_graphs import save_task_graphs, task_graph

from gridgnn.config import TrainConfig
from gridgnn.cost.epoch_model import PHASES
from gridgnn.data.retarget import with_task
from gridgnn.data.targets import canonical_targets, infer_task
from gridgnn.errors import ConfigError, DataError
from gridgnn.launch.spawn import run_workers
from gridgnn.nn.layout import LocalLayout
from gridgnn.train.loop.task_metrics import mean_rocauc, split_metrics
from gridgnn.train.loop.trainer import Trainer
from gridgnn.train.run.training import build_aggregation, load_graph

TASKS = ("multiclass", "multilabel", "regression")


# --- targets ---------------------------------------------------------------------------------------------------

def test_infer_task_from_the_targets():
    assert infer_task(np.array([0, 2, 1, -1])) == "multiclass"
    assert infer_task(np.array([0.0, 2.0, np.nan])) == "multiclass"
    assert infer_task(np.array([[0, 1], [1, np.nan]])) == "multilabel"
    assert infer_task(np.array([0.5, 1.0])) == "regression"
    assert infer_task(np.array([[0.0, 2.0], [1.0, 1.0]])) == "regression"


def test_canonical_targets_mark_missing_entries():
    classes = canonical_targets(np.array([1.0, np.nan, 0.0, 2.0]), 4)
    assert classes.task == "multiclass" and classes.values.tolist() == [1, -1, 0, 2] and classes.num_outputs == 3
    labels = canonical_targets(np.array([[0, 1, np.nan], [1, 0, 0]]), 2)
    assert labels.task == "multilabel" and labels.values.dtype == np.float32 and labels.num_outputs == 3
    values = canonical_targets(np.array([0.5, np.nan, 2.0]), 3, "regression")
    assert values.values.shape == (3, 1) and np.isnan(values.values[1, 0])


@pytest.mark.parametrize("values, task, message", [
    (np.array([0.5, 1.0]), "multiclass", "must be integers"),
    (np.array([[0, 2], [1, 0]]), "multilabel", "must be 0, 1 or NaN"),
    (np.array([[0, 1], [1, 0]]), "multiclass", "one integer per node"),
    (np.array([np.nan, np.nan]), "regression", "no vertex has a target"),
    (np.array([0, 1, 2]), "multiclass", "3 labels for 2 nodes"),
    (np.array([-2, 1]), "multiclass", "negative label -2"),
    (np.array(["a", "b"]), "auto", "must be numbers"),
    (np.array([1.0, np.inf]), "regression", "inf"),
])
def test_bad_targets_are_one_line(values, task, message):
    with pytest.raises(DataError, match=message) as info:
        canonical_targets(values, 2, task)
    assert "\n" not in str(info.value)


def test_a_split_naming_an_unlabelled_vertex_is_refused():
    graph = task_graph("multiclass")
    mask = graph.train_mask.copy()
    mask[np.flatnonzero(graph.labels < 0)[0]] = True
    with pytest.raises(DataError, match="train_mask names 1 vertices without a target"):
        type(graph)(**{**vars(graph), "train_mask": mask})


@pytest.mark.parametrize("task", TASKS)
def test_unlabelled_vertices_are_in_no_split(task):
    graph = task_graph(task)
    unlabelled = ~graph.labelled()
    assert unlabelled.any() or task != "multiclass"
    for mask in (graph.train_mask, graph.val_mask, graph.test_mask):
        assert not (mask & unlabelled).any()
    assert (graph.train_mask | graph.val_mask | graph.test_mask).sum() == graph.labelled().sum()


def test_with_task_reads_classes_as_binary_targets():
    graph = task_graph("multiclass", base="csbm:nodes=80,classes=2,features=5")
    binary = with_task(graph, "multilabel")
    assert binary.task == "multilabel" and binary.num_classes == 1
    assert np.array_equal(np.isnan(binary.labels[:, 0]), graph.labels < 0)
    with pytest.raises(DataError, match="one integer per node"):
        with_task(task_graph("regression"), "multiclass")


# --- metrics against scikit-learn --------------------------------------------------------------------------------

def _metrics(output, targets, task, metric):
    n = output.shape[0]
    mask = torch.ones(n, dtype=torch.bool)
    from gridgnn.train.loop.task_metrics import SplitRows
    rows = SplitRows.of(targets.numpy(), [mask.numpy()] * 3, (0, n), "cpu")
    return split_metrics(output, targets, [mask] * 3, task, metric, LocalLayout(lambda x: x, "gcn", n), rows)[0]


def test_metrics_equal_scikit_learn():
    rng = np.random.default_rng(0)
    truth = (rng.random((300, 4)) > 0.6).astype(np.float32)
    truth[:, 3] = 1.0  # one class only: skipped by rocauc, as OGB's evaluator does
    scores = rng.normal(size=(300, 4)).astype(np.float32) + truth
    scores[:20, 0] = scores[20:40, 0]  # ties share their mean rank
    missing = truth.copy()
    missing[rng.random(truth.shape) < 0.1] = np.nan
    expected = np.mean([roc_auc_score(missing[~np.isnan(missing[:, k]), k], scores[~np.isnan(missing[:, k]), k])
                        for k in range(3)])
    assert math.isclose(mean_rocauc(missing, scores), expected, rel_tol=1e-12)
    got = _metrics(torch.from_numpy(scores), torch.from_numpy(missing), "multilabel", "rocauc")
    assert math.isclose(got, expected, rel_tol=1e-12)
    present = ~np.isnan(missing)
    f1 = f1_score(missing[present], (scores > 0)[present], average="binary")  # pooled positives: micro-F1
    got = _metrics(torch.from_numpy(scores), torch.from_numpy(missing), "multilabel", "micro-f1")
    assert math.isclose(got, f1, rel_tol=1e-12)
    values = rng.normal(size=(300, 2)) * [1.0, 5.0] + [0.0, 3.0]
    predicted = values + rng.normal(size=values.shape) * 0.5
    out, want = torch.from_numpy(predicted), torch.from_numpy(values)
    assert math.isclose(_metrics(out, want, "regression", "mse"), mean_squared_error(values, predicted), rel_tol=1e-9)
    assert math.isclose(_metrics(out, want, "regression", "mae"), mean_absolute_error(values, predicted),
                        rel_tol=1e-9)
    assert math.isclose(_metrics(out, want, "regression", "r2"), r2_score(values, predicted), rel_tol=1e-9)


# --- training: one process, then every algorithm -----------------------------------------------------------------

COMMON = dict(epochs=3, dropout=0.5, hidden=8, directed=True)


def _local(kwargs: dict):
    config = TrainConfig(**kwargs)
    graph = load_graph(config)
    result = Trainer(config, graph, build_aggregation(config, graph)).fit()
    return [r.loss for r in result.epochs], [(r.train_metric, r.val_metric, r.test_metric) for r in result.epochs]


@pytest.mark.parametrize("task", TASKS)
def test_one_process_learns_each_task(tmp_path, task):
    path = save_task_graphs(tmp_path)[task]
    model = "sage" if task == "regression" else "gcn"  # a neighbourhood mean: SAGE-mean's own aggregation
    config = TrainConfig(dataset=path, directed=True, epochs=100, hidden=32, dropout=0.0, lr=0.02,
                         weight_decay=0.0, model=model)
    graph = load_graph(config)
    result = Trainer(config, graph, build_aggregation(config, graph)).fit()
    first, last = result.epochs[0], result.epochs[-1]
    assert last.loss < 0.7 * first.loss
    if task == "regression":  # errors well below the targets' variance
        variance = float(np.nanvar(graph.labels[graph.test_mask]))
        assert result.metric == "mse" and last.test_metric < 0.5 * variance
    elif task == "multilabel":
        assert result.metric == "rocauc" and last.test_metric > 0.75
    else:
        assert result.metric == "accuracy" and last.test_metric == last.test_acc and last.test_metric > 0.5


GRIDS = {4: [dict(algo="1d"), dict(algo="1.5d", replication=2), dict(algo="2d", grid="2x2")],
         8: [dict(algo="3d", grid="2x2x2")]}
METRICS = {"multiclass": ["accuracy"], "multilabel": ["rocauc", "micro-f1"], "regression": ["mse", "r2"]}


@pytest.mark.parametrize("world", sorted(GRIDS))
def test_every_algorithm_trains_every_task_as_one_process(tmp_path, world):
    paths = save_task_graphs(tmp_path)
    tasks = [dict(dataset=paths[task], metric=metric) for task in TASKS for metric in METRICS[task]]
    cases = [dict(COMMON, **task, **grid, nprocs=world) for grid in GRIDS[world] for task in tasks]
    references = [_local(dict(COMMON, **task)) for task in tasks]
    per_rank = run_workers(mw.models_worker, world, cases, timeout_s=600)
    for index, case in enumerate(cases):
        where = f"{case['algo']} {case['dataset']} {case['metric']}"
        out = per_rank[0][index]
        losses, metrics = references[index % len(tasks)]
        np.testing.assert_allclose(out["loss"], losses, rtol=1e-4, atol=1e-6, err_msg=where)
        np.testing.assert_allclose(np.array(out["metric"], dtype=float), np.array(metrics, dtype=float),
                                   rtol=1e-5, atol=1e-9, err_msg=where)
        if case["metric"] in ("accuracy", "rocauc", "micro-f1"):  # counts and ranks: identical
            assert out["metric"] == metrics, where
        for other in per_rank[1:]:
            for mine, theirs in zip(out["weights"], other[index]["weights"], strict=True):
                np.testing.assert_array_equal(mine, theirs, err_msg=where)
        for epoch in out["comm"]:  # the step moves what the cost model predicts, whatever the task
            for phase in PHASES:
                assert epoch["by_phase"][phase] == out["predicted"]["bytes"][phase].tolist(), (where, phase)


def test_a_metric_the_task_cannot_score_is_refused(tmp_path):
    path = save_task_graphs(tmp_path)["regression"]
    config = TrainConfig(dataset=path, metric="rocauc")
    graph = load_graph(config)
    with pytest.raises(ConfigError, match="--metric rocauc does not score a regression task"):
        Trainer(config, graph, build_aggregation(config, graph))
    with pytest.raises(ConfigError, match="does not score a multiclass task"):
        TrainConfig(task="multiclass", metric="mse")


def test_every_model_trains_multilabel_and_regression_on_a_2d_grid_as_one_process(tmp_path):
    paths = save_task_graphs(tmp_path)
    models = [dict(model="sage"), dict(model="gin", gin_eps=0.2), dict(model="gat", heads=2)]
    tasks = [dict(dataset=paths["multilabel"], metric="rocauc"), dict(dataset=paths["regression"], metric="mae")]
    cases = [dict(COMMON, **model, **task, algo="2d", grid="2x2", nprocs=4) for model in models for task in tasks]
    references = [_local(dict(COMMON, **model, **task)) for model in models for task in tasks]
    per_rank = run_workers(mw.models_worker, 4, cases, timeout_s=600)
    for index, case in enumerate(cases):
        where = f"{case['model']} {case['metric']}"
        out, (losses, metrics) = per_rank[0][index], references[index]
        np.testing.assert_allclose(out["loss"], losses, rtol=1e-4, atol=1e-6, err_msg=where)
        np.testing.assert_allclose(np.array(out["metric"], dtype=float), np.array(metrics, dtype=float),
                                   rtol=1e-5, atol=1e-9, err_msg=where)


@pytest.mark.parametrize("task, metric", [("regression", "mse"), ("multilabel", "rocauc")])
def test_train_outputs_and_predict_speak_the_tasks_metric(tmp_path, capsys, task, metric):
    import json

    from gridgnn.cli.main import main

    path = save_task_graphs(tmp_path)[task]
    model, preds, metrics = tmp_path / "m.pt", tmp_path / "p.npy", tmp_path / "metrics.json"
    assert main(["train", "--dataset", path, "--directed", "--epochs", "4", "--save-model", str(model),
                 "--predictions-out", str(preds), "--metrics-out", str(metrics), "--log-csv",
                 str(tmp_path / "run.csv")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"task       {task} (inferred from the targets)") and f"metric {metric}" in out[0]
    final = json.loads(metrics.read_text())["final"]
    assert final["metric"] == metric and "train_acc" not in final
    assert (tmp_path / "run.csv").read_text().splitlines()[0].split(",")[2:5] == [
        f"{split}_{metric}" for split in ("train", "val", "test")]
    records = np.load(preds)
    graph = load_graph(TrainConfig(dataset=path, directed=True))
    assert records["predicted"].shape == (graph.num_nodes, graph.num_classes)
    if task == "multilabel":
        assert set(np.unique(records["predicted"])) <= {0, 1} and records["probabilities"].max() <= 1
    scored = tmp_path / "scored.json"
    assert main(["predict", "--model", str(model), "--dataset", path, "--directed", "--metrics-out", str(scored),
                 "--eval-split", "test"]) == 0
    line = capsys.readouterr().out.splitlines()[0]
    document = json.loads(scored.read_text())
    entry = document["metric"]["test"]
    assert entry["metric"] == metric and line.startswith(f"{metric:<10} test ")
    weights_epoch = final["best_epoch"]  # the model file holds the best epoch's weights: its test metric
    history = json.loads(metrics.read_text())["epochs"]
    assert math.isclose(entry["value"], history[weights_epoch - 1]["test_metric"], rel_tol=1e-5)


@pytest.mark.parametrize("model", ["gcn", "sage"])
def test_model_files_record_the_task_and_pyg_gives_the_same_values(tmp_path, model):
    import gridgnn
    from gridgnn.data.interop import graph_to_pyg

    pytest.importorskip("torch_geometric")
    graph = task_graph("regression")
    trained = gridgnn.fit(graph, epochs=3, model=model, directed=True)
    path = trained.save(tmp_path / "model.pt")
    assert torch.load(path, weights_only=True)["config"]["task"] == "regression"
    loaded = gridgnn.load_model(path)
    assert loaded.task == "regression" and loaded.output == "identity"
    values = gridgnn.predict(loaded, graph)
    assert values.probabilities is None and torch.equal(values.predicted, trained.predict().predicted)
    data = graph_to_pyg(graph)
    pyg = gridgnn.to_pyg(loaded)(data.x, data.edge_index)
    assert (pyg - values.predicted).abs().max().item() < 1e-5  # values, not log-probabilities


def test_standardized_targets_train_in_their_units_and_rescale_exactly(tmp_path):
    import dataclasses

    import gridgnn
    from gridgnn.data.readers.native import save_graph

    graph = task_graph("regression")
    scaled = dataclasses.replace(graph, labels=(graph.labels * 1000.0 + 5.0).astype(np.float32))
    paths = [str(save_graph(g, tmp_path / f"{k}.npz")) for k, g in (("plain", graph), ("scaled", scaled))]
    runs = [gridgnn.fit(path, epochs=4, directed=True, standardize_targets=True) for path in paths]
    plain, big = runs
    np.testing.assert_allclose([r.loss for r in big.history], [r.loss for r in plain.history], rtol=1e-4)
    np.testing.assert_allclose(big.predict().predicted.numpy(), plain.predict().predicted.numpy() * 1000 + 5,
                               rtol=1e-4, atol=5e-3)
    model = big.model
    assert model.target_scale[0] > 100 and plain.model.target_scale[0] < 10  # the training entries' spread
    path = big.save(tmp_path / "m.pt")
    assert torch.equal(gridgnn.predict(gridgnn.load_model(path), big.graph).predicted, big.predict().predicted)
    grid = run_workers(mw.models_worker, 4, [dict(COMMON, dataset=paths[1], standardize_targets=True, algo="2d",
                                                  grid="2x2", nprocs=4, epochs=4)], timeout_s=600)
    local = _local(dict(COMMON, dataset=paths[1], standardize_targets=True, epochs=4))
    np.testing.assert_allclose(grid[0][0]["loss"], local[0], rtol=1e-4)
    np.testing.assert_allclose(np.array(grid[0][0]["metric"]), np.array(local[1]), rtol=1e-5)
    with pytest.raises(ConfigError, match="standardizes regression targets"):
        gridgnn.fit(task_graph("multilabel"), epochs=1, standardize_targets=True)


@pytest.mark.parametrize("flags, message", [
    (["--metric", "auc"], "argument --metric: invalid choice: 'auc'"),
    (["--task", "ranking"], "argument --task: invalid choice: 'ranking'"),
    (["--task", "regression", "--metric", "accuracy"], "--metric accuracy does not score a regression task"),
    (["--task", "multiclass", "--standardize-targets"], "standardizes regression targets, not multiclass ones"),
    (["--task", "multilabel"], "multilabel targets must be 0, 1 or NaN"),  # 5 classes are not 0/1 targets
])
def test_bad_task_flags_are_one_line_exit_2_and_write_nothing(tmp_path, capsys, flags, message):
    from gridgnn.cli.main import main

    metrics = tmp_path / "m.json"
    with pytest.raises(SystemExit) as info:
        raise SystemExit(main(["train", "--dataset", "csbm:nodes=60", "--epochs", "1", "--metrics-out", str(metrics),
                               *flags]))
    out, err = capsys.readouterr()
    assert info.value.code == 2 and out == "" and len(err.splitlines()) == 1 and message in err
    assert not metrics.exists()
