"""Tiny runs of the benchmark scripts (benchmarks/*.py), only to keep them working; they time nothing. The
model-kind scripts (accuracy_models.py, pyg_models_compare.py, accuracy_gat.py, pyg_gat_compare.py) and, slow,
scale_rmat.py (the real run is in results/scale/) included."""

from __future__ import annotations

import csv
import importlib.util
import json
import sys
from pathlib import Path

import pytest
from model_helpers import shared_datasets

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
TINY = "csbm:nodes=120,classes=3,features=20"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_pyg_compare_tiny(tmp_path):
    pytest.importorskip("torch_geometric")
    bench = _load("pyg_compare")
    out = tmp_path / "compare.json"
    records = bench.main(["--dataset", TINY, "--epochs", "3", "--threads", "1", "--json", str(out),
                          "--markdown", str(tmp_path / "compare.md")])
    (record,) = records
    assert record["ratio"] > 0 and len(record["gridgnn"]["epoch_times_s"]) == 3
    assert 0.0 <= record["pyg"]["test_acc"] <= 1.0
    assert json.loads(out.read_text())["records"][0]["dataset"] == TINY
    assert "| dataset |" in (tmp_path / "compare.md").read_text()
    combined = bench.main(["--from-json", str(out), str(out), "--markdown", str(tmp_path / "both.md")])
    assert len(combined) == 2 and (tmp_path / "both.md").read_text().count(TINY) == 2


def test_pyg_compare_plot(tmp_path):
    pytest.importorskip("torch_geometric")
    pytest.importorskip("matplotlib")
    bench = _load("pyg_compare")
    from matplotlib.image import imread

    records = bench.main(["--dataset", TINY, "--epochs", "2", "--threads", "1", "--plot", str(tmp_path / "a.png")])
    drawn = bench.plot(records, str(tmp_path / "epoch.png"))  # the bars are the records' medians, in ms
    assert drawn == {"gridgnn": [1e3 * r["gridgnn"]["median_epoch_s"] for r in records],
                     "pyg": [1e3 * r["pyg"]["median_epoch_s"] for r in records]}
    assert imread(tmp_path / "epoch.png").shape[:2] == (480, 840)  # a PNG of 7 x 4 inches at 120 dpi


def test_local_kernel_tiny(tmp_path):
    bench = _load("local_kernel")
    out = tmp_path / "kernel.json"
    rows = bench.main(["--dataset", TINY, "--threads", "2", "--rounds", "1", "--min-sample-ms", "0",
                       "--copy-mib", "4", "--json", str(out), "--markdown", str(tmp_path / "kernel.md")])
    assert {row["piece"] for row in rows} == {"full", "2d-block"}
    assert all(row["gflops"]["gridgnn"] > 0 and row["threads_gain"] > 0 for row in rows)
    assert all(set(row["seconds"]) == set(bench.METHODS) for row in rows)
    assert "threads gain median" in (tmp_path / "kernel.md").read_text()
    assert json.loads(out.read_text())["environment"]["copy_gbytes_per_s"] > 0


def test_accuracy_seeds_tiny(tmp_path):
    bench = _load("accuracy_seeds")
    out = tmp_path / "seeds.json"
    graph = "csbm:nodes=300,classes=3,features=20"  # 20 train + 30 val per class leaves 150 test nodes
    (record,) = bench.main(["--dataset", graph, "--seeds", "2", "--epochs", "30", "--json", str(out),
                            "--markdown", str(tmp_path / "seeds.md")])
    assert len(record["test_acc"]) == 2 and record["min"] == min(record["test_acc"])
    assert record["test_acc"][0] != record["test_acc"][1] or record["sd"] == 0.0
    assert record["mean"] > 1 / 3  # 3 well-separated classes: far above chance after 30 epochs
    assert json.loads(out.read_text())["command"].startswith("python benchmarks/accuracy_seeds.py --dataset")
    assert f"| {graph} |" in (tmp_path / "seeds.md").read_text()


