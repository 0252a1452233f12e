"""``--comm sparse``: every algorithm equals the single-process product and training, and moves exactly the
bytes and calls the cost model predicts, per rank and phase (one process group for every configuration)."""

from __future__ import annotations

import numpy as np
import pytest
import sparse_workers as sw
import spmm_workers as w
from test_spmm_distributed import _check_blocks

from gridgnn.config import TrainConfig
from gridgnn.cost.epoch_model import predict_epoch
from gridgnn.cost.graph_stats import GraphStats
from gridgnn.cost.rank_cost import shape_blocks
from gridgnn.cost.sparse_cost import comm_spmm_terms
from gridgnn.cost.spmm_plan import lower, sparse_spmm_plan
from gridgnn.grid.shape import resolve_grid
from gridgnn.launch.spawn import run_workers
from gridgnn.nn.trace import model_spec
from gridgnn.train.loop.trainer import Trainer
from gridgnn.train.run.resolve import reordered_for_grid
from gridgnn.train.run.training import build_aggregation, load_graph

N, SEED, WORLD = 61, 5, 4
SPMM_CASES = [("1d", None, None), ("1.5d", 2, None), ("2d", None, "2x2"), ("2d", None, "4x1"), ("2d", None, "1x4"),
              ("3d", None, "2x2x1"), ("3d", None, "1x1x4"),
              ("1.5d", 4, None)]  # one block row: replicas 1-3 have an empty share
TRAIN = dict(dataset="csbm:nodes=300,classes=5,features=13", directed=True, epochs=4, dropout=0.5)
TRAIN_CASES = [dict(TRAIN, algo="1d", nprocs=WORLD, comm="sparse"),
               dict(TRAIN, algo="1.5d", nprocs=WORLD, replication=2, comm="sparse", reorder="metis"),
               dict(TRAIN, algo="1d", nprocs=WORLD, comm="dense", reorder="random"),
               dict(TRAIN, algo="2d", nprocs=WORLD, grid="2x2", comm="sparse", reorder="rcm"),
               dict(TRAIN, algo="3d", nprocs=WORLD, grid="2x2x1", comm="sparse", reorder="metis-balanced",
                    overlap=False)]


def _stats(adj) -> GraphStats:
    return GraphStats("test", adj.shape[0], adj.nnz, 1, 1, None, adj.indptr, adj.indices)


def _model(shape, adj, width: int, backward: bool) -> list[list[tuple]]:
    """Per rank: the sorted (op, axis, bytes per call summed) the model predicts for one SpMM half."""
    terms = comm_spmm_terms(shape_blocks(shape, _stats(adj)), width, backward=backward, comm="sparse")
    return [[(t.op, t.axis, int(t.calls[r]), int(t.bytes[r])) for t in terms if t.calls[r]]
            for r in range(shape.world_size)]


def _measured(records: list[tuple]) -> list[tuple]:
    grouped: dict[tuple, list[int]] = {}
    for op, axis, nbytes in records:
        grouped.setdefault((op, axis), []).append(nbytes)
    return [(op, axis, len(b), sum(b)) for (op, axis), b in grouped.items()]


@pytest.fixture(scope="module")
def results():
    return run_workers(sw.run_all, WORLD, SPMM_CASES, TRAIN_CASES, N, SEED, timeout_s=300)


def test_sparse_spmm_matches_single_process_and_model(results):
    adj = w.random_directed(N, seed=SEED)
    dense = adj.toarray().astype(np.float64)
    for case_index, (algo, c, grid_text) in enumerate(SPMM_CASES):
        shape = resolve_grid(algo, WORLD, replication=c, grid=grid_text)
        blocking = [results[r]["spmm"][case_index][0] for r in range(WORLD)]
        overlapped = [results[r]["spmm"][case_index][1] for r in range(WORLD)]
        for width_index, width in enumerate(w.WIDTHS):
            per_rank = [b[width_index] for b in blocking]
            x, g = (t.double().numpy() for t in w.dense_inputs(N, width, SEED))
            _check_blocks(per_rank, "y", dense @ x)
            _check_blocks(per_rank, "grad", dense.T @ g)
            assert sum(res["stored_nnz"] for res in per_rank) == adj.nnz
            for half, backward in (("forward", False), ("backward", True)):
                model = _model(shape, adj, width, backward)
                for rank, res in enumerate(per_rank):
                    assert sorted(_measured(res[half])) == sorted(model[rank]), (algo, width, half, rank)
                    # without overlap, record by record in issue order: the plan the sparse SpMM carries
                    plan = sparse_spmm_plan(shape, rank, _stats(adj), width, backward=backward)
                    planned = [(st.op, st.axis, st.bytes) for st in lower(plan, shape, shape.coords(rank))]
                    assert res[half] == planned, (algo, width, half, rank)
                    assert res["own_plan"][int(backward)] == planned, (algo, width, half, rank)  # built from its counts
            for plain, fast in zip(per_rank, (o[width_index] for o in overlapped), strict=True):
                np.testing.assert_array_equal(plain["y"], fast["y"])
                np.testing.assert_array_equal(plain["grad"], fast["grad"])
                assert sorted(plain["forward"]) == sorted(fast["forward"])
                assert sorted(plain["backward"]) == sorted(fast["backward"])
        expected = [("all_to_all", "other")] if shape.sizes[0] > 1 else []  # the index exchange, on ``row``
        assert all(b[0]["setup_ops"] == expected for b in blocking)


