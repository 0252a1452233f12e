"""``--cache-panels``: 2D and 3D receive their Â panels once, at set-up; the SpMM still equals the
single-process product, training equals ``--algo local``, and the bytes and calls of every step and of the
set-up are the model's, per rank and phase (one process group of 4 for every configuration, one of 8 for
3D with depth)."""

from __future__ import annotations

import dataclasses

import numpy as np
import panel_cache_workers as pw
import pytest
import spmm_workers as w
import torch
from test_spmm_distributed import _check_blocks

from gridgnn.config import TrainConfig
from gridgnn.cost.epoch_model import predict_epoch
from gridgnn.cost.graph_stats import GraphStats
from gridgnn.cost.rank_cost import panel_cache_terms, shape_blocks
from gridgnn.cost.sparse_cost import comm_spmm_terms
from gridgnn.errors import ConfigError
from gridgnn.grid.shape import resolve_grid
from gridgnn.launch.spawn import run_workers
from gridgnn.nn.trace import model_spec
from gridgnn.train.loop.trainer import Trainer
from gridgnn.train.run.resolve import reordered_for_grid
from gridgnn.train.run.training import build_aggregation, load_graph

N, SEED = 61, 7
SPMM_CASES = {4: [("2d", "2x2", "dense"), ("2d", "2x2", "sparse"), ("2d", "1x4", "sparse"), ("3d", "2x2x1", "sparse")],
              8: [("3d", "2x2x2", "dense"), ("3d", "2x2x2", "sparse"), ("2d", "2x4", "sparse")]}
TRAIN = dict(dataset="csbm:nodes=300,classes=5,features=13", directed=True, epochs=4, dropout=0.5, nprocs=4,
             cache_panels=True)
TRAIN_CASES = {4: [dict(TRAIN, algo="2d", grid="2x2", comm="sparse", reorder="metis-balanced"),
                   dict(TRAIN, algo="3d", grid="2x2x1", comm="dense", overlap=False),
                   dict(TRAIN, algo="2d", grid="1x4", comm="dense", model="sage"),
                   dict(TRAIN, algo="2d", grid="2x2", comm="dense", model="gat", heads=2, reorder="metis"),
                   dict(TRAIN, algo="3d", grid="2x2x1", comm="dense", model="gat", overlap=False),
                   dict(TRAIN, algo="1d", comm="sparse")],  # nothing to cache: ignored
               8: [dict(TRAIN, nprocs=8, algo="3d", grid="2x2x2", comm="sparse", reorder="metis-balanced"),
                   dict(TRAIN, nprocs=8, algo="3d", grid="2x2x2", comm="dense", model="gat")]}


def _stats(adj) -> GraphStats:
    return GraphStats("test", adj.shape[0], adj.nnz, 1, 1, None, adj.indptr, adj.indices)


def _grouped(records) -> list[tuple]:
    grouped: dict[tuple, list[int]] = {}
    for record in records:
        grouped.setdefault(record[:-1], []).append(record[-1])
    return sorted((*key, len(b), sum(b)) for key, b in grouped.items())


@pytest.fixture(scope="module")
def results():
    return {world: run_workers(pw.run_all, world, cases, TRAIN_CASES[world], N, SEED, timeout_s=300)
            for world, cases in SPMM_CASES.items()}


