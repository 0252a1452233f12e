"""``--full-feature-rows``: on 2D and 3D every process keeps all feature columns of its rows, so the first
layer's product with the features is local. Training still equals ``--algo local``; each step's bytes and
calls are the model's, per rank and phase, and lack exactly that layer's ``dense`` terms; the flag is
ignored, and says so, where it cannot apply (1D, a first layer that aggregates first)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import sparse_workers as sw

from gridgnn.config import TrainConfig
from gridgnn.cost.epoch_model import ModelSpec, predict_epoch
from gridgnn.errors import ConfigError
from gridgnn.grid.shape import resolve_grid
from gridgnn.launch.spawn import run_workers
from gridgnn.nn.trace import model_spec
from gridgnn.train.loop.trainer import Trainer
from gridgnn.train.run.resolve import reordered_for_grid
from gridgnn.train.run.training import build_aggregation, load_graph

DATA_ROOT = "../shared/datasets"
SMALL = dict(dataset="csbm:nodes=240,classes=4,features=13", directed=True, epochs=3, dropout=0.5, hidden=8,
             full_feature_rows=True, nprocs=4)
CASES = {4: [dict(SMALL, dataset="cora", data_root=DATA_ROOT, algo="2d", grid="2x2"),  # sparse features
             dict(SMALL, algo="2d", grid="1x4", model="sage", comm="sparse", reorder="metis-balanced",
                  cache_panels=True),  # two local products
             dict(SMALL, algo="3d", grid="2x2x1", model="gat", heads=2, hidden=4, overlap=False),
             dict(SMALL, algo="2d", grid="2x2", model="gin", gin_train_eps=True),
             dict(SMALL, algo="2d", grid="2x2", hidden=32),  # aggregates first: ignored
             dict(SMALL, algo="1d", comm="sparse")],  # holds whole rows already: ignored
         8: [dict(SMALL, nprocs=8, algo="3d", grid="2x2x2", comm="sparse", reorder="metis")]}
TAKES_EFFECT = {4: [True, True, True, True, False, False], 8: [True]}


@pytest.fixture(scope="module")
def trained():
    return {world: run_workers(sw.run_trainings, world, cases, timeout_s=300)[0] for world, cases in CASES.items()}


def test_training_equals_local_and_the_model(trained):
    for world, cases in CASES.items():
        for kwargs, out, effect in zip(cases, trained[world], TAKES_EFFECT[world], strict=True):
            run = TrainConfig(**kwargs)
            local = dataclasses.replace(run, algo="local", nprocs=1, grid=None, comm="dense", reorder="none",
                                        cache_panels=False, full_feature_rows=False)
            graph = load_graph(local)
            reference = Trainer(local, graph, build_aggregation(local, graph)).fit()
            np.testing.assert_allclose(out["loss"], [r.loss for r in reference.epochs], rtol=1e-4)
            assert out["acc"] == [(r.train_acc, r.val_acc, r.test_acc) for r in reference.epochs], kwargs
            assert out["setup"][0]["full_feature_rows"] is effect, kwargs
            shape = resolve_grid(run.algo, run.nprocs, grid=run.grid)
            ordered = reordered_for_grid(run, graph, shape)
            predicted = predict_epoch(model_spec(run, ordered), ordered, shape, comm=run.comm,
                                      cache_panels=run.cache_panels)
            for epoch in out["comm"]:
                for phase, values in epoch["by_phase"].items():
                    assert values == predicted.bytes_by_phase[phase].tolist(), (kwargs, phase)
                    assert epoch["calls_by_phase"][phase] == predicted.calls_by_phase[phase].tolist(), (kwargs, phase)
            _check_against_blocks(run, ordered, shape, predicted, effect)


def _check_against_blocks(run: TrainConfig, graph, shape, predicted, effect: bool) -> None:
    """With the flag, the step is the one without it less the first layer's ``dense`` terms, and each rank
    holds every feature column of its rows; where it cannot apply, the prediction is the same."""
    plain = predict_epoch(model_spec(dataclasses.replace(run, full_feature_rows=False), graph), graph, shape,
                          comm=run.comm,
                          cache_panels=run.cache_panels)
    if not effect:
        assert predicted.bytes.tolist() == plain.bytes.tolist()
        assert predicted.memory["features"].tolist() == plain.memory["features"].tolist()
        return
    assert (predicted.bytes < plain.bytes).all() and (predicted.calls < plain.calls).all()
    for phase in ("spmm_forward", "spmm_backward", "loss"):  # weight_grad: W's blocks are its columns now
        assert predicted.bytes_by_phase[phase].tolist() == plain.bytes_by_phase[phase].tolist(), phase
    assert (predicted.bytes_by_phase["dense"] < plain.bytes_by_phase["dense"]).all()
    assert (predicted.memory["features"] > plain.memory["features"]).all()


def keeps_feature_rows(model: str, order: str, widths: list[int], col_blocks: int) -> bool:
    """The rule as the traced model states it (`ModelOps.keeps_feature_rows`)."""
    spec = model_spec(ModelSpec(widths[0], widths[-1], len(widths) - 1, widths[1], order, model=model), None)
    return spec.ops.keeps_feature_rows(col_blocks)


def test_the_rule_of_where_it_applies():
    assert keeps_feature_rows("gcn", "auto", [100, 16, 5], 2)
    assert not keeps_feature_rows("gcn", "auto", [10, 16, 5], 2)  # aggregates first
    assert keeps_feature_rows("gcn", "transform-first", [10, 16, 5], 2)
    assert keeps_feature_rows("gat", "aggregate-first", [10, 16, 5], 2)  # attention always transforms first
    assert not keeps_feature_rows("gcn", "auto", [100, 16, 5], 1)  # one column block: whole rows already
    assert not keeps_feature_rows("gcn", "transform-first", [1, 16, 5], 2)  # a block of width 1 is all of it
    assert not keeps_feature_rows("sage", "aggregate-first", [100, 16, 5], 2)  # mean(X) needs X's column blocks
    spec = model_spec(ModelSpec(100, 5, 2, 16, model="sage", full_feature_rows=True), None)
    assert spec.keeps_feature_rows(resolve_grid("2d", 4, grid="2x2"))
    local = [sum(p.reads_features for p in layer.products) for layer in spec.ops.layers]
    assert local == [2, 0]  # GraphSAGE's two products with the features
    assert not spec.keeps_feature_rows(resolve_grid("1d", 4))


def test_flag_must_be_a_bool_and_reaches_the_config():
    from gridgnn.cli.main import build_parser
    from gridgnn.cli.train_cmd import config_from_args

    with pytest.raises(ConfigError, match="full_feature_rows must be true or false"):
        TrainConfig(dataset="cora", full_feature_rows="yes")
    for flag, want in (("--full-feature-rows", True), ("--no-full-feature-rows", False), (None, None)):
        argv = ["train", "--dataset", "cora", "--algo", "2d", "--nprocs", "4", *([flag] if flag else [])]
        assert config_from_args(build_parser().parse_args(argv)).full_feature_rows is want


def test_plan_prices_it_and_points_to_it(capsys):
    from gridgnn.cli.main import main

    base = ["plan", "--dataset", "cora", "--data-root", DATA_ROOT, "--nprocs", "4", "--profile", "gpu-cluster",
            "--reorder", "none",
            "--no-cache-panels", "--no-defer-weight-gather", "--algo", "1d", "2d"]
    assert main([*base, "--no-full-feature-rows", "--json"]) == 0
    plain = {(e["algo"], e["grid"], e["comm"]): e for e in json.loads(capsys.readouterr().out)}
    assert main([*base, "--full-feature-rows", "--json"]) == 0
    rows = {(e["algo"], e["grid"], e["comm"]): e for e in json.loads(capsys.readouterr().out)}
    for key, entry in rows.items():
        split = key[0] == "2d" and key[1] != "4x1"  # 1D and a single column block hold whole rows already
        assert entry["full_feature_rows"] is split and not plain[key]["full_feature_rows"]
        if split:
            assert entry["bytes_by_phase"]["dense"] < plain[key]["bytes_by_phase"]["dense"]
            assert entry["memory_by_component"]["features"] > plain[key]["memory_by_component"]["features"]
        else:
            assert entry == {**plain[key], "full_feature_rows": False}
    assert main([*base[:-2], "2d", "--no-full-feature-rows"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("rows       --full-feature-rows would save ") for line in lines)
    assert main([*base[:-2], "2d", "--full-feature-rows"]) == 0
    out = capsys.readouterr().out
    train_line = next(line for line in out.splitlines() if line.startswith("train with:"))
    assert "rows       " not in out and " --full-feature-rows" in train_line


def test_plan_line_prices_the_best_grid_on_its_own_order(capsys):
    """Under ``--reorder metis`` each grid is priced on its own order; the ``rows`` line says what the flag
    saves on that order, which the plan with the flag confirms."""
    import re

    from gridgnn.cli.main import main

    base = ["plan", "--dataset", "cora", "--data-root", DATA_ROOT, "--nprocs", "8", "--algo", "2d", "--reorder",
            "metis", "--comm", "sparse", "--no-cache-panels", "--no-defer-weight-gather", "--profile", "gpu-cluster"]
    assert main([*base, "--no-full-feature-rows"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("rows       "))
    saved, of = (float(x) for x in re.search(r"save ([\d.]+) KiB of the ([\d.]+) KiB", line).groups())
    assert main([*base, "--no-full-feature-rows", "--json"]) == 0
    plain = {e["grid"]: e for e in json.loads(capsys.readouterr().out)}
    assert main([*base, "--full-feature-rows", "--json"]) == 0
    rows = {e["grid"]: e for e in json.loads(capsys.readouterr().out)}
    best = next(e for e in plain.values() if e["best"])
    assert abs(of - best["bytes_per_rank"] / 1024) < 0.06
    assert abs(saved - (best["bytes_per_rank"] - rows[best["grid"]]["bytes_per_rank"]) / 1024) < 0.06


def test_memory_hint_offers_configurations_without_the_flag():
    from gridgnn.data.generators import csbm
    from gridgnn.train.run.auto import graph_stats
    from gridgnn.train.run.memory_guard import memory_refusal, predicted_per_proc

    graph = csbm(nodes=400, classes=4, features=600, seed=1)  # dense features: full rows cost 4x theirs
    stats = graph_stats(graph)
    config = TrainConfig(algo="2d", nprocs=4, grid="1x4", full_feature_rows=True)
    kept, plain = (predicted_per_proc(dataclasses.replace(config, full_feature_rows=r), stats, 4)
                   for r in (True, False))
    assert plain < kept
    line = memory_refusal(dataclasses.replace(config, memory_per_proc=kept - 1), graph, 4)
    hints = line[line.index("(gridgnn plan): ") + 16:line.index("; or pass")].split(", ")
    assert hints
    for hint in hints:  # every one offered fits as its flags say, with or without full feature rows
        flags = hint.split()
        value = {name: flags[flags.index(name) + 1] for name in ("--algo", "--grid", "--replication")
                 if name in flags}
        offered = TrainConfig(algo=value["--algo"], nprocs=4, grid=value.get("--grid"),
                              replication=int(value.get("--replication", 1)),
                              full_feature_rows="--full-feature-rows" in flags)
        assert predicted_per_proc(offered, stats, 4) <= kept - 1, hint