@pytest.mark.slow  # a benchmark script end to end
def test_plan_stats_tiny(tmp_path):
    from gridgnn.config import TrainConfig
    from gridgnn.data.prepared import prepare_graph
    from gridgnn.train.run.training import load_graph

    folder = prepare_graph(load_graph(TrainConfig(dataset=TINY)), tmp_path / "prepared")
    bench = _load("plan_stats")
    report = bench.main([str(folder), "--nprocs", "2", "--algo", "1d", "--json", str(tmp_path / "p.json"),
                         "--markdown", str(tmp_path / "p.md")])
    assert [s["step"] for s in report["steps"]] == ["predicted", "auto"]
    assert all(s["peak_bytes"] >= s["peak_before_bytes"] > 0 and s["seconds"] >= 0 for s in report["steps"])
    assert report["steps"][1]["detail"].startswith("--algo auto chose")
    assert "| predicted |" in (tmp_path / "p.md").read_text()


# --- the model-kind benchmark scripts ------------------------------------------------------------------------

MODELS_TINY = "csbm:nodes=240,classes=3,features=20"  # 20 + 30 per class leave 90 to test


def test_accuracy_models_and_speed_scripts_tiny(tmp_path):
    pytest.importorskip("torch_geometric")
    accuracy = _load("accuracy_models")
    records = accuracy.main(["--dataset", MODELS_TINY, "--seeds", "2", "--max-epochs", "2", "--json",
                             str(tmp_path / "a.json"), "--markdown", str(tmp_path / "a.md")])
    assert [r["model"] for r in records] == ["sage", "gat", "gin", "pyg-gin"]
    assert all(len(r["test_acc"]) == 2 and 0.0 <= r["mean"] <= 1.0 for r in records)
    assert json.loads((tmp_path / "a.json").read_text())["records"][0]["dataset"] == MODELS_TINY
    assert "| sage |" in (tmp_path / "a.md").read_text()
    assert [accuracy._feature_norm("sage", f) for f in ("setting", "default", "raw")] == [False, None, False]
    assert accuracy._feature_norm("gin", "setting") is None
    speed = _load("pyg_models_compare")
    records = speed.main(["--dataset", MODELS_TINY, "--epochs", "2", "--markdown", str(tmp_path / "s.md")])
    assert [r["model"] for r in records] == ["sage", "gin"]
    assert all(r["ratio"] > 0 and len(r["pyg"]["epoch_times_s"]) == 2 for r in records)


def test_gat_accuracy_and_speed_scripts_tiny(tmp_path):
    pytest.importorskip("torch_geometric")
    accuracy = _load("accuracy_gat")
    data_root = str(shared_datasets())
    records = accuracy.main(["--dataset", "cora", "--seeds", "1", "--max-epochs", "2", "--data-root", data_root,
                             "--json", str(tmp_path / "a.json"), "--markdown", str(tmp_path / "a.md")])
    assert records[0]["dataset"] == "cora" and 0.0 <= records[0]["mean"] <= 1.0
    assert json.loads((tmp_path / "a.json").read_text())["records"][0]["setting"]["heads"] == 8
    speed = _load("pyg_gat_compare")
    records = speed.main(["--dataset", MODELS_TINY, "--epochs", "2", "--json", str(tmp_path / "s.json")])
    assert records[0]["ratio"] > 0 and len(records[0]["pyg"]["epoch_times_s"]) == 2


@pytest.mark.slow  # the benchmark script end to end (minutes on a loaded machine)
def test_scale_benchmark_tiny(tmp_path):
    spec = importlib.util.spec_from_file_location("scale_rmat", Path("benchmarks/scale_rmat.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    report = module.main(["--scale", "9", "--nprocs", "2", "--epochs", "2", "--algos", "2d",
                          "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work")])
    assert [run["algo"] for run in report["runs"]] == ["2d"]
    for run in report["runs"]:
        assert run["bytes_per_rank_all"] == run["predicted_bytes_per_rank"]  # planner = measurement
        assert len(run["predicted_memory_bytes"]) == len(run["peak_bytes"]) == 2
        assert min(run["peak_bytes"]) > 0 and run["median_epoch_s"] > 0
    assert json.loads((tmp_path / "out" / "scale.json").read_text())["num_nodes"] == 512
    assert "| 2d | 1x2 |" in (tmp_path / "out" / "scale.md").read_text()