def test_cached_spmm_matches_single_process_and_model(results):
    adj = w.random_directed(N, seed=SEED)
    dense = adj.toarray().astype(np.float64)
    for world, cases in SPMM_CASES.items():
        for case_index, (algo, grid_text, comm) in enumerate(cases):
            shape = resolve_grid(algo, world, grid=grid_text)
            blocks = shape_blocks(shape, _stats(adj))
            setup = panel_cache_terms(blocks)
            assert setup, "every case has panels to keep"
            for rank in range(world):
                plain, fast = (results[world][rank]["spmm"][case_index][k] for k in (0, 1))
                want = sorted((t.op, t.axis, "other", int(t.calls[rank]), int(t.bytes[rank])) for t in setup
                              if t.calls[rank])
                merged = _grouped(plain["setup"])
                assert [m for m in merged if m[0] == "broadcast"] == _grouped_terms(want), (algo, grid_text, rank)
                assert plain["setup"] == fast["setup"]
            for width_index, width in enumerate(w.WIDTHS):
                per_rank = [results[world][r]["spmm"][case_index][0]["widths"][width_index] for r in range(world)]
                x, g = (t.double().numpy() for t in w.dense_inputs(N, width, SEED))
                _check_blocks(per_rank, "y", dense @ x)
                _check_blocks(per_rank, "grad", dense.T @ g)
                for half, backward in (("forward", False), ("backward", True)):
                    terms = comm_spmm_terms(blocks, width, backward=backward, comm=comm, cached=True)
                    assert not any(t.op == "broadcast" and t.axis == "col" for t in terms)
                    for rank, res in enumerate(per_rank):
                        model = sorted((t.op, t.axis, int(t.calls[rank]), int(t.bytes[rank])) for t in terms
                                       if t.calls[rank])
                        assert _grouped(res[half]) == model, (algo, grid_text, comm, width, half, rank)
                fast = [results[world][r]["spmm"][case_index][1]["widths"][width_index] for r in range(world)]
                for a, b in zip(per_rank, fast, strict=True):
                    np.testing.assert_array_equal(a["y"], b["y"])
                    np.testing.assert_array_equal(a["grad"], b["grad"])


def _grouped_terms(rows: list[tuple]) -> list[tuple]:
    """(op, axis, phase, calls, bytes) rows of terms, merged like `_grouped` merges records."""
    merged: dict[tuple, list[int]] = {}
    for op, axis, phase, calls, nbytes in rows:
        total = merged.setdefault((op, axis, phase), [0, 0])
        total[0] += calls
        total[1] += nbytes
    return sorted((*key, c, b) for key, (c, b) in merged.items())


def test_cached_training_equals_local_and_model(results):
    runs = [(kwargs, out) for world in TRAIN_CASES
            for kwargs, out in zip(TRAIN_CASES[world], results[world][0]["train"], strict=True)]
    for kwargs, out in runs:
        run = TrainConfig(**kwargs)
        local = TrainConfig(**{**kwargs, "algo": "local", "nprocs": 1, "grid": None, "comm": "dense",
                               "reorder": "none", "cache_panels": False})
        graph = load_graph(local)
        reference = Trainer(local, graph, build_aggregation(local, graph)).fit()
        np.testing.assert_allclose(out["loss"], [r.loss for r in reference.epochs], rtol=1e-4)
        assert out["acc"] == [(r.train_acc, r.val_acc, r.test_acc) for r in reference.epochs]
        shape = resolve_grid(run.algo, run.nprocs, grid=run.grid)
        trained_graph = reordered_for_grid(run, graph, shape)
        spec = model_spec(run, trained_graph)
        predicted = predict_epoch(spec, trained_graph, shape, comm=run.comm, cache_panels=True)
        uncached = predict_epoch(spec, trained_graph, shape, comm=run.comm)
        for epoch in out["comm"]:
            for phase, values in epoch["by_phase"].items():
                assert values == predicted.bytes_by_phase[phase].tolist(), (kwargs, phase)
                assert epoch["calls_by_phase"][phase] == predicted.calls_by_phase[phase].tolist(), (kwargs, phase)
        for key, op in (("panel_cache", "broadcast"), ("index_exchange", "all_to_all")):
            assert [s[f"{key}_bytes"] for s in out["setup"]] == predicted.setup_sum("bytes", op).tolist(), kwargs
            assert [s[f"{key}_calls"] for s in out["setup"]] == predicted.setup_sum("calls", op).tolist(), kwargs
        kept = predicted.setup_sum("bytes", "broadcast")
        if run.algo == "1d":
            assert not kept.any() and predicted.bytes.tolist() == uncached.bytes.tolist()
        else:  # the step no longer moves Â; the graph memory holds what it received once
            assert (kept > 0).all() and (predicted.bytes < uncached.bytes).all()
            assert (predicted.memory["graph"] == uncached.memory["graph"] + kept).all()
        assert out["setup"][0]["cache_panels"] is True
        if run.model == "gat":  # its attention reads only Â's forward panels: the transposed ones stay home
            gcn = model_spec(TrainConfig(**{**kwargs, "model": "gcn", "heads": 1}), trained_graph)
            as_gcn = predict_epoch(gcn, trained_graph, shape,
                                   comm=run.comm, cache_panels=True)
            assert (kept < as_gcn.setup_sum("bytes", "broadcast")).all()


