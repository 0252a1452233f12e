"""`gridgnn report` (pictures of a run from its metrics file) and `gridgnn train --tensorboard DIR`: what they
show are the run's own numbers."""

import base64
import json
import math
import os
import re
import subprocess
import sys

import pytest
from model_helpers import REPO_ROOT

from gridgnn.cli.main import main

pytest.importorskip("matplotlib")
pytest.importorskip("tensorboard")

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

from gridgnn.report.figures import panels, report_figure  # noqa: E402
from gridgnn.report.series import load_metrics, report_series  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def grid_run(tmp_path_factory):
    """A 2-process 2d run (3 epochs) with its metrics file and TensorBoard folder."""
    folder = tmp_path_factory.mktemp("grid_run")
    metrics, events = folder / "metrics.json", folder / "tb"
    done = subprocess.run([sys.executable, "-m", "gridgnn", "train", "--dataset", "csbm:nodes=300", "--epochs", "3",
                           "--nprocs", "2", "--algo", "2d", "--grid", "1x2", "--comm", "dense", "--reorder", "none",
                           "--no-cache-panels",  # every phase moves bytes: the heat map has rows to show
                           "--metrics-out", str(metrics), "--tensorboard",
                           str(events)], capture_output=True, text=True, cwd=REPO_ROOT, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert done.returncode == 0, done.stderr
    assert f"events     {events} (TensorBoard)" in done.stdout
    return json.loads(metrics.read_text()), metrics, events


def _mean_per_rank(lists):
    return [sum(column) / len(lists) for column in zip(*lists, strict=True)]


def _axes(figure) -> dict:
    return {ax.get_title(): ax for ax in figure.axes if ax.get_title()}


def _lines(ax) -> dict:
    return {line.get_label(): (list(line.get_xdata()), list(line.get_ydata())) for line in ax.lines}


def test_the_plotted_series_are_the_metrics_files_numbers(grid_run):
    metrics, path, _ = grid_run
    epochs = metrics["epochs"]
    numbers = [e["epoch"] for e in epochs]
    axes = _axes(report_figure(report_series(load_metrics(path))))
    assert _lines(axes["Training loss"]) == {"training loss": (numbers, [e["loss"] for e in epochs])}
    assert _lines(axes["Accuracy"]) == {name: (numbers, [e[f"{name}_acc"] for e in epochs])
                                        for name in ("train", "val", "test")}
    times = _lines(axes["Step time (max over ranks)"])
    assert times["step"] == (numbers, [1000 * e["time_s"] for e in epochs])
    for label, key in (("computation", "compute_time_s"), ("communication, exposed", "exposed_comm_time_s"),
                       ("communication, all", "comm_time_s")):
        assert times[label] == (numbers, [1000 * e[key] for e in epochs])

    # bytes per rank per phase: the heat map's cells are the file's per-rank lists, averaged over the epochs
    by_phase = {phase: _mean_per_rank([e["comm"]["by_phase"][phase] for e in epochs])
                for phase in epochs[0]["comm"]["by_phase"]}
    moved = {phase: values for phase, values in by_phase.items() if any(values)}
    heat = axes["Bytes received per rank per phase (mean per epoch)"]
    assert [t.get_text() for t in heat.get_yticklabels()] == list(moved)
    cells = heat.images[0].get_array().tolist()
    assert [len(row) for row in cells] == [2] * len(moved)
    assert sum(cells, []) == pytest.approx(sum(moved.values(), []), rel=1e-12)
    assert len(moved) >= 3 and len(moved["spmm_forward"]) == 2

    bars = axes["Step bytes per rank (mean per epoch)"]
    measured, predicted = (_mean_per_rank([e["comm"][key] for e in epochs]) for key in ("bytes", "predicted_bytes"))
    assert [r.get_height() for r in bars.containers[0]] == pytest.approx(measured, rel=1e-12)
    assert [r.get_height() for r in bars.containers[1]] == pytest.approx(predicted, rel=1e-12)

    per_rank = axes["Step time per rank (mean per epoch)"]
    compute = _mean_per_rank([e["rank_times_s"]["compute"] for e in epochs])
    exposed = _mean_per_rank([e["rank_times_s"]["exposed_comm"] for e in epochs])
    assert [r.get_height() for r in per_rank.containers[0]] == pytest.approx([1000 * t for t in compute])
    assert [r.get_height() for r in per_rank.containers[1]] == pytest.approx([1000 * t for t in exposed])


def test_the_html_page_embeds_each_panel_as_png_and_the_key_numbers(grid_run, tmp_path, capsys):
    metrics, path, _ = grid_run
    out = tmp_path / "run.html"
    assert main(["report", str(path), "--out", str(out)]) == 0
    assert capsys.readouterr().out == f"report     {out} (6 panels, 3 epochs)\n"
    page = out.read_text()
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) == len(panels(report_series(metrics))) == 6
    assert all(base64.b64decode(image).startswith(PNG_MAGIC) for image in images)
    assert "<script" not in page and "http" not in page  # self-contained
    final = metrics["final"]
    for number in (final["train_acc"], final["val_acc"], final["test_acc"], final["best_val_acc"]):
        assert f"{number:.4f}" in page
    assert f"at epoch {final['best_epoch']}" in page
    assert f"{1000 * final['mean_epoch_time_s']:.2f} ms" in page
    assert "2d grid 1x2, 2 processes" in page and "equal to measured on every rank" in page
    steps = _mean_per_rank([e["comm"]["bytes"] for e in metrics["epochs"]])  # per rank, mean per epoch
    assert f"max {max(steps) / 1024:.1f} KiB, mean {sum(steps) / 2 / 1024:.1f} KiB" in page


