"""Issue 33's test data: the task generators (``csbm:labelled=``, ``multilabel``, ``heat``) have the documented
targets; a generated graph with 2 % of its labels reads back the same from OGB's CSV and binary layouts; a tiny
run of benchmarks/tasks_accuracy.py shows GCN beating the feature-only MLP."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from node_data_layouts import from_graph, write_ogb_binary, write_ogb_csv

from gridgnn.cli.main import main
from gridgnn.data import load_dataset
from gridgnn.data.generators import csbm
from gridgnn.data.task_generators import heat, multilabel
from gridgnn.errors import DataError
from gridgnn.train.loop.task_metrics import mean_rocauc

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_csbm_hides_all_but_the_labelled_share():
    full = csbm(nodes=2000, features=8, seed=4)
    graph = load_dataset("csbm:nodes=2000,features=8,labelled=0.02", seed=4)
    assert graph.task == "multiclass" and graph.num_classes == 5 and graph.labels.dtype == np.int64
    kept = graph.labels >= 0
    assert int(kept.sum()) == 40 and set(np.unique(graph.labels)) <= {-1, 0, 1, 2, 3, 4}
    np.testing.assert_array_equal(graph.labels[kept], full.labels[kept])  # the classes the full graph has
    assert (graph.adj != full.adj).nnz == 0 and np.array_equal(graph.features, full.features)
    masks = (graph.train_mask, graph.val_mask, graph.test_mask)
    assert [int(m.sum()) for m in masks] == [24, 8, 8]
    np.testing.assert_array_equal(masks[0] | masks[1] | masks[2], kept)
    assert graph.meta["split"] == "random-60-20-20-of-labelled" and graph.meta["labelled"] == 0.02
    other = load_dataset("csbm:nodes=2000,features=8,labelled=0.02", seed=5)
    assert not np.array_equal(other.labels >= 0, kept)  # the seed draws the labelled vertices
    assert "labelled" not in full.meta and full.meta["split"] == "per-class-20-30"  # labelled=1: as before
    with pytest.raises(DataError, match="labelled must lie in"):
        load_dataset("csbm:nodes=100,labelled=0")


def test_multilabel_targets_come_from_neighbourhoods():
    graph = load_dataset("multilabel:nodes=1500,targets=3,features=10,missing=0.1", seed=2)
    assert graph.task == "multilabel" and graph.num_classes == 3 and graph.labels.shape == (1500, 3)
    assert graph.labels.dtype == np.float32 and graph.features.shape == (1500, 10)
    present = ~np.isnan(graph.labels)
    assert set(np.unique(graph.labels[present])) == {0.0, 1.0}
    assert 0.07 < 1 - present.mean() < 0.13 and 0.4 < graph.labels[present].mean() < 0.6
    x = graph.dense_features()[:, :3]
    degree = np.maximum(np.asarray(graph.adj.sum(axis=1)).ravel(), 1)
    neighbours = np.asarray(graph.adj @ x) / degree[:, None]
    assert mean_rocauc(graph.labels, neighbours) > 0.8  # the neighbours' features tell the targets
    assert mean_rocauc(graph.labels, x) < 0.65  # a vertex's own features hardly do
    np.testing.assert_array_equal(graph.labels, multilabel(nodes=1500, targets=3, features=10, missing=0.1,
                                                           seed=2).labels)
    with pytest.raises(DataError, match="targets <= features"):
        multilabel(targets=5, features=4)


def test_heat_target_is_the_steady_temperature_on_a_mesh():
    graph = heat(nodes=1200, noise=0.0, missing=0.1, seed=1)
    assert graph.task == "regression" and graph.num_classes == 1 and graph.labels.shape == (1200, 1)
    assert graph.labels.dtype == np.float32 and graph.features.shape == (1200, 4)
    assert (graph.adj != graph.adj.T).nnz == 0 and 5 < graph.adj.nnz / 1200 < 9
    u, present = graph.labels[:, 0].astype(np.float64), ~np.isnan(graph.labels[:, 0])
    assert 0.07 < 1 - present.mean() < 0.13 and abs(np.nanstd(u) - 1) < 0.05
    x, y, source, edge = graph.dense_features().T.astype(np.float64)
    assert np.all(np.nan_to_num(u[edge == 1]) == 0)  # held at 0 on the square's edge
    coo = sp.triu(graph.adj).tocoo()
    both = present[coo.row] & present[coo.col]
    jumps = (u[coo.row] - u[coo.col])[both]
    assert np.mean(jumps**2) < 0.05 * np.nanvar(u)  # smooth along the mesh's edges
    # (L + 0.5 I) u is proportional to the source on inside vertices whose neighbours all have a target
    degree = np.asarray(graph.adj.sum(axis=1)).ravel()
    filled = np.nan_to_num(u)
    residual = degree * filled - graph.adj @ filled + 0.5 * filled
    complete = (edge == 0) & ~(graph.adj @ (~present).astype(float) > 0) & present & (source > 1e-3)
    ratio = residual[complete] / source[complete]
    assert complete.sum() > 100 and np.allclose(ratio, ratio[0], rtol=1e-3)


def test_generator_specs_are_checked_at_the_command_line(tmp_path, capsys):
    for spec in ("heat:nodes=1", "multilabel:nodes=50,labels=3", "heat:width=-1"):
        assert main(["train", "--dataset", spec, "--epochs", "1", "--metrics-out", str(tmp_path / "m.json")]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("gridgnn: error:") and spec.split(":")[0] in lines[0]
    assert not (tmp_path / "m.json").exists()


def test_hidden_label_graph_reads_back_from_both_ogb_layouts(tmp_path):
    generated = load_dataset("csbm:nodes=600,features=6,labelled=0.02", seed=3)
    data = from_graph(generated)
    for folder in (write_ogb_csv(data, tmp_path / "csv"), write_ogb_binary(data, tmp_path / "binary")):
        graph = load_dataset(str(folder))
        assert graph.task == "multiclass" and int(graph.labelled().sum()) == 12
        assert (graph.adj != generated.adj).nnz == 0
        np.testing.assert_array_equal(graph.dense_features(), generated.features)
        np.testing.assert_array_equal(graph.labels, generated.labels)
        for mine, theirs in zip((graph.train_mask, graph.val_mask, graph.test_mask),
                                (generated.train_mask, generated.val_mask, generated.test_mask), strict=True):
            np.testing.assert_array_equal(mine, theirs)


def _benchmark():
    spec = importlib.util.spec_from_file_location("bench_tasks_accuracy", BENCHMARKS / "tasks_accuracy.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow  # the benchmark script end to end (results/tasks)
def test_tasks_accuracy_tiny(tmp_path):
    bench = _benchmark()
    out, table = tmp_path / "a.json", tmp_path / "a.md"
    records = bench.main(["--multiclass", "csbm:nodes=400,labelled=0.2", "--multilabel", "multilabel:nodes=500",
                          "--regression", "heat:nodes=500", "--seeds", "2", "--epochs", "60", "--models", "gcn",
                          "--json", str(out), "--markdown", str(table)])
    assert [r["task"] for r in records] == ["multiclass", "multilabel", "regression"]
    assert [r["metric"] for r in records] == ["accuracy", "rocauc", "mse"]
    multilabel_record, regression_record = records[1], records[2]
    assert multilabel_record["models"]["gcn"]["mean"] > multilabel_record["models"]["mlp"]["mean"]
    assert regression_record["models"]["gcn"]["mean"] < 0.5 * np.mean(regression_record["test_target_variance"])
    assert len(records[0]["models"]["mlp"]["test_metric_at_best_val"]) == 2
    saved = json.loads(out.read_text())
    assert saved["command"].startswith("python benchmarks/tasks_accuracy.py --multiclass")
    assert saved["records"][1]["models"]["gcn"]["mean"] == multilabel_record["models"]["gcn"]["mean"]
    text = table.read_text()
    assert "| multilabel | `multilabel:nodes=500` | rocauc |" in text and "feature-only MLP" in text
    with pytest.raises(AssertionError, match="multilabel: GCN ROC-AUC"):  # the check can fail
        bench.check([{"task": "multilabel", "models": {"gcn": {"mean": 0.5}, "mlp": {"mean": 0.6}}}])


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["multilabel:nodes=300", "heat:nodes=300", "csbm:nodes=1000,labelled=0.05"])
def test_generated_task_graphs_train_alike_on_a_grid(spec, tmp_path):
    """Workers get the generated graph the one process has: the same metrics on a 1D grid of two."""
    finals = []
    for name, extra in (("one", []), ("grid", ["--nprocs", "2", "--algo", "1d"])):
        out = tmp_path / f"{name}.json"
        assert main(["train", "--dataset", spec, "--epochs", "10", "--metrics-out", str(out), *extra]) == 0
        finals.append(json.loads(out.read_text())["final"])
    for key in ("train_metric", "val_metric", "test_metric", "best_epoch"):
        assert finals[0][key] == pytest.approx(finals[1][key], abs=1e-6), key
