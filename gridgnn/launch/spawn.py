"""Run a function on P local worker processes joined in one process group.

Used by the distributed tests (and the local launcher): picks a free loopback port, starts P spawned
processes, gives each ``threads`` compute threads, returns every rank's result in rank order, and on any
failure kills the rest and raises `WorkerError` carrying the failing rank's traceback. Nothing is left running.
"""

from __future__ import annotations

import os
import queue
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from datetime import timedelta

import torch.multiprocessing as mp

from gridgnn.launch.orphans import set_parent_death_signal


class WorkerError(RuntimeError):
    """A worker failed, died or timed out; the message names the rank and holds its traceback."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _worker(fn: Callable, rank: int, world_size: int, port: int, backend: str, threads: int,
            timeout_s: float, results, args: tuple) -> None:
    import torch
    import torch.distributed as dist

    set_parent_death_signal(signal.SIGKILL)  # a killed test run leaves no worker behind
    torch.set_num_threads(threads)
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    try:
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world_size, timeout=timedelta(seconds=timeout_s))
        value = fn(rank, world_size, *args)
        results.put((rank, True, value))
    except BaseException:  # noqa: BLE001 - every failure must reach the parent
        results.put((rank, False, traceback.format_exc()))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def run_workers(fn: Callable, world_size: int, *args, timeout_s: float = 120.0, threads: int = 1,
                backend: str = "gloo", start_method: str | None = None) -> list:
    """``[fn(rank, world_size, *args) for rank in range(world_size)]``, each in its own process.

    ``fn`` must be importable (a module-level function); results must be picklable. The start method is
    ``fork`` on Linux for CPU runs (a worker then skips the seconds-long import of torch, as PyTorch's own
    distributed tests do) and ``spawn`` elsewhere or for CUDA, which cannot be forked.
    """
    if start_method is None:
        start_method = "fork" if sys.platform == "linux" and backend == "gloo" else "spawn"
    ctx = mp.get_context(start_method)
    results = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_worker, daemon=True,
                         args=(fn, rank, world_size, port, backend, threads, timeout_s, results, args))
             for rank in range(world_size)]
    for proc in procs:
        proc.start()
    try:
        return _collect(procs, results, world_size, time.monotonic() + timeout_s)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
            proc.join(timeout=10)


def _collect(procs, results, world_size: int, deadline: float) -> list:
    values: dict[int, object] = {}
    while len(values) < world_size:
        try:
            rank, ok, value = results.get(timeout=0.2)
        except queue.Empty:
            dead = [r for r, p in enumerate(procs) if r not in values and p.exitcode not in (None, 0)]
            if dead:
                raise WorkerError(f"rank {dead[0]} died with exit code {procs[dead[0]].exitcode}") from None
            if time.monotonic() > deadline:
                missing = [r for r in range(world_size) if r not in values]
                raise WorkerError(f"timed out waiting for ranks {missing}") from None
            continue
        if not ok:
            raise WorkerError(f"rank {rank} failed:\n{value}")
        values[rank] = value
    return [values[r] for r in range(world_size)]
