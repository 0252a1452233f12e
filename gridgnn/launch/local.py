"""`gridgnn train --nprocs P`: start P local workers, stream rank 0, fail fast, reap everything.

Each worker is `gridgnn.cli.worker` run by this Python on the run spec the launcher resolved and wrote
(its only argument; `gridgnn.run_spec`), importing the very package this launcher runs (`worker_command`:
never a ``gridgnn`` folder that happens to sit in the current folder), with the torchrun environment (RANK,
WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT a free loopback port) and
OMP_NUM_THREADS, and no other variable of ours: everything else it needs is in the spec. Rank 0 writes to
this terminal; the other ranks' stderr is kept and shown if they fail. When any worker fails, the others
are stopped (SIGTERM, then SIGKILL), one line names the worker at the cause (the workers themselves stay
quiet about lost peers, `gridgnn.peer_errors`), and its exit status is returned. A closed stdout
(``| head``) ends the run quietly with 141, whichever process notices it first: rank 0 when its next line
fails, or the launcher, which watches its stdout while it waits (a run that prints, i.e. not ``--quiet``).
"""

from __future__ import annotations

import os
import select
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gridgnn
from gridgnn.launch.spawn import free_port
from gridgnn.peer_errors import PEER_STOPPED

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
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS=str(threads))
    return env


def worker_command(spec_path: str) -> list[str]:
    """``python -c ...`` running the worker of the run spec at ``spec_path`` (`gridgnn.cli.worker`) from the
    folder that holds this launcher's package.

    ``python -m gridgnn`` would put the current folder first on ``sys.path``: run from a folder holding a
    clone of the repository (a ``gridgnn`` folder), a worker would import that instead of this package.
    """
    root = str(Path(gridgnn.__file__).resolve().parent.parent)
    code = "import sys; sys.path[0] = sys.argv.pop(1); from gridgnn.cli.worker import run; run()"
    return [sys.executable, "-c", code, root, spec_path]