def test_spmm_precision_error_tiny(tmp_path):
    """The SpMM error table: fp32 equals one process (checked inside), the lower precisions err within their
    formats' bounds, and the activation bytes halve (bf16, fp16) or fall to about a quarter (int8)."""
    bench = _load("spmm_precision_error")
    assert bench.main(["--tiny", "--out", str(tmp_path)]) == 0
    with open(tmp_path / "spmm_error.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(bench.TINY_GRIDS) * len(bench.PRECISIONS)
    bound = {"fp32": 0.0, "bf16": 8e-3, "fp16": 1e-3, "int8": 4e-2}
    for row in rows:
        assert 0 <= float(row["forward_error"]) <= bound[row["precision"]], row
        assert 0 <= float(row["backward_error"]) <= bound[row["precision"]], row
        ratio = float(row["activation_ratio"])
        assert {"fp32": ratio == 1, "bf16": ratio == 0.5, "fp16": ratio == 0.5,
                "int8": 0.25 < ratio < 0.3}[row["precision"]], row
    assert "| int8 |" in (tmp_path / "spmm_error.md").read_text()


def test_gin_amazon_tiny(tmp_path):
    """The GIN cross-check (gridgnn, PyG, PyG with BatchNorm, both with a layer norm) on a tiny graph: a record
    per variant and seed, gridgnn's equal to `gridgnn.fit`'s own metrics, the table's means those of the records,
    and ``--append`` keeping the other records and listing both commands."""
    pytest.importorskip("torch_geometric")
    bench = _load("gin_amazon")
    graph = "csbm:nodes=300,classes=3,features=20"  # TINY has no test vertices
    document = bench.main(["--datasets", graph, "--seeds", "0", "1", "--epochs", "4", "--hidden", "8",
                           "--out", str(tmp_path / "gin")])
    records = document["records"]
    assert [(r["seed"], r["variant"]) for r in records] == [(s, v) for s in (0, 1) for v in bench.VARIANTS]
    for record in records:
        assert 1 <= record["best_epoch"] <= 4 and 1 <= record["classes_predicted"] <= 3, record
    import gridgnn

    per_seed = len(bench.VARIANTS)
    for index, norm in ((per_seed, "none"), (per_seed + 3, "layer")):  # seed 1's gridgnn, gridgnn+layernorm
        again = gridgnn.fit(graph, model="gin", hidden=8, epochs=4, seed=1, threads=1, gin_norm=norm).metrics["final"]
        assert records[index]["test_acc"] == again["test_acc_at_best_val"], norm
        assert records[index]["best_epoch"] == again["best_epoch"], norm
    table = (tmp_path / "gin.md").read_text()
    mean = sum(100 * r["test_acc"] for r in records if r["variant"] == "pyg+batchnorm") / 2
    assert f"| {graph} | pyg+batchnorm |" in table and f"| {mean:.1f} |" in table
    assert json.loads((tmp_path / "gin.json").read_text())["records"] == records
    appended = bench.main(["--datasets", graph, "--seeds", "1", "--epochs", "4", "--hidden", "8", "--variants",
                           "gridgnn", "--append", "--out", str(tmp_path / "gin")])
    assert len(appended["commands"]) == 2 and "--append" in appended["commands"][1]
    def without_wall(rows):
        return sorted(str({k: v for k, v in r.items() if k != "wall_s"}) for r in rows)

    assert without_wall(appended["records"]) == without_wall(records)  # the same run again, kept once
    assert "    python benchmarks/gin_amazon.py --datasets" in (tmp_path / "gin.md").read_text()


def test_partition_objective_tiny(tmp_path):
    """Both METIS objectives priced on one graph: cover never above sparse, sparse never above dense, and the
    table carries every row."""
    pytest.importorskip("pymetis")
    bench = _load("partition_objective")
    out = tmp_path / "objective.md"
    rows = bench.main(["--graphs", "csbm:nodes=400,classes=4,features=8", "--parts", "4", "--out", str(out)])
    assert [r["objective"] for r in rows] == ["cut", "vol"]
    for row in rows:
        assert row["cover"] <= row["sparse"] <= row["dense"] and row["volume_rows"] > 0 and row["cut_entries"] > 0
        assert f"| {row['objective']} |" in out.read_text() and f"{row['cover']:,}" in out.read_text()


def test_mesh_regression_summary_and_edge_models_halo_count():
    """The two edge-feature benchmarks' pure parts: the mesh regression's table and ratio, and the halo rows
    counted from the graph alone (the distinct sources of other blocks among a block row's edges)."""
    import numpy as np
    import scipy.sparse as sp

    mesh = _load("mesh_regression")
    runs = (("meshgraphnet", 0, 0.2), ("meshgraphnet", 1, 0.4), ("sage", 0, 0.1), ("sage", 1, 0.1))
    records = [{"model": m, "seed": s, "test_mse": mse, "median_step_s": 0.01, "bytes_per_rank": 100}
               for m, s, mse in runs]
    rows = mesh.summarize(records)
    assert [r["model"] for r in rows] == ["meshgraphnet", "sage"] and rows[0]["test_mse_mean"] == pytest.approx(0.3)
    args = type("Args", (), {"nodes": 10, "nprocs": 2, "epochs": 1, "layers": 2, "hidden": 4, "seeds": 2})()
    assert "MSE ratio 3.000" in mesh.markdown(rows, args)
    edges = _load("edge_models")
    # 4 vertices in 2 blocks {0, 1}, {2, 3}: block 0 reads 2 and 3 (twice), block 1 reads 0
    adj = sp.csr_matrix((np.ones(5), ([0, 0, 1, 2, 3], [2, 3, 3, 0, 2])), shape=(4, 4))
    graph = type("G", (), {"adj": adj})()
    assert edges.halo_rows(graph, 2) == [2, 1]


def test_feature_rows_on_cora():
    """The feature weights by rows on Cora's sparse features (model): on 1D, 2D and 3D below the column-deferred
    step's weight gradient, which is below the plain step's; the table shows the ratio."""
    pytest.importorskip("pymetis")
    bench = _load("feature_rows")
    root = str(shared_datasets())
    records = [bench.measure("cora", algo, grid, root, False) for algo, grid in
               (("1d", None), ("2d", "4x4"), ("3d", "2x2x4"))]
    for record in records:
        assert record["by rows"]["weight_grad"] < record["columns deferred"]["weight_grad"] \
            <= record["plain"]["weight_grad"], record
        assert 0 < record["touched"] < 1
    assert "| cora | 2d 4x4 |" in bench.table(records)


def test_fifteen_floor_lies_below_the_cover_schedule():
    """The 1.5D floor of `benchmarks/sparse_floor.py --fifteen` on Cora (P = 4, c = 2): each part at most what
    the cover configuration (one valid schedule of the partition) moves in that part over all ranks, so the floor
    lies below that schedule's mean and busiest rank."""
    pytest.importorskip("pymetis")
    bench = _load("sparse_floor")
    bench.DATA = str(shared_datasets())
    _, floor = bench.fifteen_rows("cora", 4)
    parts = floor["mean_parts"]
    assert all(value > 0 for name, value in parts.items() if name != "other_weights"), parts
    from gridgnn.config import TrainConfig
    from gridgnn.cost.epoch_model import predict_epoch
    from gridgnn.cost.graph_stats import GraphStats
    from gridgnn.data.registry import load_dataset
    from gridgnn.data.reorder import reorder_graph
    from gridgnn.grid.shape import resolve_grid
    from gridgnn.nn.trace import model_spec

    shape = resolve_grid("1.5d", 4, replication=2)
    ordered = reorder_graph(load_dataset("cora", data_root=bench.DATA), "metis-balanced", shape.sizes[0])
    stats = GraphStats.from_graph(ordered)
    cover = predict_epoch(model_spec(TrainConfig(defer_weight_gather=True), stats), stats, shape, comm="cover")
    moved = {axis: sum(int(t.bytes.sum()) for t in cover.terms if t.axis == axis and t.phase.startswith("spmm"))
             for axis in ("rep", "row")}
    assert parts["replica_forward"] + parts["replica_backward"] <= moved["rep"]
    assert parts["row_exchange"] == moved["row"]
    weights = sum(int(t.bytes.sum()) for t in cover.terms if t.phase == "weight_grad")
    assert parts["feature_weights"] + parts["other_weights"] <= weights
    assert floor["mean_floor"] <= int(cover.bytes.sum()) // 4 <= floor["cover"]