def test_the_png_report_and_the_default_name(grid_run, tmp_path, capsys):
    _, path, _ = grid_run
    out = tmp_path / "run.png"
    assert main(["report", str(path), "--out", str(out)]) == 0
    assert out.read_bytes().startswith(PNG_MAGIC) and len(out.read_bytes()) > 20_000
    copy = tmp_path / "copy.json"
    copy.write_bytes(path.read_bytes())
    assert main(["report", str(copy)]) == 0
    assert (tmp_path / "copy.html").read_text().startswith("<!DOCTYPE html>")
    capsys.readouterr()


def test_a_one_process_run_shows_its_curves_and_no_grid_panel(tmp_path, capsys):
    metrics = tmp_path / "local.json"
    assert main(["train", "--dataset", "csbm:nodes=300", "--epochs", "4", "--quiet", "--metrics-out",
                 str(metrics)]) == 0
    series = report_series(load_metrics(metrics))
    assert [name for name, _ in panels(series)] == ["loss", "accuracy", "step_time"]
    recorded = json.loads(metrics.read_text())["epochs"]
    axes = _axes(report_figure(series))
    assert _lines(axes["Step time"]) == {"step": ([1, 2, 3, 4], [1000 * e["time_s"] for e in recorded])}
    assert main(["report", str(metrics), "--out", str(tmp_path / "local.html")]) == 0
    assert "algo local, one process" in (tmp_path / "local.html").read_text()
    capsys.readouterr()


def test_a_diverged_runs_nan_losses_are_plotted_as_gaps(tmp_path):
    metrics = tmp_path / "nan.json"
    assert main(["train", "--dataset", "csbm:nodes=300", "--epochs", "3", "--quiet", "--lr", "1e30",
                 "--metrics-out", str(metrics)]) == 0
    assert "nonfinite" in json.loads(metrics.read_text())
    loss = _lines(_axes(report_figure(report_series(load_metrics(metrics))))["Training loss"])["training loss"][1]
    assert any(math.isnan(value) for value in loss)


def _cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gridgnn", *argv], capture_output=True, text=True, cwd=REPO_ROOT,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, timeout=120)


