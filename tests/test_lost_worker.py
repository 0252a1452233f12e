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


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
@pytest.mark.parametrize("grid_flags", [["--algo", "1d"], ["--algo", "1.5d", "--replication", "2"],
                                        ["--algo", "2d", "--grid", "1x2"], ["--algo", "3d", "--grid", "1x1x2"]])
def test_sigkill_of_one_worker_ends_the_run(grid_flags):
    timeout_s = 20
    proc = subprocess.Popen([sys.executable, "-m", "gridgnn", "train", "--dataset", "csbm:nodes=3000",
                             *grid_flags, "--nprocs", "2", "--epochs", "100000", "--progress",
                             "--timeout", str(timeout_s)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        while line and not line.startswith("epoch"):
            line = proc.stdout.readline()
        assert line.startswith("epoch"), proc.stderr.read()
        workers = _children(proc.pid)
        victim = next(pid for pid, rank in workers.items() if rank == 1)
        os.kill(victim, signal.SIGKILL)
        start = time.monotonic()
        _, err = proc.communicate(timeout=timeout_s + 30)
        elapsed = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert elapsed < timeout_s + 5
    assert "worker rank 1 was killed by SIGKILL" in err
    assert "Traceback" not in err
    assert not any(_alive(pid) for pid in workers), "orphan workers left behind"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
def test_a_stalled_worker_fails_the_run_after_the_timeout():
    timeout_s = 5
    proc = subprocess.Popen([sys.executable, "-m", "gridgnn", "train", "--dataset", "csbm:nodes=3000", "--algo",
                             "1d", "--nprocs", "2", "--epochs", "100000", "--progress", "--timeout", str(timeout_s)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        while line and not line.startswith("epoch"):
            line = proc.stdout.readline()
        workers = _children(proc.pid)
        os.kill(next(pid for pid, rank in workers.items() if rank == 1), signal.SIGSTOP)
        start = time.monotonic()
        _, err = proc.communicate(timeout=timeout_s + 60)
        elapsed = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3
    assert timeout_s - 1 < elapsed < timeout_s + 8
    assert "did not answer in time" in err and "Traceback" not in err
    assert not any(_alive(pid) for pid in workers), "orphan workers left behind"