def test_sparse_training_equals_local_and_model(results):
    config = TrainConfig(**TRAIN)
    graph = load_graph(config)
    assert (graph.adj != graph.adj.T).nnz > 0, "the test graph must be directed"
    reference = Trainer(config, graph, build_aggregation(config, graph)).fit()
    for kwargs, out in zip(TRAIN_CASES, results[0]["train"], strict=True):
        np.testing.assert_allclose(out["loss"], [r.loss for r in reference.epochs], rtol=1e-4)
        assert out["acc"] == [(r.train_acc, r.val_acc, r.test_acc) for r in reference.epochs]
        run = TrainConfig(**kwargs)
        shape = resolve_grid(run.algo, WORLD, replication=run.replication, grid=run.grid)
        trained_graph = reordered_for_grid(run, graph, shape)
        predicted = predict_epoch(model_spec(run, trained_graph), trained_graph, shape, comm=run.comm)
        for epoch in out["comm"]:
            for phase, values in epoch["by_phase"].items():
                assert values == predicted.bytes_by_phase[phase].tolist(), (kwargs, phase)
                assert epoch["calls_by_phase"][phase] == predicted.calls_by_phase[phase].tolist(), (kwargs, phase)
        if run.comm == "sparse":
            dense = predict_epoch(model_spec(run, trained_graph), trained_graph, shape, comm="dense")
            assert predicted.bytes_by_phase["spmm_forward"].max() < dense.bytes_by_phase["spmm_forward"].max()
            assert sum(s["index_exchange_bytes"] for s in out["setup"]) > 0
            # the index exchange (once, at set-up) is modelled too, per rank: bytes and calls
            assert [s["index_exchange_bytes"] for s in out["setup"]] == predicted.setup_bytes.tolist(), kwargs
            assert [s["index_exchange_calls"] for s in out["setup"]] == predicted.setup_calls.tolist(), kwargs
        else:
            assert predicted.setup_terms == [] and all(s["index_exchange_bytes"] == 0 for s in out["setup"])
        assert out["setup"][0]["comm"] == run.comm


@pytest.mark.slow
def test_sparse_comm_benchmark_tiny(tmp_path):
    """The benchmark script end to end on tiny graphs: every measured run's bytes equal the model."""
    import csv
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "sparse_comm.py"
    done = subprocess.run([sys.executable, str(script), "--tiny", "--out", str(tmp_path)], capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    with open(tmp_path / "measured.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert rows and all(r["model_equal"] == "True" for r in rows)
    assert "| goal |" in (tmp_path / "goals.md").read_text()


def test_sparse_comm_plots_from_rows(tmp_path):
    """The benchmark's plots from its CSV rows: one bytes-vs-P figure per graph and the measured steps."""
    pytest.importorskip("matplotlib")
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "sparse_comm_report.py"
    spec = importlib.util.spec_from_file_location("bench_sparse_comm_plots", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    model = [{"graph": "g", "algo": algo, "p": p, "reorder": reorder, "comm": comm, "max_bytes": 1024 * p}
             for algo in ("1d", "1.5d", "2d", "3d") for p in (4, 16) for reorder in ("none", "metis")
             for comm in ("dense", "sparse")]
    measured = [{"graph": "g", "p": 4, "algo": "1d", "reorder": "none", "comm": comm, "step_s": 0.1}
                for comm in ("dense", "sparse")]
    written = bench.plots(tmp_path, model, measured)
    assert [p.name for p in written] == ["bytes_vs_p_g.png", "measured_steps.png"]
    assert all(p.stat().st_size > 1000 for p in written)
