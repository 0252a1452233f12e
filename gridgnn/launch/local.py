"""`gridgnn train --nprocs P`: start P local workers, stream rank 0, fail fast, reap everything.

Each worker is ``python -m gridgnn <same arguments>`` with the torchrun environment (RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR=127.0.0.1, MASTER_PORT a free loopback port), so a worker cannot tell this launcher
from torchrun. Rank 0 writes to this terminal; the other ranks' stderr is kept and shown if they fail. When
any worker fails, the others are stopped (SIGTERM, then SIGKILL) and its exit status is returned.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time

from gridgnn.launch.orphans import LAUNCHER_PID_ENV
from gridgnn.launch.spawn import free_port

EXIT_USAGE = 2
"""A worker's status for bad input (`gridgnn.cli.main.EXIT_USAGE`)."""
EXIT_PEER_FAILED = 3
"""A worker's status when a collective failed or timed out (`gridgnn.cli.main.EXIT_PEER_FAILED`)."""
EXIT_NONFINITE = 4
"""Every worker's status when ``--stop-on-nonfinite`` ended the run (`gridgnn.cli.train_cmd.EXIT_NONFINITE`)."""
EXIT_BROKEN_PIPE = 141
"""Rank 0's status when stdout was closed (`gridgnn.cli.main.EXIT_BROKEN_PIPE`): the run stops quietly."""


def worker_threads(nprocs: int, requested: int | None = None) -> int:
    """Compute threads per worker: ``requested``, else the machine's cores shared evenly (at least 1)."""
    if requested is not None:
        return requested
    return max(1, (os.cpu_count() or 1) // nprocs)


def _worker_env(rank: int, nprocs: int, port: int, threads: int) -> dict[str, str]:
    env = dict(os.environ)
    env.update(RANK=str(rank), WORLD_SIZE=str(nprocs), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(nprocs),
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GRIDGNN_THREADS=str(threads),
               OMP_NUM_THREADS=str(threads), **{LAUNCHER_PID_ENV: str(os.getpid())})
    return env


def launch_local(argv: list[str], nprocs: int, threads: int | None = None,
                 extra_env: dict[str, str] | None = None) -> int:
    """Run ``gridgnn <argv>`` on ``nprocs`` local workers (``extra_env`` added to their environment);
    returns 0 or the first failing worker's status."""
    port, threads = free_port(), worker_threads(nprocs, threads)
    logs = [tempfile.TemporaryFile(mode="w+") for _ in range(nprocs)]
    procs = []
    try:
        for rank in range(nprocs):
            out = None if rank == 0 else subprocess.DEVNULL
            err = None if rank == 0 else logs[rank]
            procs.append(subprocess.Popen([sys.executable, "-m", "gridgnn", *argv], stdout=out, stderr=err,
                                          env={**_worker_env(rank, nprocs, port, threads),
                                               **(extra_env or {})}))
        return _wait(procs, logs)
    finally:
        _stop(procs)
        for log in logs:
            log.close()


def _wait(procs: list[subprocess.Popen], logs) -> int:
    """Wait for all workers; on the first failure, name the worker that failed first and return its status.

    A worker killed by a signal is the cause rather than the peers whose collectives then fail, so it is
    preferred among the failures seen in the same poll.
    """
    while True:
        codes = [p.poll() for p in procs]
        failed = [r for r, c in enumerate(codes) if c not in (None, 0)]
        agreed = {codes[r] for r in failed}
        if len(agreed) == 1 and agreed <= {EXIT_USAGE, EXIT_NONFINITE} and _same_on_rank0(procs[0], *agreed):
            return agreed.pop()  # every rank ends alike (bad input, or --stop-on-nonfinite); rank 0 said why
        if any(codes[r] in (EXIT_BROKEN_PIPE, -signal.SIGPIPE) for r in failed):
            return EXIT_BROKEN_PIPE  # stdout was closed (piped into head): stop the others quietly
        if failed:
            rank = min(failed, key=lambda r: (codes[r] >= 0, r))
            _report(rank, codes[rank], logs[rank])
            if codes[rank] == EXIT_PEER_FAILED:
                _name_silent_workers(procs)
            return codes[rank] if codes[rank] > 0 else 128 - codes[rank]
        if all(c == 0 for c in codes):
            return 0
        time.sleep(0.05)


def _same_on_rank0(rank0: subprocess.Popen, code: int, wait_s: float = 5.0) -> bool:
    """True when rank 0 ends with status ``code`` too (waiting up to ``wait_s`` for it): a bad input (say a
    checkpoint of another model) is found by every rank, and a NaN loss is global, so rank 0's line is the
    one to show."""
    try:
        return rank0.wait(timeout=wait_s) == code
    except subprocess.TimeoutExpired:
        return False


def _name_silent_workers(procs: list[subprocess.Popen], wait_s: float = 1.0) -> None:
    """After a peer timed out: name the workers that never answered (stopped, or still busy elsewhere).

    Healthy peers end with the same timeout within moments, so whoever is still alive after ``wait_s``
    (a stopped process first) is the one the others were waiting for.
    """
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and sum(p.poll() is None for p in procs) > 1:
        time.sleep(0.05)
    alive = [rank for rank, proc in enumerate(procs) if proc.poll() is None]
    stopped = [rank for rank in alive if _process_state(procs[rank].pid) in ("T", "t")]
    for rank in stopped or alive:
        how = "is stopped (SIGSTOP or a debugger)" if rank in stopped else "is still running but not answering"
        print(f"gridgnn: error: worker rank {rank} stopped answering: it {how}", file=sys.stderr)


def _process_state(pid: int) -> str:
    """The one-letter state of ``pid`` from /proc (R, S, T, ...), or '' where /proc is not available."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def _report(rank: int, code: int, log) -> None:
    how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"failed with status {code}"
    print(f"gridgnn: error: worker rank {rank} {how}; stopping the other workers", file=sys.stderr)
    if rank != 0:
        log.seek(0)
        tail = log.read().strip().splitlines()[-20:]
        if tail:
            print("\n".join(tail), file=sys.stderr)


def _stop(procs: list[subprocess.Popen], grace_s: float = 2.0) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    deadline = time.monotonic() + grace_s
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