def test_cached_panels_step_and_setup_are_the_uncached_panels():
    """Pure: on every 2D/3D shape the cached step is the uncached one less its Â panels, which the set-up
    receives once in each orientation."""
    adj = w.random_directed(90, seed=3)
    config = TrainConfig(dataset="x", layers=3, hidden=8)
    stats = _stats(adj)
    for algo, world, grid_text in (("2d", 6, "2x3"), ("2d", 6, "3x2"), ("3d", 8, "2x2x2"), ("3d", 18, "3x3x2")):
        shape = resolve_grid(algo, world, grid=grid_text)
        for comm in ("dense", "sparse"):
            plain = predict_epoch(model_spec(config, stats), stats, shape, comm=comm)
            cached = predict_epoch(model_spec(config, stats), stats, shape, comm=comm, cache_panels=True)
            panels = sum(t.bytes for t in plain.terms if t.op == "broadcast" and t.axis == "col")
            assert (cached.bytes == plain.bytes - panels).all() and panels.any()
            blocks = shape_blocks(shape, stats)
            once = sum(sum(t.bytes for t in comm_spmm_terms(blocks, 8, backward=b, comm=comm))
                       - sum(t.bytes for t in comm_spmm_terms(blocks, 8, backward=b, comm=comm, cached=True))
                       for b in (False, True))  # one SpMM's panels, forward and transposed
            assert (cached.setup_sum("bytes", "broadcast") == once).all()
            assert (cached.setup_sum("bytes", "all_to_all") == plain.setup_bytes).all()


def test_cache_panels_flag_must_be_a_bool():
    with pytest.raises(ConfigError, match="cache_panels must be true or false"):
        TrainConfig(dataset="cora", cache_panels="yes")


def test_plan_prices_cached_panels(capsys):
    import json

    from gridgnn.cli.main import main

    data_root = "../shared/datasets"
    code = main(["plan", "--dataset", "cora", "--data-root", data_root, "--nprocs", "4", "--algo", "1d", "2d",
                 "--comm", "sparse", "--cache-panels", "--json"])
    assert code == 0
    entries = {(e["algo"], e["grid"]): e for e in json.loads(capsys.readouterr().out)}
    square, one_row, rows = entries["2d", "2x2"], entries["2d", "4x1"], entries["1d", "4"]
    assert square["cache_panels"] and not one_row["cache_panels"] and not rows["cache_panels"]  # only where Â moves
    assert main(["plan", "--dataset", "cora", "--data-root", data_root, "--nprocs", "4", "--algo", "2d",
                 "--comm", "sparse", "--json"]) == 0
    uncached = {(e["algo"], e["grid"]): e for e in json.loads(capsys.readouterr().out)}
    plain = uncached["2d", "2x2"]
    assert one_row == uncached["2d", "4x1"]  # nothing moves, so nothing is kept: the same prediction
    assert square["bytes_per_rank"] < plain["bytes_per_rank"]  # a step no longer moves Â ...
    assert square["setup_bytes_per_rank"] > plain["setup_bytes_per_rank"]  # ... the set-up moves it once
    assert square["memory_by_component"]["graph"] > plain["memory_by_component"]["graph"]
    assert main(["plan", "--dataset", "cora", "--data-root", data_root, "--nprocs", "4", "--algo", "2d",
                 "--model", "gat", "--cache-panels", "--json"]) == 0
    gat = {(e["algo"], e["grid"]): e for e in json.loads(capsys.readouterr().out)}["2d", "2x2"]
    assert gat["cache_panels"] and gat["comm"] == "dense" and gat["setup_bytes_per_rank"] > 0


