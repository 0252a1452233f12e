"""Hostile outputs (issue 40, classes 1-4): every case of `hostile_outputs.py` through the real command line.

An error case must end with exit status 2 and exactly one line ``gridgnn: error: ...`` naming the problem (no
traceback, nothing on stdout); a case without a key word must succeed (exit 0). Either way the case's own
check must hold afterwards: the victim file outside the run intact, the device or FIFO still there, nothing
partial left behind. Cases that could hang or die by a signal on a regression (FIFOs, full disks) run as a
real ``python -m gridgnn`` under a timeout; the others run `gridgnn.cli.main.main` in-process.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hostile_outputs import CASES, CLASSES, HELD, SMALL, unmount

import gridgnn
from gridgnn.cli.main import main

CODE_ROOT = Path(gridgnn.__file__).resolve().parents[1]
"""The gridgnn under test (what PYTHONPATH chose), for the cases run as a real process."""


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A model file and a prepared folder (random vertex order) of `SMALL`, made once."""
    folder = tmp_path_factory.mktemp("trained")
    assert main(["train", "--dataset", SMALL, "--epochs", "1", "--quiet", "--save-model",
                 str(folder / "model.pt")]) == 0
    assert main(["prepare", SMALL, "--out", str(folder / "prep"), "--reorder", "random"]) == 0
    return folder


def _run(argv: list[str], process: bool, capsys) -> tuple[int, str, str]:
    if argv[0] == "@prepare":  # the Python API: prepare_graph into an existing folder
        from gridgnn.data.generators import csbm
        from gridgnn.data.prepared import prepare_graph

        prepare_graph(csbm(nodes=300, seed=0), argv[1])
        return 0, "", ""
    if not process:
        status = main(argv)
        out, err = capsys.readouterr()
        return status, out, err
    env = {**os.environ, "PYTHONPATH": str(CODE_ROOT)}
    try:
        done = subprocess.run([sys.executable, "-m", "gridgnn", *argv], capture_output=True, text=True, env=env,
                              timeout=240)
    except subprocess.TimeoutExpired:
        pytest.fail("gridgnn hung (killed after 240 s)")
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("case", [pytest.param(case, id=f"{CLASSES[case.cls]}-{case.id}",
                                              marks=[pytest.mark.slow] if case.slow else [])
                                  for case in CASES])
def test_hostile_output(case, trained: Path, tmp_path: Path, capsys) -> None:
    shutil.copy(trained / "model.pt", tmp_path / "model.pt")
    shutil.copytree(trained / "prep", tmp_path / "prep")
    try:
        status, out, err = _run(case.build(tmp_path), case.process, capsys)
        if case.keyword is None:
            assert status == 0 and "Traceback" not in err, f"exit status {status}: {err}"
        else:
            assert status == 2, f"exit status {status}, stderr: {err[-2000:]!r}"
            lines = err.splitlines()
            assert len(lines) == 1 and lines[0].startswith("gridgnn: error: "), f"not one line: {err[-2000:]!r}"
            assert case.keyword.lower() in lines[0].lower(), f"{case.keyword!r} not in {lines[0]!r}"
            assert out == "", out
        case.check(tmp_path)
    finally:
        unmount(tmp_path)
        while HELD:
            os.close(HELD.pop())


def test_every_class_has_several_cases() -> None:
    ids = [case.id for case in CASES]
    assert len(ids) == len(set(ids))
    for cls in CLASSES:
        assert sum(case.cls == cls for case in CASES) >= 5, CLASSES[cls]


def test_an_earlier_output_beside_the_inputs_is_no_input(trained: Path, tmp_path: Path, capsys) -> None:
    """Refusing an output on an input must not refuse a run writing again where it wrote before: a file of
    the run's own in a prepared folder, replaced by the next run, is not one of the folder's arrays."""
    shutil.copytree(trained / "prep", tmp_path / "prep")
    out = tmp_path / "prep" / "p.npy"
    argv = ["predict", "--model", str(trained / "model.pt"), "--dataset", str(tmp_path / "prep"), "--algo", "1d",
            "--quiet", "--predictions-out", str(out)]
    assert main(argv) == 0 and main(argv) == 0, capsys.readouterr().err
    assert np.load(out).shape == (300,)


def _no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_no_space_for_the_model_file_without_a_tmpfs(tmp_path: Path, monkeypatch, capsys) -> None:
    """The full-disk cases need a tmpfs (root); this one fails the model file's sync as a full disk would."""
    monkeypatch.setattr("gridgnn.safe_files.os.fsync", _no_space)
    out = tmp_path / "m.pt"
    assert main(["train", "--dataset", SMALL, "--epochs", "1", "--quiet", "--save-model", str(out)]) == 2
    assert capsys.readouterr().err == f"gridgnn: error: cannot write model file '{out}': No space left on device\n"
    assert list(tmp_path.iterdir()) == []


def test_no_space_for_npy_rows_without_a_tmpfs(tmp_path: Path, monkeypatch, capsys) -> None:
    """.npy space is reserved before any row is written: refused there, the partial removed."""
    monkeypatch.setattr("gridgnn.train.outputs.row_writer.os.posix_fallocate", _no_space)
    out = tmp_path / "p.npy"
    assert main(["train", "--dataset", SMALL, "--epochs", "1", "--quiet", "--predictions-out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == f"gridgnn: error: cannot write predictions file '{out}': No space left on device\n"
    assert list(tmp_path.iterdir()) == []
