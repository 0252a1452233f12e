"""`gridgnn.fit` takes the options `gridgnn train` takes (issue 38, item 1): on a grid it goes through the
launcher the command line uses (`gridgnn.launch.workers`), so ``quiet``, ``dataset=`` and ``progress`` work
there as in one process, and the result is the command line's."""

from __future__ import annotations

import json

import pytest
import torch

import gridgnn
from gridgnn.cli.main import main
from gridgnn.errors import ConfigError

DATA = "csbm:nodes=300"
GRID = dict(nprocs=2, algo="1d", epochs=3, threads=1)


@pytest.mark.slow  # fit on workers in the default tier: the quiet=False/progress test
def test_fit_on_two_processes_with_quiet_equals_the_command_line(tmp_path, capfd):
    """``quiet=True`` on a grid was a TypeError (fit set it too); the run is the CLI's, to the bit."""
    result = gridgnn.fit(DATA, quiet=True, **GRID)
    assert capfd.readouterr().out == ""
    status = main(["train", "--dataset", DATA, "--nprocs", "2", "--algo", "1d", "--epochs", "3", "--threads", "1",
                   "--quiet", "--metrics-out", str(tmp_path / "m.json"), "--save-model", str(tmp_path / "m.pt")])
    assert status == 0
    cli = json.loads((tmp_path / "m.json").read_text())
    assert [e.loss for e in result.history] == [e["loss"] for e in cli["epochs"]]
    assert [e.val_acc for e in result.history] == [e["val_acc"] for e in cli["epochs"]]
    assert result.metrics["config"]["grid_shape"] == cli["config"]["grid_shape"] == "2"
    saved = gridgnn.load_model(tmp_path / "m.pt").state_dict()
    for name, value in result.model.state_dict().items():
        assert torch.equal(value, saved[name]), name


def test_fit_on_two_processes_takes_dataset_quiet_false_and_progress(capfd):
    """``dataset=`` and ``quiet=False`` were TypeErrors on a grid, ``progress=True`` refused as 'quiet and
    progress'; now the workers print one line per epoch and the summary."""
    result = gridgnn.fit(dataset=DATA, quiet=False, progress=True, **GRID)
    out = capfd.readouterr().out
    assert "starting   2 workers, 1 thread each" in out and "best val" in out
    epochs = [line for line in out.splitlines() if line.startswith("epoch ")]
    assert [line.split()[1] for line in epochs] == ["1/3", "2/3", "3/3"], out
    assert f"loss {result.history[0].loss:.4f}" in epochs[0] and "(rank 0)" in epochs[0]
    assert result.config.dataset == DATA and result.config.nprocs == 2


def test_fit_in_one_process_takes_dataset_and_prints_progress(capsys):
    result = gridgnn.fit(dataset=DATA, epochs=2, progress=True)
    task, *lines = capsys.readouterr().out.splitlines()  # the run's first line says what it trains
    assert task.startswith("task       multiclass") and [line.split()[1] for line in lines] == ["1/2", "2/2"]
    assert f"loss {result.history[1].loss:.4f}" in lines[1]
    quiet = gridgnn.fit(DATA, epochs=2, quiet=False, dataset=DATA)  # a log: 2 epochs in < 5 s print no epoch
    assert [e.loss for e in quiet.history] == [e.loss for e in result.history]
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()] == ["task"]
    gridgnn.fit(DATA, epochs=2)
    assert capsys.readouterr().out == ""  # fit is quiet by default


def test_fit_refuses_two_datasets_or_none():
    with pytest.raises(ConfigError, match="two datasets"):
        gridgnn.fit("cora", dataset=DATA, epochs=1)
    with pytest.raises(ConfigError, match="fit needs data"):
        gridgnn.fit(epochs=1)