def test_flag_reaches_the_config_the_auto_choice_and_the_memory_hint(monkeypatch):
    import gridgnn.train.run.memory_guard as guard
    from gridgnn.cli.main import build_parser
    from gridgnn.cli.train_cmd import config_from_args
    from gridgnn.data.generators import csbm
    from gridgnn.train.run.auto import choose_configuration, graph_stats
    from gridgnn.train.run.memory_guard import memory_refusal, predicted_per_proc

    for flag, want in (("--cache-panels", True), ("--no-cache-panels", False), (None, None)):  # unset: planned
        argv = ["train", "--dataset", "cora", "--algo", "2d", "--nprocs", "4", *([flag] if flag else [])]
        assert config_from_args(build_parser().parse_args(argv)).cache_panels is want
    graph = csbm(nodes=400, classes=4, features=8, seed=1)
    chosen, reason = choose_configuration(TrainConfig(algo="auto", nprocs=16, cache_panels=True), graph, 16)
    assert chosen.cache_panels and chosen.algo != "auto"
    if chosen.algo in ("2d", "3d") and chosen.grid not in ("16x1", "1x1x16"):
        assert "cached" in reason
    # the guard prices its offers for the machine it runs on: a GPU's, where 2D's cached grids rank high
    monkeypatch.setattr(guard, "default_device", lambda: torch.device("cuda", 0))
    config = TrainConfig(algo="2d", nprocs=4, grid="1x4", cache_panels=True)  # 3 panels kept, 2.5 in flight
    stats = graph_stats(graph)
    cached, plain = (predicted_per_proc(dataclasses.replace(config, cache_panels=c), stats, 4) for c in (True, False))
    assert plain < cached
    line = memory_refusal(dataclasses.replace(config, memory_per_proc=cached - 1), graph, 4)
    assert line.startswith("not enough memory") and "configurations that fit" in line
    hints = line[line.index("(gridgnn plan): ") + 16:line.index("; or pass")].split(", ")
    assert any("--cache-panels" in hint for hint in hints)  # cached configurations are offered, and ...
    for hint in hints:  # ... every one offered fits as its flags say (with or without the cache)
        flags = hint.split()
        value = {name: flags[flags.index(name) + 1] for name in ("--algo", "--grid", "--replication")
                 if name in flags}
        offered = TrainConfig(algo=value["--algo"], nprocs=4, grid=value.get("--grid"),
                              replication=int(value.get("--replication", 1)), cache_panels="--cache-panels" in flags)
        assert predicted_per_proc(offered, stats, 4) <= cached - 1, hint


def test_plan_text_points_to_the_cache_where_panels_move(capsys):
    from gridgnn.cli.main import main

    base = ["plan", "--dataset", "cora", "--data-root", "../shared/datasets", "--nprocs", "4", "--profile",
            "gpu-cluster"]  # a cluster's profile, where 2d's best grid splits columns
    assert main([*base, "--algo", "2d", "--no-cache-panels"]) == 0  # pinned off: the hint says what it would save
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("panels     "))
    assert line.startswith("panels     Â panels are ") and "--cache-panels receives them once" in line
    for extra in (["--algo", "2d", "--cache-panels"], ["--algo", "1d"], ["--algo", "2d", "--model", "gat"],
                  ["--algo", "2d"]):  # cached already (pinned, or chosen by the planner), nothing moves, or GAT
        assert main([*base, *extra]) == 0
        assert "panels     " not in capsys.readouterr().out  # cached already, nothing moves, or GAT