@pytest.mark.parametrize("content, said", [
    (None, "does not exist"),
    ("{not json", "is not valid JSON"),
    ('{"epochs": []}', "is not a gridgnn metrics file"),
    ('{"epochs": [{"epoch": 1}]}', "epoch record 1 lacks one of"),
    ("[1, 2]", "not a JSON object"),
    ('{"config": {"world_size": 2}, "epochs": [{"epoch": 1, "loss": 1, "train_acc": 0, "val_acc": 0, "test_acc": 0, '
     '"time_s": 1, "comm": {"bytes": [1, 2]}}]}', "communication records do not read (missing 'by_phase')"),
    ('{"config": {"world_size": 2}, "epochs": [{"epoch": 1, "loss": 1, "train_acc": 0, "val_acc": 0, "test_acc": 0, '
     '"time_s": 1, "comm": {"bytes": [1, 2], "by_phase": {"dense": [1]}}}]}', "communication records do not read"),
    ('{"epochs": [], "nonfinite": {"/epochs/0/loss": "NaN"}}', "'nonfinite' list is malformed"),
])
def test_bad_metrics_files_are_one_line_and_no_report(tmp_path, capsys, content, said):
    source = tmp_path / "m.json"
    if content is not None:
        source.write_text(content)
    assert main(["report", str(source), "--out", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gridgnn: error: metrics file") and said in err and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == (["m.json"] if content is not None else [])


def test_a_wrong_suffix_or_folder_is_refused(grid_run, tmp_path, capsys):
    _, path, _ = grid_run
    assert main(["report", str(path), "--out", str(tmp_path / "r.pdf")]) == 2
    assert "--out must name a .html or .png file" in capsys.readouterr().err
    assert main(["report", str(path), "--out", str(tmp_path / "no" / "r.png")]) == 2
    assert "cannot write report" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_without_matplotlib_one_line_names_the_extra(grid_run, tmp_path, monkeypatch, capsys):
    _, path, _ = grid_run
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    assert main(["report", str(path), "--out", str(tmp_path / "r.html")]) == 2
    assert capsys.readouterr().err == ("gridgnn: error: gridgnn report draws with matplotlib, which is not "
                                       "installed: pip install 'gridgnn[plots]'\n")
    assert list(tmp_path.iterdir()) == []


def _scalars(folder) -> dict:
    events = EventAccumulator(str(folder))
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def test_tensorboard_scalars_are_the_metrics_files_numbers(grid_run):
    metrics, _, folder = grid_run
    logged, epochs = _scalars(folder), metrics["epochs"]
    numbers = [e["epoch"] for e in epochs]

    def series(tag):
        steps, values = zip(*logged[tag], strict=True)
        assert list(steps) == numbers
        return list(values)

    # TensorBoard keeps 32-bit floats: the loss and accuracies are float32 already, times are rounded to it
    for tag, key in (("loss", "loss"), ("accuracy/train", "train_acc"), ("accuracy/val", "val_acc"),
                     ("accuracy/test", "test_acc"), ("time/step_s", "time_s"), ("time/comm_s", "comm_time_s"),
                     ("time/exposed_comm_s", "exposed_comm_time_s"), ("time/compute_s", "compute_time_s")):
        assert series(tag) == pytest.approx([e[key] for e in epochs], rel=1e-6), tag
    assert series("bytes/step_max_rank") == [max(e["comm"]["bytes"]) for e in epochs]
    assert series("bytes/predicted_max_rank") == [max(e["comm"]["predicted_bytes"]) for e in epochs]
    assert series("bytes/eval_max_rank") == [max(e["comm"]["eval_bytes"]) for e in epochs]
    for phase in epochs[0]["comm"]["by_phase"]:
        assert series(f"bytes/{phase}") == [max(e["comm"]["by_phase"][phase]) for e in epochs]
    assert min(series("bytes/spmm_forward")) > 0
    assert len(os.listdir(folder)) == 1  # rank 0 alone writes


def test_tensorboard_on_one_process_logs_each_epoch_and_no_bytes(tmp_path, capsys):
    folder, metrics = tmp_path / "runs" / "a", tmp_path / "m.json"
    assert main(["train", "--dataset", "csbm:nodes=300", "--epochs", "5", "--quiet", "--tensorboard", str(folder),
                 "--metrics-out", str(metrics)]) == 0
    logged, epochs = _scalars(folder), json.loads(metrics.read_text())["epochs"]
    assert set(logged) == {"loss", "accuracy/train", "accuracy/val", "accuracy/test", "time/step_s", "lr"}
    assert logged["loss"] == [(e["epoch"], pytest.approx(e["loss"], rel=1e-6)) for e in epochs]
    assert [v for _, v in logged["lr"]] == pytest.approx([e["lr"] for e in epochs], rel=1e-6)
    assert [v for _, v in logged["accuracy/val"]] == pytest.approx([e["val_acc"] for e in epochs], rel=1e-6)


def test_tensorboard_refusals_are_one_line_before_training(tmp_path, monkeypatch, capsys):
    a_file = tmp_path / "f"
    a_file.write_text("x")
    assert main(["train", "--epochs", "2", "--tensorboard", str(a_file)]) == 2
    assert capsys.readouterr().err == f"gridgnn: error: --tensorboard '{a_file}' is not a folder\n"
    assert main(["train", "--epochs", "2", "--nprocs", "2", "--algo", "1d", "--tensorboard", str(a_file)]) == 2
    assert "--tensorboard" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    assert main(["train", "--epochs", "2", "--tensorboard", str(tmp_path / "tb")]) == 2
    assert capsys.readouterr().err == ("gridgnn: error: --tensorboard needs the tensorboard package, which is not "
                                       "installed: pip install 'gridgnn[tensorboard]'\n")
    assert not (tmp_path / "tb").exists()


def test_the_event_writer_opens_before_the_first_epoch(tmp_path):
    """Importing tensorboard takes seconds: done between two epochs on rank 0, it would hold the other ranks
    in their next collective and swell that epoch's communication time, so the writer opens before training."""
    from gridgnn.train.outputs.tensorboard_log import TensorBoardLog

    log = TensorBoardLog(str(tmp_path / "tb"))
    assert [p.name.startswith("events.out.tfevents") for p in (tmp_path / "tb").iterdir()] == [True]
    log.epoch({"epoch": 1, "loss": 1.5, "train_acc": 0.5, "val_acc": 0.25, "test_acc": 0.125, "time_s": 0.5})
    log.finish(None)
    assert _scalars(tmp_path / "tb")["accuracy/test"] == [(1, 0.125)]