def stdout_closed(fd: int = 1) -> bool:
    """True when ``fd`` (stdout) is a pipe or socket whose reading end is gone (``| head -n 1`` has exited):
    poll reports an error on it. False for files, terminals, or where poll is not available."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)) or not hasattr(select, "poll"):
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def launch_local(spec_path: str, nprocs: int, threads: int | None = None, *, watch_stdout: bool = False) -> int:
    """Run the worker of the run spec at ``spec_path`` on ``nprocs`` local workers of ``threads`` compute
    threads (`worker_threads`); returns 0 or the first failing worker's status. With ``watch_stdout`` (a run
    that prints) a closed stdout stops the workers and returns 141 at once, as rank 0 would on its next
    line."""
    port, threads = free_port(), worker_threads(nprocs, threads)
    logs = [tempfile.TemporaryFile(mode="w+") for _ in range(nprocs)]
    procs = []
    try:
        for rank in range(nprocs):
            out = None if rank == 0 else subprocess.DEVNULL
            err = None if rank == 0 else logs[rank]
            procs.append(subprocess.Popen(worker_command(spec_path), stdout=out, stderr=err,
                                          env=_worker_env(rank, nprocs, port, threads)))
        return _wait(procs, logs, watch_stdout)
    finally:
        _stop(procs)
        for log in logs:
            log.close()


def _wait(procs: list[subprocess.Popen], logs, watch_stdout: bool = False) -> int:
    """Wait for all workers; on the first failure, name the worker that failed first and return its status.

    A worker killed by a signal is the cause rather than the peers whose collectives then fail, so it is
    preferred among the failures seen in the same poll. A closed stdout (rank 0's 141, or seen here with
    ``watch_stdout``) ends the run quietly, even when rank 0's peers are seen failing first.
    """
    waited_for_rank0 = False
    while True:
        codes = [p.poll() for p in procs]
        failed = [r for r, c in enumerate(codes) if c not in (None, 0)]
        agreed = {codes[r] for r in failed}
        if all(c == 0 for c in codes):
            return 0
        if len(agreed) == 1 and agreed <= {EXIT_USAGE, EXIT_NONFINITE} and _same_on_rank0(procs[0], *agreed):
            return agreed.pop()  # every rank ends alike (bad input, or --stop-on-nonfinite); rank 0 said why
        if _broken_pipe(codes, failed) or (watch_stdout and stdout_closed()):
            return EXIT_BROKEN_PIPE  # stdout was closed (piped into head): stop the others quietly
        if not waited_for_rank0 and _rank0_may_be_at_cause(procs, codes, failed):
            waited_for_rank0 = True
            continue  # look again with rank 0's status
        if failed:  # the cause first: a signal, then a failure of its own, then a lost peer
            rank = min(failed, key=lambda r: (codes[r] >= 0, codes[r] == EXIT_PEER_FAILED, r))
            silent = _silent_workers(procs) if codes[rank] == EXIT_PEER_FAILED else []
            _report(rank, codes[rank], logs[rank], silent)
            return codes[rank] if codes[rank] > 0 else 128 - codes[rank]
        time.sleep(0.05)


def _broken_pipe(codes: list[int | None], failed: list[int]) -> bool:
    """True when a worker ended because stdout was closed (141, or killed by SIGPIPE)."""
    return any(codes[r] in (EXIT_BROKEN_PIPE, -signal.SIGPIPE) for r in failed)


def _rank0_may_be_at_cause(procs: list[subprocess.Popen], codes: list[int | None], failed: list[int],
                           wait_s: float = 1.0) -> bool:
    """When only lost peers (status 3) are seen and rank 0 still runs, wait up to ``wait_s`` for rank 0 and
    return True: its peers lose it the moment it exits (say on a closed stdout) and may be reaped first."""
    if not failed or codes[0] is not None or any(codes[r] != EXIT_PEER_FAILED for r in failed):
        return False
    try:
        procs[0].wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        pass
    return True


def _same_on_rank0(rank0: subprocess.Popen, code: int, wait_s: float = 5.0) -> bool:
    """True when rank 0 ends with status ``code`` too (waiting up to ``wait_s`` for it): a bad input (say a
    checkpoint of another model) is found by every rank, and a NaN loss is global, so rank 0's line is the
    one to show."""
    try:
        return rank0.wait(timeout=wait_s) == code
    except subprocess.TimeoutExpired:
        return False


def _silent_workers(procs: list[subprocess.Popen], wait_s: float = 1.0) -> list[tuple[int, str]]:
    """After a peer timed out: the workers that never answered (stopped, or still busy elsewhere), with how.

    Healthy peers end with the same timeout within moments, so whoever is still alive after ``wait_s``
    (a stopped process first) is the one the others were waiting for.
    """
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and sum(p.poll() is None for p in procs) > 1:
        time.sleep(0.05)
    alive = [rank for rank, proc in enumerate(procs) if proc.poll() is None]
    stopped = [rank for rank in alive if _process_state(procs[rank].pid) in ("T", "t")]
    return [(rank, "it is stopped (SIGSTOP or a debugger)" if rank in stopped
             else "it is still running but not answering") for rank in stopped or alive]


def _process_state(pid: int) -> str:
    """The one-letter state of ``pid`` from /proc (R, S, T, ...), or '' where /proc is not available."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def _report(rank: int, code: int, log, silent: list[tuple[int, str]]) -> None:
    """One line for the run: the worker at the cause and what happened to it (plus, for a worker that failed
    on its own, the tail of its stderr)."""
    if silent:
        named = "; ".join(f"worker rank {r} stopped answering: {how}" for r, how in silent)
        print(f"gridgnn: error: {named}; the others' collectives did not answer in time (--timeout); stopping "
              "the other workers", file=sys.stderr)
        return
    if code < 0:
        how = f"was killed by {signal.Signals(-code).name}"
    elif code == EXIT_PEER_FAILED:
        how = f"lost contact with another worker (a collective failed: {PEER_STOPPED})"
    else:
        how = f"failed with status {code}"
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
