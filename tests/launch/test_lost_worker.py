"""A worker killed in the middle of training ends the whole run quickly, names the rank, leaves no orphans."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gridgnn.train.checkpoint.naming import latest_checkpoint


def _children(pid: int) -> dict[int, int]:
    """Child pid -> its RANK for the workers of launcher ``pid`` (read from /proc)."""
    ranks = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid != pid:
                continue
            env = dict(item.split("=", 1) for item in (entry / "environ").read_text().split("\0") if "=" in item)
            ranks[int(entry.name)] = int(env["RANK"])
        except (OSError, KeyError, ValueError, IndexError):
            continue
    return ranks


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]


DATASET = ["--dataset", "csbm:nodes=3000"]


def _start_training(flags: list[str], timeout_s: int, checkpoints: Path) -> tuple[subprocess.Popen, dict[int, int]]:
    """Start `gridgnn train --nprocs 2` (endless epochs, a checkpoint every epoch) and return once the first
    checkpoint exists."""
    proc = subprocess.Popen([sys.executable, "-m", "gridgnn", "train", *DATASET, *flags, "--nprocs", "2",
                             "--epochs", "100000", "--timeout", str(timeout_s), "--quiet",
                             "--checkpoint-dir", str(checkpoints), "--checkpoint-every", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while latest_checkpoint(checkpoints) is None:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(proc.communicate()[1])
        time.sleep(0.05)
    return proc, _children(proc.pid)


def _stop_rank_one(flags: list[str], timeout_s: int, sig: signal.Signals,
                   checkpoints: Path) -> tuple[subprocess.Popen, str, float, dict[int, int]]:
    """Send ``sig`` to worker rank 1 mid-training; returns the launcher, its stderr, the seconds it took to
    end after the signal, and its workers."""
    proc, workers = _start_training(flags, timeout_s, checkpoints)
    try:
        os.kill(next(pid for pid, rank in workers.items() if rank == 1), sig)
        start = time.monotonic()
        _, err = proc.communicate(timeout=timeout_s + 60)
        return proc, err, time.monotonic() - start, workers
    finally:
        if proc.poll() is None:
            proc.kill()


def _resume_completes(flags: list[str], checkpoints: Path, metrics: Path) -> None:
    """The next run with --resume continues from the newest complete checkpoint and finishes."""
    saved = int(latest_checkpoint(checkpoints).name.split("-")[1])
    done = subprocess.run([sys.executable, "-m", "gridgnn", "train", *DATASET, *flags, "--nprocs", "2",
                           "--epochs", str(saved + 2), "--quiet", "--checkpoint-dir", str(checkpoints),
                           "--resume", "--metrics-out", str(metrics)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    document = json.loads(metrics.read_text())
    assert document["resumed_from"]["epoch"] == saved
    assert [e["epoch"] for e in document["epochs"]] == list(range(1, saved + 3))


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
@pytest.mark.parametrize("grid_flags", [  # the other grids in the slow tier: the same launcher watches every grid
    pytest.param(["--algo", "1d"], marks=pytest.mark.slow),  # the launcher's SIGTERM test stays in the default tier
    pytest.param(["--algo", "1.5d", "--replication", "2"], marks=pytest.mark.slow),
    pytest.param(["--algo", "2d", "--grid", "1x2"], marks=pytest.mark.slow),
    pytest.param(["--algo", "3d", "--grid", "1x1x2"], marks=pytest.mark.slow)])
def test_sigkill_of_one_worker_ends_the_run_and_resume_completes(grid_flags, tmp_path):
    timeout_s = 20
    proc, err, elapsed, workers = _stop_rank_one(grid_flags, timeout_s, signal.SIGKILL, tmp_path / "ckpt")
    assert proc.returncode != 0
    assert elapsed < timeout_s + 5
    assert "worker rank 1 was killed by SIGKILL" in err
    assert "Traceback" not in err
    assert not any(_alive(pid) for pid in workers), "orphan workers left behind"
    _resume_completes(grid_flags, tmp_path / "ckpt", tmp_path / "metrics.json")


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
@pytest.mark.slow  # a run waits out its collective timeout; a lost worker in the default tier: the SIGKILL test
def test_a_stalled_worker_fails_the_run_after_the_timeout_and_is_named(tmp_path):
    timeout_s = 5
    proc, err, elapsed, workers = _stop_rank_one(["--algo", "1d"], timeout_s, signal.SIGSTOP, tmp_path / "ckpt")
    assert proc.returncode == 3
    assert timeout_s - 1 < elapsed < timeout_s + 8
    assert "did not answer in time" in err and "Traceback" not in err
    assert "worker rank 1 stopped answering: it is stopped" in err
    assert not any(_alive(pid) for pid in workers), "orphan workers left behind"
    _resume_completes(["--algo", "1d"], tmp_path / "ckpt", tmp_path / "metrics.json")


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the launcher's process group (it and any worker left), so that a failing test never hangs."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _lines_until_epoch(stream) -> list[str]:
    """The launcher's lines up to its first epoch line (``starting``, ``ready`` come first) or the end."""
    lines = []
    for line in stream:
        lines.append(line)
        if line.startswith("epoch"):
            break
    return lines


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
def test_sigterm_to_the_launcher_stops_the_workers_and_removes_the_prepared_graph(tmp_path):
    env = dict(os.environ, TMPDIR=str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-m", "gridgnn", "train", "--dataset", "csbm:nodes=60,classes=2",
                             "--algo", "1d", "--nprocs", "2", "--threads", "1", "--epochs", "100000", "--progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    watchdog = threading.Timer(180, _kill_group, [proc])  # ends every blocking read below, whatever happens
    watchdog.start()
    try:
        lines = _lines_until_epoch(proc.stdout)
        workers = _children(proc.pid)
        prepared = list(tmp_path.glob("gridgnn-prepared-*"))
        proc.send_signal(signal.SIGTERM)
        start = time.monotonic()
        _, err = proc.communicate(timeout=30)
        elapsed = time.monotonic() - start
    finally:
        watchdog.cancel()
        _kill_group(proc)
        proc.wait()
    assert lines[0].startswith("task ") and lines[1].startswith("--algo "), (lines, err)
    assert lines[2].startswith("starting   2 workers"), (lines, err)
    assert lines[-1].startswith("epoch"), (lines, err)
    assert len(workers) == 2 and prepared, "the launcher had two workers and a prepared graph"
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert elapsed < 10 and "Traceback" not in err
    assert not any(_alive(pid) for pid in workers), "orphan workers left behind"
    assert not any(tmp_path.glob("gridgnn-prepared-*")), "the prepared graph was left behind"
