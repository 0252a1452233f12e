"""The loop people expect (issue 33, item 4): ``--patience``, ``--eval-every``, ``--lr-schedule`` and
``--log-csv``, resumed exactly from checkpoints, the same on a grid as in one process; ``gridgnn predict``'s
accuracy. Small generated graphs, few epochs."""

from __future__ import annotations

import csv
import json
import math
import os
import shutil

import numpy as np
import pytest
import train_workers as tw

from gridgnn.cli.main import main
from gridgnn.config import TrainConfig
from gridgnn.errors import CheckpointError, ConfigError
from gridgnn.launch.spawn import run_workers
from gridgnn.report.series import load_metrics, report_series
from gridgnn.train.checkpoint.manifest import MANIFEST
from gridgnn.train.checkpoint.naming import list_checkpoints
from gridgnn.train.loop.early_stop import ValidationTracker
from gridgnn.train.outputs.epoch_csv import columns
from gridgnn.train.run.training import run_training

SMALL = "csbm:nodes=300"
"""300 vertices, 5 classes: validation accuracy reaches its best within ~20 epochs, then plateaus."""


def _run(**options):
    return run_training(TrainConfig(dataset=SMALL, quiet=True, **options))


def _without_times(metrics: dict) -> tuple[list, dict]:
    epochs = [{k: v for k, v in e.items() if k != "time_s"} for e in metrics["epochs"]]
    final = {k: v for k, v in metrics["final"].items() if "time" not in k}
    return epochs, final


# --------------------------------------------------------------------------------------------------------
# The tracker


def test_tracker_judges_by_direction_and_counts_evaluations():
    up = ValidationTracker(patience=2)
    assert [up.update(v, e) for e, v in enumerate([0.5, 0.7, 0.7, float("nan"), 0.6], start=1)] == \
        [True, True, False, False, False]
    assert (up.best, up.best_epoch, up.stale, up.improvements, up.stopped) == (0.7, 2, 3, 2, True)
    down = ValidationTracker(patience=2, higher_is_better=False)
    assert [down.update(v, e) for e, v in enumerate([0.5, 0.7, 0.4, 0.4], start=1)] == [True, False, True, False]
    assert (down.best, down.best_epoch, down.stopped) == (0.4, 3, False)
    copy = ValidationTracker(patience=2)
    copy.load_state_dict(json.loads(json.dumps(up.state_dict())))
    assert copy == up
    assert ValidationTracker.replay([(1, 0.5), (2, None), (3, 0.7), (4, 0.7), (5, 0.6)], patience=2) == \
        ValidationTracker(patience=2, best=0.7, best_epoch=3, stale=2, improvements=2, evaluations=4)
    with pytest.raises(CheckpointError, match="other way"):
        down.load_state_dict(up.state_dict())
    with pytest.raises(CheckpointError, match="malformed"):
        copy.load_state_dict({"best": "x"})
    assert not ValidationTracker(patience=0, stale=99).stopped  # 0: never stops


# --------------------------------------------------------------------------------------------------------
# Schedules, patience, eval-every


