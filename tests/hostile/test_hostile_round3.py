"""Issue 40, "hard to break, round three", classes 5-7: the corpus of `hostile_corpus_round3.py` through the
real code paths.

Refusals keep the contract of `test_hostile_inputs.py`: exit status 2, one line ``gridgnn: error: ...`` naming
the problem, nothing on stdout, no traceback, no output file. Valid work (class 5, resuming across grids and
vertex orders) must succeed and end as the uninterrupted run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from hostile_corpus_round3 import (
    API_CASES,
    ARCHIVE_CASES,
    ENV_CASES,
    FLAG_CASES,
    MODEL_FILE_CASES,
    QUIET_PLAN_CASES,
    RESUME_CASES,
    SMALL,
)

from gridgnn.cli.main import main

REPO_ROOT = Path(__file__).resolve().parents[2]


def _params(cases: list) -> list:
    return [pytest.param(*case[1:], id=case[0]) for case in cases]


def _one_error_line(status: int, out: str, err: str, keyword: str) -> str:
    assert status == 2, f"exit status {status}, stderr: {err!r}"
    assert "Traceback" not in err and out == "", (out, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gridgnn: error: "), err
    assert keyword.lower() in lines[0].lower(), f"{keyword!r} not in {lines[0]!r}"
    return lines[0]


@pytest.fixture(scope="module")
def model_file(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("model")
    assert main(["train", "--dataset", SMALL, "--epochs", "1", "--quiet", "--save-model", str(folder / "m.pt")]) == 0
    return folder / "m.pt"


# --- class 6: untrusted sizes --------------------------------------------------------------------------------


@pytest.mark.parametrize(("build", "keyword"), _params(MODEL_FILE_CASES))
def test_bad_model_file(build, keyword: str, model_file: Path, tmp_path: Path, capsys) -> None:
    bad = build(torch.load(model_file, weights_only=True), tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    status = main(["predict", "--model", str(bad), "--dataset", SMALL, "--predictions-out", str(out / "p.npy")])
    line = _one_error_line(status, *capsys.readouterr(), keyword)
    assert bad.name in line and list(out.iterdir()) == []


@pytest.mark.parametrize(("build", "keyword"), _params(ARCHIVE_CASES))
def test_inflating_archive(build, keyword: str, tmp_path: Path, capsys) -> None:
    argument, culprit = build(tmp_path)
    status = main(["train", "--dataset", argument, "--epochs", "1", "--quiet"])
    line = _one_error_line(status, *capsys.readouterr(), keyword)
    assert culprit in line


# --- class 7: tracebacks and wrong lines ---------------------------------------------------------------------


@pytest.mark.parametrize(("argv", "keyword"), _params(FLAG_CASES))
def test_bad_flag(argv: list[str], keyword: str, model_file: Path, tmp_path: Path, capsys) -> None:
    argv = [arg.replace("{tmp}", str(tmp_path)).replace("{model}", str(model_file)) for arg in argv]
    _one_error_line(main(argv), *capsys.readouterr(), keyword)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", _params(QUIET_PLAN_CASES))
def test_plan_prints_no_warnings(argv: list[str], capsys) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's RuntimeWarnings become failures here
        assert main(argv) == 0
    out, err = capsys.readouterr()
    assert err == "" and "84" in out


# --- class 5: valid work refused -----------------------------------------------------------------------------


def _on_grid(config: dict, world: int) -> dict:
    import train_workers as tw

    from gridgnn.launch.spawn import run_workers

    return run_workers(tw.train_worker, world, config, timeout_s=180)[0]


@pytest.fixture(scope="module")
def uninterrupted() -> dict:
    """The run every resumed case must end as (4 epochs on one process: a reordered run trains exactly the run
    of ``--reorder none``, and grids differ by float rounding only)."""
    import gridgnn

    fitted = gridgnn.fit(SMALL, epochs=4, weights="last")
    return {"weights": [p.detach().numpy() for p in fitted.model.parameters()],
            "loss": [e["loss"] for e in fitted.metrics["epochs"]]}


@pytest.mark.slow  # 8 grid runs; test_checkpoint.py keeps metis P=2 -> P=4 and -> none in the quick suite
@pytest.mark.parametrize(("first", "resumed"), _params(RESUME_CASES))
def test_resume_across_grids_and_orders(first, resumed, uninterrupted: dict, tmp_path: Path) -> None:
    common = {"dataset": SMALL, "quiet": True, "checkpoint_dir": str(tmp_path / "ck"), "checkpoint_every": 2}
    (first_config, first_world), (resumed_config, resumed_world) = first, resumed
    _on_grid({**common, **first_config, "epochs": 2}, first_world)
    out = _on_grid({**common, **resumed_config, "epochs": 4, "resume": True}, resumed_world)
    for a, b in zip(out["weights"], uninterrupted["weights"], strict=True):
        assert np.abs(a - b).max() <= 1e-5
    np.testing.assert_allclose(out["loss"], uninterrupted["loss"], rtol=1e-5)


@pytest.mark.slow  # two launches; the summary itself is tested quickly in test_checkpoint.py
def test_resume_at_the_final_epoch_on_another_world_size_prints_its_summary(tmp_path: Path) -> None:
    """The checkpoint holds every epoch: the resumed run on 4 processes runs none and says so (no IndexError)."""
    argv = ["train", "--dataset", SMALL, "--epochs", "2", "--algo", "1d", "--checkpoint-dir", str(tmp_path / "ck")]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    for procs in ("2", "4"):
        done = subprocess.run([sys.executable, "-m", "gridgnn", *argv, "--nprocs", procs, "--resume"],
                              capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "no epoch ran on this grid" in done.stdout


# --- class 6: a checkpoint's best weights are verified as its other files ------------------------------------


def _checkpointed(tmp: Path, capsys) -> tuple[list[str], Path]:
    argv = ["train", "--dataset", SMALL, "--epochs", "3", "--quiet", "--checkpoint-dir", str(tmp / "ck")]
    assert main(argv) == 0
    capsys.readouterr()
    return [*argv[:4], "4", *argv[5:], "--resume"], tmp / "ck" / "best-weights.pt"


def test_altered_best_weights_are_refused_on_resume(tmp_path: Path, capsys) -> None:
    from gridgnn.train.checkpoint.manifest import read_manifest
    from gridgnn.train.checkpoint.naming import latest_checkpoint

    resume, best = _checkpointed(tmp_path, capsys)
    record = read_manifest(latest_checkpoint(tmp_path / "ck"))["best_weights"]
    assert record["bytes"] == best.stat().st_size and len(record["sha256"]) == 64
    saved = torch.load(best, weights_only=True)
    first = next(iter(saved["state"]))
    saved["state"][first] = saved["state"][first] + 1.0  # the recorded epoch, other weights
    torch.save(saved, best)
    _one_error_line(main(resume), *capsys.readouterr(), "best-weights.pt does not match the size and SHA-256")


def test_best_weights_of_a_later_unfinished_save_are_not_an_alteration(tmp_path: Path, capsys) -> None:
    """A crash after a later save wrote its best weights but before its checkpoint was complete: the resume
    goes on (without those weights for the recorded epoch), as before the record existed."""
    resume, best = _checkpointed(tmp_path, capsys)
    saved = torch.load(best, weights_only=True)
    torch.save({"epoch": saved["epoch"] + 1, "state": saved["state"]}, best)
    assert main([*resume, "--weights", "last"]) == 0


@pytest.mark.parametrize(("variables", "keyword"), _params(ENV_CASES))
@pytest.mark.parametrize("command", ["train", "predict"])
def test_hand_set_torchrun_environment(variables: dict, keyword: str, command: str, model_file: Path,
                                       tmp_path: Path, monkeypatch, capfd) -> None:
    """One line, exit 2, before torch.distributed reads the variables (capfd: C++ frames go to fd 2)."""
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    argv = (["train", "--dataset", SMALL, "--epochs", "1", "--algo", "1d", "--timeout", "5", "--quiet"]
            if command == "train" else ["predict", "--model", str(model_file), "--dataset", SMALL, "--timeout", "5",
                                        "--predictions-out", str(tmp_path / "p.npy")])
    _one_error_line(main(argv), *capfd.readouterr(), keyword)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("call", "keyword"), _params(API_CASES))
def test_api_array_helpers_refuse_bad_arrays(call, keyword: str) -> None:
    from gridgnn.errors import DataError

    with pytest.raises(DataError, match=re.escape(keyword)):
        call()


def test_ctrl_c_during_a_checkpoint_save_exits_130_and_keeps_the_previous_checkpoint(tmp_path: Path, monkeypatch,
                                                                                     capsys) -> None:
    """DCP wraps every exception of a save, Ctrl-C included, into its CheckpointException: it must come out
    as an interrupt (status 130), not as a damaged save (status 2)."""
    from torch.distributed.checkpoint import FileSystemWriter

    from gridgnn.train.checkpoint.naming import list_checkpoints

    original, saves = FileSystemWriter.write_data, []

    def interrupted_on_the_second_save(self, *args, **kwargs):
        saves.append(1)
        if len(saves) == 2:
            raise KeyboardInterrupt
        return original(self, *args, **kwargs)

    monkeypatch.setattr(FileSystemWriter, "write_data", interrupted_on_the_second_save)
    argv = ["train", "--dataset", SMALL, "--epochs", "2", "--quiet", "--checkpoint-dir", str(tmp_path / "ck"),
            "--checkpoint-every", "1"]
    assert main(argv) == 130
    assert capsys.readouterr().err == "gridgnn: interrupted\n"
    assert [epoch for epoch, _ in list_checkpoints(tmp_path / "ck")] == [1]


@pytest.mark.parametrize("procs", ["1", pytest.param("2", marks=pytest.mark.slow)])
def test_closed_stdout_is_no_traceback(procs: str, tmp_path: Path) -> None:
    """``gridgnn train ... >&-``: Python starts without sys.stdout; the output is discarded, the run completes."""
    argv = [sys.executable, "-m", "gridgnn", "train", "--dataset", SMALL, "--epochs", "1", "--nprocs", procs,
            "--metrics-out", str(tmp_path / "m.json"), *(["--algo", "1d"] if procs != "1" else [])]
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, preexec_fn=lambda: os.close(1))
    assert done.returncode == 0 and done.stderr == "", done.stderr[-3000:]
    assert (tmp_path / "m.json").is_file()


def test_metis_prints_nothing_of_its_own(capfd) -> None:
    """METIS's ``***Cannot bisect a graph with 0 vertices!`` (more parts than vertices) stays off the terminal,
    on the one-weight (pymetis) and the multi-constraint (ctypes) paths alike."""
    import scipy.sparse as sp

    from gridgnn.data.metis import membership

    path = sp.csr_matrix(np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]]))
    assert membership(path, 8).shape == (3,)
    assert membership(path, 16, np.ones((3, 2), np.int64)).shape == (3,)
    assert capfd.readouterr() == ("", "")


@pytest.mark.slow  # waits out a 5-second rendezvous timeout in a fresh interpreter
def test_a_worker_that_cannot_reach_its_master_prints_no_cpp_log_lines(tmp_path: Path) -> None:
    """c10d logs ``[E ...] socket.cpp`` / ``[W ...] TCPStore.cpp`` lines and C++ frames while it retries; they
    are captured where the process group is joined, so only gridgnn's own line (if any) reaches stderr."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": "29517"}
    done = subprocess.run([sys.executable, "-m", "gridgnn", "train", "--dataset", SMALL, "--epochs", "1", "--algo",
                           "1d", "--timeout", "5"], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert done.returncode == 3, done.stderr[-2000:]
    assert all(line.startswith("gridgnn: ") for line in done.stderr.splitlines()), done.stderr[-2000:]


class _TwoProcessGrid:
    """The part of a `ProcessGrid` a `Communicator` reads, for rank 1 of a 2-process row (no real group)."""

    rank, device = 1, torch.device("cpu")

    def size(self, axis: str) -> int:
        return 2

    def index(self, axis: str) -> int:
        return 1

    def group(self, axis: str) -> None:
        return None


ALLOCATOR_FAILURES = [
    RuntimeError("[enforce fail at alloc_cpu.cpp:118] data. DefaultCPUAllocator: not enough memory: you tried to "
                 "allocate 4294967296 bytes."),
    RuntimeError("[../third_party/gloo/gloo/transport/tcp/pair.cc:1] DefaultCPUAllocator: can't allocate memory"),
]


@pytest.mark.parametrize("error", ALLOCATOR_FAILURES, ids=["allocator", "allocator-inside-gloo"])
@pytest.mark.parametrize("blocking", [True, False], ids=["blocking", "async"])
def test_a_rank_out_of_memory_inside_a_collective_says_so(error: BaseException, blocking: bool, monkeypatch,
                                                          capsys) -> None:
    """The rank that ran out of memory reports it (exit 2, "not enough memory"), not a peer that "stopped or
    did not answer in time" (exit 3, which blamed a healthy rank and sent the launcher looking for it)."""
    import torch.distributed as dist

    from gridgnn.cli.main import guarded
    from gridgnn.grid.comm import Communicator

    class FailingWork:
        def wait(self):
            raise error

    def broadcast(*_args, async_op=False, **_kwargs):
        if async_op:
            return FailingWork()
        raise error

    monkeypatch.setattr(dist, "broadcast", broadcast)
    comm = Communicator(_TwoProcessGrid())
    tensor = torch.zeros(4)
    call = (lambda: comm.broadcast(tensor, "row", 0)) if blocking else (
        lambda: comm.broadcast_async(tensor, "row", 0).wait())
    monkeypatch.delenv("WORLD_SIZE", raising=False)  # guarded would end a worker with os._exit
    assert guarded(lambda: call() or 0) == 2
    line = capsys.readouterr().err
    assert line.startswith("gridgnn: error: not enough memory") and "did not answer" not in line, line


@pytest.mark.slow  # reordered resumes across P: test_checkpoint in the default tier
def test_a_checkpoint_of_a_reordered_prepared_folder_resumes_on_the_dataset_itself(tmp_path: Path, capsys) -> None:
    """A folder prepared with ``--reorder metis`` keeps the digest of its content in the original order, so
    its checkpoint resumes on the dataset it was prepared from (another vertex order)."""
    folder, ck = str(tmp_path / "prep"), str(tmp_path / "ck")
    assert main(["prepare", SMALL, "--out", folder, "--reorder", "metis", "--parts", "2"]) == 0
    assert main(["train", "--dataset", folder, "--reorder", "metis", "--algo", "1d", "--nprocs", "2", "--epochs",
                 "2", "--quiet", "--checkpoint-dir", ck]) == 0
    capsys.readouterr()
    assert main(["train", "--dataset", SMALL, "--epochs", "3", "--quiet", "--checkpoint-dir", ck, "--resume"]) == 0, \
        capsys.readouterr().err
