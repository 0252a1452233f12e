"""Starting from trained weights (issue 38, item 7): ``--init-from MODEL_FILE`` starts a run from a saved
model of the same architecture (one line otherwise), and ``--resume`` takes a new ``--lr``, ``--weight-decay``
and ``--epochs``."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

import gridgnn
from gridgnn.cli.main import main
from gridgnn.train.run.inference import load_trained

DATA = "csbm:nodes=300"
BASE = ["train", "--dataset", DATA, "--dropout", "0", "--quiet"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A GCN trained 5 epochs (no dropout), saved with its last weights."""
    path = tmp_path_factory.mktemp("init") / "m.pt"
    assert main([*BASE, "--epochs", "5", "--save-model", str(path), "--weights", "last"]) == 0
    return path


def _epochs(path) -> list[dict]:
    return json.loads(path.read_text())["epochs"]


def test_a_run_starts_from_the_model_files_weights(trained, tmp_path):
    """Its first loss is the saved model's training loss (before any step), not a fresh model's."""
    metrics = tmp_path / "m.json"
    assert main([*BASE, "--epochs", "2", "--init-from", str(trained), "--metrics-out", str(metrics)]) == 0
    graph = gridgnn.as_graph(DATA)
    log_probs = gridgnn.predict(gridgnn.load_model(trained), graph).probabilities.log()
    mask = torch.as_tensor(graph.train_mask)
    expected = -log_probs[mask, torch.as_tensor(graph.labels)[mask]].mean().item()
    first = _epochs(metrics)[0]["loss"]
    assert first == pytest.approx(expected, rel=1e-5)
    fresh = tmp_path / "fresh.json"
    assert main([*BASE, "--epochs", "1", "--metrics-out", str(fresh)]) == 0
    assert _epochs(fresh)[0]["loss"] > first + 0.05  # a random start is far worse than 5 trained epochs
    document = json.loads(metrics.read_text())
    assert document["config"]["init_from"] == str(trained)


def test_fit_takes_init_from_and_a_grid_loads_it_alike(trained, tmp_path):
    local = gridgnn.fit(DATA, epochs=2, dropout=0.0, init_from=str(trained))
    metrics = tmp_path / "grid.json"
    assert main([*BASE, "--epochs", "2", "--init-from", str(trained), "--nprocs", "2", "--algo", "1d",
                 "--threads", "1", "--metrics-out", str(metrics)]) == 0
    assert [e["loss"] for e in _epochs(metrics)] == pytest.approx([e.loss for e in local.history], rel=1e-5)