def test_cosine_and_step_give_each_epoch_its_rate():
    cosine = _run(epochs=10, lr_schedule="cosine", lr_min=0.001)
    expected = [0.001 + (0.01 - 0.001) * (1 + math.cos(math.pi * (e - 1) / 10)) / 2 for e in range(1, 11)]
    assert [r.lr for r in cosine.result.epochs] == pytest.approx(expected, rel=1e-9, abs=0)
    step = _run(epochs=10, lr_schedule="step", lr_step_size=3, lr_gamma=0.5)
    assert [r.lr for r in step.result.epochs] == pytest.approx([0.01 * 0.5 ** ((e - 1) // 3) for e in range(1, 11)],
                                                               rel=1e-12)
    assert step.metrics["final"]["final_lr"] == step.result.epochs[-1].lr


def test_plateau_lowers_the_rate_after_evaluations_without_improvement():
    run = _run(epochs=40, eval_every=2, lr_schedule="plateau", lr_plateau_patience=1, lr_gamma=0.5, lr_min=0.002)
    lr, bad, expected = 0.01, 0, []
    tracker = ValidationTracker()
    for record in run.result.epochs:  # torch's rule, driven by the tracker's "improved"
        expected.append(lr)
        if record.val_acc is None:
            continue
        bad = 0 if tracker.update(record.val_acc, record.epoch) else bad + 1
        if bad > 1:
            lr, bad = max(lr * 0.5, 0.002), 0
    assert [r.lr for r in run.result.epochs] == pytest.approx(expected, rel=1e-12)
    assert expected[-1] < 0.01  # the run did reach a plateau
    assert run.result.best_epoch == tracker.best_epoch


def test_patience_stops_after_k_evaluations_without_improvement(tmp_path, capsys):
    out = tmp_path / "m.json"
    status = main(["train", "--dataset", SMALL, "--epochs", "200", "--eval-every", "2", "--patience", "3",
                   "--metrics-out", str(out), "--threads", "1"])
    assert status == 0
    metrics = json.loads(out.read_text())
    final, epochs = metrics["final"], metrics["epochs"]
    assert final["stopped_early"] is True
    assert final["stopped_at_epoch"] == epochs[-1]["epoch"] == final["best_epoch"] + 3 * 2 < 200
    evaluated = [e for e in epochs if e["val_acc"] is not None]
    assert [e["epoch"] for e in evaluated] == list(range(2, epochs[-1]["epoch"] + 1, 2))
    assert all(e["val_acc"] <= final["best_val_acc"] for e in evaluated)
    printed = capsys.readouterr().out
    assert f"stopped    early at epoch {final['stopped_at_epoch']} of 200" in printed


def test_eval_every_leaves_null_metrics_that_the_report_reads(tmp_path):
    out = tmp_path / "m.json"
    run = _run(epochs=7, eval_every=3, metrics_out=str(out))
    records = {e["epoch"]: e for e in json.loads(out.read_text())["epochs"]}
    assert [k for k, e in records.items() if e["val_acc"] is not None] == [3, 6, 7]  # and the last
    assert all(records[k][m] is None for k in (1, 2, 4, 5) for m in ("train_acc", "val_acc", "test_acc"))
    assert run.metrics["final"]["val_acc"] == records[7]["val_acc"]
    series = report_series(load_metrics(out))
    assert math.isnan(series.val_acc[0]) and series.val_acc[2] == records[3]["val_acc"]
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    from gridgnn.report.figures import draw_accuracy

    axes = Figure().subplots()
    draw_accuracy(axes, series)
    val = next(line for line in axes.get_lines() if line.get_label() == "val")
    assert list(val.get_xdata()) == [3, 6, 7]  # the evaluated epochs, joined by a line


def test_a_diverging_run_stops_at_its_first_nonfinite_loss_and_evaluates_it():
    run = _run(epochs=20, lr=1e30, eval_every=7, stop_on_nonfinite=True)
    first = run.result.first_nonfinite_epoch
    assert first is not None and run.result.stopped_on_nonfinite and len(run.result.epochs) == first < 20
    assert run.result.epochs[-1].val_acc is not None and run.metrics["final"]["stopped_early"] is False


# --------------------------------------------------------------------------------------------------------
# The CSV file


def _read_csv(path) -> tuple[list[str], list[dict]]:
    with open(path, newline="", encoding="utf-8") as stream:
        reader = csv.DictReader(stream)
        return list(reader.fieldnames), list(reader)


def _cell(value) -> str:
    return "" if value is None else repr(value) if isinstance(value, float) else str(value)


def test_log_csv_reads_back_as_the_metrics_file(tmp_path):
    run = _run(epochs=6, eval_every=4, lr_schedule="cosine", log_csv=str(tmp_path / "run.csv"),
               metrics_out=str(tmp_path / "m.json"))
    header, rows = _read_csv(tmp_path / "run.csv")
    assert header == list(columns("accuracy")) == ["epoch", "loss", "train_accuracy", "val_accuracy",
                                                   "test_accuracy", "time_s", "bytes", "lr"]
    metrics = json.loads((tmp_path / "m.json").read_text())
    assert len(rows) == len(metrics["epochs"]) == 6
    from_file = {"train_accuracy": "train_metric", "val_accuracy": "val_metric", "test_accuracy": "test_metric"}
    for row, epoch in zip(rows, metrics["epochs"], strict=True):
        assert row == {**{k: _cell(epoch[from_file.get(k, k)]) for k in header if k != "bytes"}, "bytes": "0"}
        assert float(row["loss"]) == epoch["loss"]
    assert rows[0]["val_accuracy"] == "" and float(rows[3]["val_accuracy"]) == run.result.epochs[3].val_acc
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json", "run.csv"]


def _status(argv: list[str]) -> int:
    """``main(argv)``'s exit status, argparse's refusals (SystemExit) included."""
    try:
        return main(argv)
    except SystemExit as exit_info:
        return exit_info.code


def test_csv_bytes_are_the_step_bytes_summed_over_ranks():
    from gridgnn.train.outputs.epoch_csv import epoch_rows

    record = {"loss": 1.0, "train_acc": None, "val_acc": None, "test_acc": None, "time_s": 0.5}
    metrics = {"epochs": [{"epoch": 1, **record, "lr": 0.01},  # from a one-process checkpoint: no comm
                          {"epoch": 2, **record, "comm": {"bytes": [10, 20, 30], "eval_bytes": [99] * 3}}]}
    assert epoch_rows(metrics) == [[1, 1.0, None, None, None, 0.5, 0, 0.01], [2, 1.0, None, None, None, 0.5, 60, None]]


@pytest.mark.slow
def test_log_csv_of_a_grid_run_started_from_the_command_line(tmp_path):
    out, table = tmp_path / "m.json", tmp_path / "run.csv"
    assert main(["train", "--dataset", SMALL, "--epochs", "6", "--nprocs", "2", "--algo", "1d", "--threads", "1",
                 "--eval-every", "2", "--lr-schedule", "step", "--lr-step-size", "2", "--lr-gamma", "0.5",
                 "--log-csv", str(table), "--metrics-out", str(out), "--quiet"]) == 0
    metrics = json.loads(out.read_text())
    _, rows = _read_csv(table)
    assert [int(r["bytes"]) for r in rows] == [sum(e["comm"]["bytes"]) for e in metrics["epochs"]]
    assert all(int(r["bytes"]) > 0 for r in rows)
    assert [float(r["lr"]) for r in rows] == [0.01, 0.01, 0.005, 0.005, 0.0025, 0.0025]
    assert [r["val_acc"] == "" for r in rows] == [True, False] * 3


@pytest.mark.parametrize(("flags", "keyword"), [
    (["--patience", "-1"], "patience must be at least 0"),
    (["--eval-every", "0"], "eval_every must be at least 1"),
    (["--lr-schedule", "linear"], "invalid choice"),
    (["--lr-gamma", "0.5"], "--lr-gamma applies to --lr-schedule step or plateau, not none"),
    (["--lr-schedule", "cosine", "--lr-step-size", "5"], "--lr-step-size applies to --lr-schedule step"),
    (["--lr-schedule", "plateau", "--lr-plateau-patience", "2", "--lr-min", "0.5"], "lr_min must be in [0, 0.01)"),
    (["--lr-schedule", "step", "--lr-gamma", "1"], "lr_gamma must be in (0, 1)"),
    (["--lr-schedule", "step", "--lr-step-size", "0"], "lr_step_size must be at least 1"),
    (["--log-csv", "{tmp}"], "it is a directory"),
    (["--log-csv", "{tmp}/missing/run.csv"], "does not exist"),
    (["--log-csv", "{tmp}/x.json", "--metrics-out", "{tmp}/x.json"], "same file"),
])
def test_bad_loop_flags_are_one_line_and_write_nothing(flags, keyword, tmp_path, capsys):
    flags = [f.replace("{tmp}", str(tmp_path)) for f in flags]
    assert _status(["train", "--dataset", SMALL, "--epochs", "2", *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gridgnn: error: ") and keyword in err[0], err
    assert list(tmp_path.iterdir()) == []


def test_log_csv_onto_a_link_or_fifo_is_refused(tmp_path, capsys):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / "link.csv").symlink_to(victim)
    os.mkfifo(tmp_path / "pipe.csv")
    for name, kind in (("link.csv", "symbolic link"), ("pipe.csv", "FIFO")):
        assert _status(["train", "--dataset", SMALL, "--epochs", "2", "--log-csv", str(tmp_path / name)]) == 2
        assert kind in capsys.readouterr().err
    assert victim.read_text() == "precious\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.csv", "pipe.csv", "victim.txt"]


def test_config_refuses_bad_loop_values():
    for bad in ({"patience": 1.5}, {"eval_every": True}, {"lr_schedule": "cosine", "lr_min": float("nan")},
                {"lr_schedule": "plateau", "lr_plateau_patience": -1}, {"log_csv": " "}):
        with pytest.raises(ConfigError):
            TrainConfig(**bad)


# --------------------------------------------------------------------------------------------------------
# Resuming


LOOP = {"epochs": 60, "eval_every": 2, "patience": 4, "lr_schedule": "plateau", "lr_plateau_patience": 1,
        "lr_gamma": 0.5, "checkpoint_every": 4, "keep_checkpoints": 50}


class _Interrupt(Exception):
    pass


def test_a_run_interrupted_and_resumed_reaches_the_same_records_rates_and_stop(tmp_path):
    whole = _run(**LOOP, checkpoint_dir=str(tmp_path / "whole"), log_csv=str(tmp_path / "whole.csv"))
    assert whole.result.stopped_early and whole.metrics["final"]["stopped_at_epoch"] < 60
    assert min(r.lr for r in whole.result.epochs) < 0.01  # the plateau schedule moved

    def crash(record):
        if record.epoch == 15:
            raise _Interrupt

    config = TrainConfig(dataset=SMALL, quiet=True, checkpoint_dir=str(tmp_path / "parts"), **LOOP)
    with pytest.raises(_Interrupt):
        run_training(config, on_epoch=crash)
    assert list_checkpoints(tmp_path / "parts")[-1][0] == 12
    resumed = _run(**LOOP, checkpoint_dir=str(tmp_path / "parts"), resume=True, log_csv=str(tmp_path / "parts.csv"))
    assert resumed.metrics["resumed_from"]["epoch"] == 12
    assert _without_times(resumed.metrics) == _without_times(whole.metrics)
    manifests = [json.loads((path / MANIFEST).read_text())["history"] for path in
                 (tmp_path / "whole" / f"epoch-{whole.metrics['final']['stopped_at_epoch']:08d}",
                  tmp_path / "parts" / f"epoch-{whole.metrics['final']['stopped_at_epoch']:08d}")]
    assert manifests[0]["early_stop"] == manifests[1]["early_stop"]  # the patience counter
    assert manifests[0]["lr_schedule"] == manifests[1]["lr_schedule"]  # the schedule's state
    assert [r[:1] + r[2:5] + r[6:] for r in csv.reader(open(tmp_path / "whole.csv"))] == \
        [r[:1] + r[2:5] + r[6:] for r in csv.reader(open(tmp_path / "parts.csv"))]
    again = _run(**LOOP, checkpoint_dir=str(tmp_path / "parts"), resume=True)  # stopped already: nothing to do
    assert again.result.stopped_early and len(again.result.epochs) == len(whole.result.epochs)
    assert again.metrics["final"]["timed_epochs"] == 0


def test_cosine_resumes_exactly_and_a_changed_schedule_or_rate_is_refused(tmp_path):
    options = {"epochs": 12, "lr_schedule": "cosine", "lr_min": 0.001, "checkpoint_every": 5}
    whole = _run(**options, checkpoint_dir=str(tmp_path / "whole"))
    shutil.copytree(tmp_path / "whole", tmp_path / "parts")
    shutil.rmtree(tmp_path / "parts" / "epoch-00000012")
    resumed = _run(**options, checkpoint_dir=str(tmp_path / "parts"), resume=True)
    assert resumed.metrics["resumed_from"]["epoch"] == 10
    assert _without_times(resumed.metrics) == _without_times(whole.metrics)
    with pytest.raises(CheckpointError, match="lr_schedule is 'cosine' there and 'step' here"):
        _run(**{**options, "lr_schedule": "step", "lr_min": None}, checkpoint_dir=str(tmp_path / "whole"),
             resume=True)
    with pytest.raises(CheckpointError, match="--lr cannot change"):
        _run(**options, lr=0.02, checkpoint_dir=str(tmp_path / "whole"), resume=True)
    manifest_file = tmp_path / "whole" / "epoch-00000012" / MANIFEST
    manifest = json.loads(manifest_file.read_text())
    for tamper in ({"optimizer": "x"}, {"_last_lr": ["x"]}, {"last_epoch": None}):
        manifest_file.write_text(json.dumps({**manifest, "history": {
            **manifest["history"], "lr_schedule": {**manifest["history"]["lr_schedule"], **tamper}}}))
        with pytest.raises(CheckpointError, match="no valid state of the cosine learning-rate schedule"):
            _run(**options, checkpoint_dir=str(tmp_path / "whole"), resume=True)


def test_a_checkpoint_written_before_the_loop_options_still_resumes(tmp_path):
    whole = _run(epochs=8, patience=50, checkpoint_dir=str(tmp_path / "whole"))
    _run(epochs=5, checkpoint_dir=str(tmp_path / "old"))
    manifest_file = tmp_path / "old" / "epoch-00000005" / MANIFEST
    manifest = json.loads(manifest_file.read_text())
    for key in ("early_stop", "lr_schedule"):
        del manifest["history"][key]
    for record in manifest["history"]["epochs"]:
        del record["lr"]
    manifest["fingerprint"]["optimizer"] = {k: manifest["fingerprint"]["optimizer"][k] for k in ("lr", "weight_decay")}
    manifest_file.write_text(json.dumps(manifest))
    resumed = _run(epochs=8, patience=50, checkpoint_dir=str(tmp_path / "old"), resume=True)
    assert [r.lr for r in resumed.result.epochs] == [None] * 5 + [0.01] * 3
    assert [(r.loss, r.val_acc) for r in resumed.result.epochs] == [(r.loss, r.val_acc) for r in whole.result.epochs]
    assert resumed.result.best_epoch == whole.result.best_epoch


# --------------------------------------------------------------------------------------------------------
# On a grid


def _grid(options: dict, world: int = 2) -> dict:
    outs = run_workers(tw.train_worker, world, {"dataset": SMALL, "quiet": True, "algo": "1d", "nprocs": world,
                                                **options}, timeout_s=180)
    for out in outs[1:]:
        for a, b in zip(outs[0]["weights"], out["weights"], strict=True):
            np.testing.assert_array_equal(a, b)
    return outs[0]


@pytest.mark.parametrize("options", [
    {"epochs": 16, "lr_schedule": "cosine", "lr_min": 0.002, "eval_every": 3},
    {"epochs": 40, "lr_schedule": "plateau", "lr_plateau_patience": 1, "lr_gamma": 0.5, "patience": 4,
     "eval_every": 2},
], ids=["cosine", "plateau-with-patience"])
def test_a_grid_trains_the_schedule_of_one_process(options):
    local = _run(**options).result
    grid = _grid(options)
    np.testing.assert_allclose(grid["loss"], [r.loss for r in local.epochs], rtol=1e-4)
    assert grid["acc"] == [(r.train_acc, r.val_acc, r.test_acc) for r in local.epochs]
    assert grid["lr"] == pytest.approx([r.lr for r in local.epochs], rel=1e-12)
    assert (grid["stopped_early"], grid["best_epoch"]) == (local.stopped_early, local.best_epoch)


def test_a_grid_run_resumes_its_schedule_and_patience(tmp_path):
    options = {k: v for k, v in LOOP.items() if k != "epochs"}
    whole = _grid({**options, "epochs": 60, "checkpoint_dir": str(tmp_path / "whole")})
    assert whole["stopped_early"] and min(whole["lr"]) < 0.01
    _grid({**options, "epochs": 12, "checkpoint_dir": str(tmp_path / "parts")})
    resumed = _grid({**options, "epochs": 60, "checkpoint_dir": str(tmp_path / "parts"), "resume": True})
    assert resumed["loss"] == whole["loss"] and resumed["acc"] == whole["acc"] and resumed["lr"] == whole["lr"]
    assert (resumed["stopped_early"], resumed["best_epoch"]) == (True, whole["best_epoch"])


# --------------------------------------------------------------------------------------------------------
# predict


def test_predict_prints_and_records_the_accuracy_of_each_split(tmp_path, capsys):
    from gridgnn.train.run.training import load_graph

    model = tmp_path / "m.pt"
    assert main(["train", "--dataset", SMALL, "--epochs", "10", "--save-model", str(model), "--quiet"]) == 0
    out, preds = tmp_path / "p.json", tmp_path / "p.npy"
    assert main(["predict", "--model", str(model), "--dataset", SMALL, "--metrics-out", str(out),
                 "--predictions-out", str(preds)]) == 0
    printed = capsys.readouterr().out
    recorded = json.loads(out.read_text())["accuracy"]
    graph = load_graph(TrainConfig(dataset=SMALL))
    right = np.load(preds)["predicted"] == graph.labels
    for split in ("train", "val", "test"):
        mask = getattr(graph, f"{split}_mask")
        assert recorded[split] == {"accuracy": right[mask].mean(), "correct": int(right[mask].sum()),
                                   "vertices": int(mask.sum())}
        assert f"{split} {right[mask].mean():.4f} ({int(mask.sum())} vertices)" in printed
    assert main(["predict", "--model", str(model), "--dataset", SMALL, "--metrics-out", str(out), "--eval-split",
                 "val"]) == 0
    assert json.loads(out.read_text())["accuracy"] == {"val": recorded["val"]}
    assert capsys.readouterr().out.splitlines()[0] == f"accuracy   val {recorded['val']['accuracy']:.4f} (150 vertices)"
    assert main(["predict", "--model", str(model), "--dataset", "csbm:nodes=300,classes=3", "--metrics-out",
                 str(out)]) == 0
    assert "not measured: the graph has 3 classes, the model predicts 5" in capsys.readouterr().out
    assert json.loads(out.read_text())["accuracy"]["test"]["accuracy"] is None


def test_fit_takes_the_loop_options():
    import gridgnn

    trained = gridgnn.fit(SMALL, epochs=30, patience=2, eval_every=3, lr_schedule="step", lr_step_size=5)
    assert trained.metrics["final"]["stopped_early"] == (len(trained.history) < 30)
    assert trained.history[5].lr == pytest.approx(0.001) and trained.history[0].val_acc is None
