"""``--defer-weight-gather``: on 2D and 3D each process updates only the column block of each weight and bias it
reads, and whole weights are gathered on ``col`` only where something reads them whole (a checkpoint, the end of
training; the best weights are copied as they are and gathered then). Training still equals ``--algo local``;
every rank ends with the very weights (best and last) of the run without the flag; each step's bytes are the
model's, exactly the step without the flag less its ``col`` all-gather of the weight gradients; and a checkpoint
holds whole weights and Adam moments, so a run resumed from it on another grid is the uninterrupted run."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import sparse_workers as sw
import torch

from gridgnn.config import TrainConfig
from gridgnn.cost.epoch_model import predict_epoch
from gridgnn.errors import ConfigError
from gridgnn.grid.shape import resolve_grid
from gridgnn.launch.spawn import run_workers
from gridgnn.nn.trace import model_spec
from gridgnn.train.loop.trainer import Trainer
from gridgnn.train.run.resolve import reordered_for_grid
from gridgnn.train.run.training import build_aggregation, load_graph

SMALL = dict(dataset="csbm:nodes=240,classes=4,features=13", directed=True, epochs=4, dropout=0.5, hidden=8,
             nprocs=4)
CASES = {4: [dict(SMALL, algo="2d", grid="2x2"),
             dict(SMALL, algo="2d", grid="1x4", model="gat", heads=2, hidden=4),  # attention vectors: whole
             dict(SMALL, algo="3d", grid="2x2x1", model="gin", gin_train_eps=True, full_feature_rows=True),
             dict(SMALL, algo="2d", grid="2x2", model="sage", comm="sparse", reorder="metis"),
             dict(SMALL, algo="1.5d", replication=2)],  # no column blocks: ignored
         8: [dict(SMALL, nprocs=8, algo="3d", grid="2x2x2", comm="sparse", cache_panels=True)]}
SPLITS = {4: [True, True, True, True, False], 8: [True]}


def _both(cases: list[dict]) -> list[dict]:
    return [dict(kwargs, defer_weight_gather=defer) for kwargs in cases for defer in (False, True)]


@pytest.fixture(scope="module")
def trained():
    return {world: run_workers(sw.train_with_weights, world, _both(cases), timeout_s=300)
            for world, cases in CASES.items()}


def test_training_equals_local_and_the_plain_run(trained):
    for world, cases in CASES.items():
        for index, kwargs in enumerate(cases):
            plain = [rank[2 * index] for rank in trained[world]]
            deferred = [rank[2 * index + 1] for rank in trained[world]]
            local = dataclasses.replace(TrainConfig(**kwargs), algo="local", nprocs=1, grid=None, replication=1,
                                        comm="dense", reorder="none", cache_panels=False, full_feature_rows=False)
            graph = load_graph(local)
            reference = Trainer(local, graph, build_aggregation(local, graph)).fit()
            np.testing.assert_allclose(deferred[0]["loss"], [r.loss for r in reference.epochs], rtol=1e-4)
            assert deferred[0]["acc"] == [(r.train_acc, r.val_acc, r.test_acc) for r in reference.epochs], kwargs
            assert deferred[0]["loss"] == plain[0]["loss"] and deferred[0]["best_epoch"] == plain[0]["best_epoch"]
            for rank in deferred:  # every rank's weights whole, and the plain run's to the bit
                for which in ("final", "best"):
                    for name, value in rank[which].items():
                        np.testing.assert_array_equal(value, plain[0][which][name], err_msg=f"{kwargs} {which} {name}")


def test_each_step_is_the_model_and_lacks_the_gradient_gather(trained):
    for world, cases in CASES.items():
        for index, (kwargs, splits) in enumerate(zip(cases, SPLITS[world], strict=True)):
            plain, deferred = trained[world][0][2 * index]["comm"], trained[world][0][2 * index + 1]["comm"]
            run = TrainConfig(**kwargs, defer_weight_gather=True)
            shape = resolve_grid(run.algo, run.nprocs, replication=run.replication, grid=run.grid)
            ordered = reordered_for_grid(run, load_graph(run), shape)
            predicted = predict_epoch(model_spec(run, ordered), ordered, shape, comm=run.comm,
                                      cache_panels=run.cache_panels)
            without = predict_epoch(model_spec(dataclasses.replace(run, defer_weight_gather=False), ordered), ordered,
                                    shape,
                                    comm=run.comm, cache_panels=run.cache_panels)
            assert trained[world][0][2 * index + 1]["setup"][0]["defer_weight_gather"] is splits, kwargs
            gathered = [t for t in without.terms if t.phase == "weight_grad" and t.axis == "col"]
            assert len(gathered) == (1 if splits else 0), kwargs
            for epoch, before in zip(deferred, plain, strict=True):
                for phase, values in epoch["by_phase"].items():
                    assert values == predicted.bytes_by_phase[phase].tolist(), (kwargs, phase)
                    assert epoch["calls_by_phase"][phase] == predicted.calls_by_phase[phase].tolist(), (kwargs, phase)
                cut = sum((t.bytes for t in gathered), np.zeros(world, dtype=np.int64))
                assert epoch["bytes"] == (np.array(before["bytes"]) - cut).tolist(), kwargs
            # whole weights are gathered once, after the last epoch: the last and the best (copied partly stale
            # when validation improved, gathered when read), each the bytes of the gradients' gather
            assert [e["gather_bytes"] for e in deferred[:-1]] == [[0] * world] * (len(deferred) - 1), kwargs
            assert deferred[-1]["gather_bytes"] == (2 * cut).tolist(), kwargs
            assert all(e["gather_bytes"] == [0] * world for e in plain), kwargs


def test_a_checkpoint_holds_whole_weights_and_moments(tmp_path):
    """Two deferred epochs on 2D with a checkpoint at 2, resumed on 1D to 6 epochs: the uninterrupted run
    (Adam's moments of the blocks a rank did not update would be zeros, and the losses would differ)."""
    base = dict(SMALL, epochs=6, algo="2d", grid="2x2", weight_decay=0.0)
    folder = str(tmp_path / "ckpt")
    cases = [dict(base, defer_weight_gather=True, epochs=2, checkpoint_dir=folder, checkpoint_every=2),
             dict(base, algo="1d", grid=None, checkpoint_dir=folder, resume=True),
             dict(base),
             *(dict(base, epochs=3, defer_weight_gather=defer, checkpoint_dir=str(tmp_path / str(defer)),
                    checkpoint_every=1) for defer in (True, False))]
    out = run_workers(sw.train_with_weights, 4, cases, timeout_s=300)[0]
    resumed, whole = out[1], out[2]
    best = {defer: torch.load(tmp_path / str(defer) / "best-weights.pt", weights_only=True) for defer in (True, False)}
    assert best[True]["epoch"] == best[False]["epoch"] == out[3]["best_epoch"]
    for name, value in best[False]["state"].items():  # the best weights a checkpoint keeps are whole
        assert torch.equal(best[True]["state"][name], value), name
    np.testing.assert_allclose(resumed["loss"], whole["loss"], rtol=1e-5)
    assert resumed["acc"] == whole["acc"]
    for name, value in resumed["final"].items():
        np.testing.assert_allclose(value, whole["final"][name], rtol=1e-5, atol=1e-6)


def test_flag_must_be_a_bool_and_reaches_the_config():
    from gridgnn.cli.main import build_parser
    from gridgnn.cli.train_cmd import config_from_args

    with pytest.raises(ConfigError, match="defer_weight_gather must be true or false"):
        TrainConfig(dataset="cora", defer_weight_gather=1)
    assert TrainConfig(dataset="cora", defer_weight_gather=None).defer_weight_gather is None  # the planner's
    for flag, want in (("--defer-weight-gather", True), ("--no-defer-weight-gather", False), (None, None)):
        argv = ["train", "--dataset", "cora", "--algo", "2d", "--nprocs", "4", *([flag] if flag else [])]
        assert config_from_args(build_parser().parse_args(argv)).defer_weight_gather is want


def test_plan_prices_it_and_points_to_it(capsys):
    from gridgnn.cli.main import main

    base = ["plan", "--dataset", "cora", "--data-root", "../shared/datasets", "--nprocs", "4", "--profile",
            "gpu-cluster", "--reorder", "none",
            "--no-cache-panels", "--no-full-feature-rows", "--algo", "1d", "2d"]
    assert main([*base, "--no-defer-weight-gather", "--json"]) == 0
    plain = {(e["algo"], e["grid"], e["comm"]): e for e in json.loads(capsys.readouterr().out)}
    assert main([*base, "--defer-weight-gather", "--json"]) == 0
    deferred = {(e["algo"], e["grid"], e["comm"]): e for e in json.loads(capsys.readouterr().out)}
    for key, entry in deferred.items():
        split = key[0] == "2d" and key[1] != "4x1"  # 1D and a single column block read whole weights
        assert entry["defer_weight_gather"] is split and not plain[key]["defer_weight_gather"]
        if split:
            assert entry["bytes_by_phase"]["weight_grad"] < plain[key]["bytes_by_phase"]["weight_grad"]
            assert {k: v for k, v in entry["bytes_by_phase"].items() if k != "weight_grad"} == \
                {k: v for k, v in plain[key]["bytes_by_phase"].items() if k != "weight_grad"}
        else:
            assert entry == {**plain[key], "defer_weight_gather": False}
    assert main([*base[:-2], "2d", "--no-defer-weight-gather"]) == 0
    out = capsys.readouterr().out
    assert "weights    --defer-weight-gather would save" in out and "--no-defer-weight-gather" in \
        next(line for line in out.splitlines() if line.startswith("train with:"))
    assert main([*base[:-2], "2d", "--defer-weight-gather"]) == 0
    out = capsys.readouterr().out
    assert "weights    --defer" not in out  # already priced
    assert " --defer-weight-gather" in next(line for line in out.splitlines() if line.startswith("train with:"))


@pytest.mark.slow  # the command line end to end; the flag's numbers and bytes are tested above in-process
def test_cli_run_records_it(tmp_path):
    """``gridgnn train --defer-weight-gather`` end to end: the metrics say it took effect, every step equals
    the planner's prediction, the gathers of the last epoch are counted apart, and the model file holds the
    plain run's weights to the bit."""
    import subprocess
    import sys

    from gridgnn.nn.export import load_model

    runs = {}
    for flag in ("--defer-weight-gather", "--no-defer-weight-gather"):
        out, model = tmp_path / f"{flag}.json", tmp_path / f"{flag}.pt"
        proc = subprocess.run([sys.executable, "-m", "gridgnn", "train", "--dataset", "cora", "--data-root",
                               "../shared/datasets", "--epochs", "3", "--algo", "2d", "--nprocs", "4", flag,
                               "--metrics-out", str(out), "--save-model", str(model)],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        runs[flag] = json.loads(out.read_text()), load_model(model)[0].state_dict()
    metrics, weights = runs["--defer-weight-gather"]
    assert metrics["config"]["defer_weight_gather"] is True and metrics["setup"]["defer_weight_gather"] is True
    for epoch in metrics["epochs"]:
        assert epoch["comm"]["predicted_bytes"] == epoch["comm"]["bytes"]
        assert epoch["comm"]["predicted_by_phase"] == epoch["comm"]["by_phase"]
    gathers = [sum(epoch["comm"]["gather_bytes"]) for epoch in metrics["epochs"]]
    assert gathers[:-1] == [0, 0] and gathers[-1] > 0
    for name, value in runs["--no-defer-weight-gather"][1].items():
        assert torch.equal(weights[name], value), name
