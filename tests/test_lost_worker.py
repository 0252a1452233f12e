"""A worker killed in the middle of training ends the whole run quickly, names the rank, leaves no orphans."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


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


def _start_training(flags: list[str], timeout_s: int) -> tuple[subprocess.Popen, dict[int, int]]:
    """Start `gridgnn train --nprocs 2` (endless epochs) and return once rank 0 has finished an epoch."""
    proc = subprocess.Popen([sys.executable, "-m", "gridgnn", "train", "--dataset", "csbm:nodes=3000", *flags,
                             "--nprocs", "2", "--epochs", "100000", "--progress", "--timeout", str(timeout_s)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    while line and not line.startswith("epoch"):
        line = proc.stdout.readline()
    if not line:
        proc.kill()
        raise AssertionError(proc.stderr.read())
    return proc, _children(proc.pid)


def _stop_rank_one(flags: list[str], timeout_s: int, sig: signal.Signals) -> tuple[subprocess.Popen, str, float,
                                                                                  dict[int, int]]:
    """Send ``sig`` to worker rank 1 mid-training; returns the launcher, its stderr, the seconds it took to
    end after the signal, and its workers."""
    proc, workers = _start_training(flags, timeout_s)
    try:
        os.kill(next(pid for pid, rank in workers.items() if rank == 1), sig)
        start = time.monotonic()
        _, err = proc.communicate(timeout=timeout_s + 60)
        return proc, err, time.monotonic() - start, workers
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
@pytest.mark.parametrize("grid_flags", [["--algo", "1d"], ["--algo", "1.5d", "--replication", "2"],
                                        ["--algo", "2d", "--grid", "1x2"], ["--algo", "3d", "--grid", "1x1x2"]])
def test_sigkill_of_one_worker_ends_the_run(grid_flags):
    timeout_s = 20
    proc, err, elapsed, workers = _stop_rank_one(grid_flags, timeout_s, signal.SIGKILL)
    assert proc.returncode != 0
    assert elapsed < timeout_s + 5
    assert "worker rank 1 was killed by SIGKILL" in err
    assert "Traceback" not in err
    assert not any(_alive(pid) for pid in workers), "orphan workers left behind"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
def test_a_stalled_worker_fails_the_run_after_the_timeout():
    timeout_s = 5
    proc, err, elapsed, workers = _stop_rank_one(["--algo", "1d"], timeout_s, signal.SIGSTOP)
    assert proc.returncode == 3
    assert timeout_s - 1 < elapsed < timeout_s + 8
    assert "did not answer in time" in err and "Traceback" not in err
    assert not any(_alive(pid) for pid in workers), "orphan workers left behind"