@pytest.mark.parametrize("flags,fragment", [
    (["--model", "sage"], "holds a gcn model; this run trains --model sage"),
    (["--hidden", "8"], "whose --hidden is 16; this run's is 8"),
    (["--layers", "3"], "whose --layers is 2; this run's is 3"),
    (["--dataset", "csbm:nodes=300,features=8"], "input width (the dataset's features) is 32; this run's is 8"),
    (["--nprocs", "2", "--algo", "1d", "--hidden", "8"], "whose --hidden is 16"),  # the launcher, before workers
])
def test_a_model_of_another_architecture_is_one_line(trained, capsys, flags, fragment):
    assert main([*BASE, "--epochs", "1", "--init-from", str(trained), *flags]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and err.startswith("gridgnn: error: --init-from ")
    assert fragment in err


def test_a_missing_model_file_is_one_line(tmp_path, capsys):
    assert main([*BASE, "--epochs", "1", "--init-from", str(tmp_path / "none.pt")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gridgnn: error: --init-from: model file ") and "does not exist" in err


def test_resume_takes_a_new_learning_rate_and_applies_it(tmp_path, capsys):
    """``--resume --lr 0.005`` was refused. Now the resumed step uses the new rate: Adam's update from the
    same state and gradient is proportional to it, so the step from epoch 4 to 5 is half the 0.01 one."""
    ck = tmp_path / "ck"
    assert main([*BASE, "--epochs", "4", "--checkpoint-dir", str(ck), "--checkpoint-every", "4"]) == 0
    before = load_trained(ck / "epoch-00000004")[0].state_dict()
    shutil.copytree(ck, tmp_path / "ck2")
    steps = {}
    for lr, folder in ((0.01, ck), (0.005, tmp_path / "ck2")):
        saved, metrics = tmp_path / f"{lr}.pt", tmp_path / f"{lr}.json"
        assert main([*BASE, "--epochs", "5", "--checkpoint-dir", str(folder), "--resume", "--lr", str(lr),
                     "--save-model", str(saved), "--weights", "last", "--metrics-out", str(metrics)]) == 0
        after = gridgnn.load_model(saved).state_dict()
        steps[lr] = {k: after[k] - before[k] for k in before}
        resumed = json.loads(metrics.read_text())["resumed_from"]
        assert resumed.get("changed") == ({"lr": [0.01, 0.005]} if lr == 0.005 else None)
    for key, full in steps[0.01].items():
        torch.testing.assert_close(steps[0.005][key], 0.5 * full, rtol=1e-4, atol=1e-7)
    capsys.readouterr()
    assert main(["train", "--dataset", DATA, "--dropout", "0", "--epochs", "6", "--checkpoint-dir", str(ck),
                 "--resume", "--weight-decay", "0.001"]) == 0
    assert "(epoch 5, --weight-decay 0.0005 there, 0.001 now)" in capsys.readouterr().out


def test_resume_still_refuses_another_model_and_says_what_may_change(tmp_path, capsys):
    ck = tmp_path / "ck"
    assert main([*BASE, "--epochs", "2", "--checkpoint-dir", str(ck)]) == 0
    assert main([*BASE, "--epochs", "3", "--checkpoint-dir", str(ck), "--resume", "--dropout", "0.5"]) == 2
    err = capsys.readouterr().err
    assert "model dropout is 0.0 there and 0.5 here" in err and "--lr and --weight-decay may change" in err


def test_resume_in_another_comm_precision_is_allowed_and_said(tmp_path, capfd):
    """A run checkpointed with int8 activations resumes with bf16 ones: the precision changes rounding, not
    the model, so the checkpoint fits; the metrics and the ``resumed`` line say what changed."""
    ck, metrics = tmp_path / "ck", tmp_path / "m.json"
    grid = ["--nprocs", "2", "--algo", "1d", "--comm", "dense", "--reorder", "none"]
    assert main([*BASE, *grid, "--epochs", "2", "--checkpoint-dir", str(ck), "--comm-precision", "int8"]) == 0
    capfd.readouterr()
    assert main(["train", "--dataset", DATA, "--dropout", "0", *grid, "--epochs", "3", "--checkpoint-dir", str(ck),
                 "--resume", "--comm-precision", "bf16", "--metrics-out", str(metrics)]) == 0
    assert "(epoch 2, --comm-precision int8 there, bf16 now)" in capfd.readouterr().out
    written = json.loads(metrics.read_text())
    assert written["resumed_from"]["changed"] == {"comm_precision": ["int8", "bf16"]}
    assert written["config"]["comm_precision"] == "bf16" and len(written["epochs"]) == 3


def test_gin_norm_is_part_of_the_architecture_and_of_the_run(tmp_path, capsys):
    """``--gin-norm`` changes the weights a model has: starting or resuming with the other norm is one line; a
    model file with the norm predicts from the command line as the API does."""
    gin = [*BASE, "--model", "gin", "--hidden", "8"]
    saved, ck = tmp_path / "gin.pt", tmp_path / "ck"
    assert main([*gin, "--gin-norm", "layer", "--epochs", "2", "--save-model", str(saved), "--weights", "last",
                 "--checkpoint-dir", str(ck)]) == 0
    capsys.readouterr()
    assert main([*gin, "--epochs", "1", "--init-from", str(saved)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "whose --gin-norm is layer; this run's is none" in err
    assert main([*gin, "--epochs", "3", "--checkpoint-dir", str(ck), "--resume"]) == 2
    assert "model gin_norm is 'layer' there and 'none' here" in capsys.readouterr().err
    assert main([*gin, "--gin-norm", "layer", "--epochs", "3", "--init-from", str(saved)]) == 0
    predictions = tmp_path / "p.csv"  # on a 1x2 grid: the norm's row sums all-reduced on col
    assert main(["predict", "--model", str(saved), "--dataset", DATA, "--algo", "2d", "--grid", "1x2", "--nprocs",
                 "2", "--threads", "1", "--quiet", "--predictions-out", str(predictions)]) == 0
    expected = gridgnn.predict(gridgnn.load_model(saved), gridgnn.as_graph(DATA)).predicted
    header, *rows = predictions.read_text().splitlines()
    column = header.split(",").index("predicted")
    assert [int(row.split(",")[column]) for row in rows] == expected.tolist()
