"""Joining the process group a launcher describes, and this process's age.

torchrun and `gridgnn train --nprocs P` (`gridgnn.launch.local`) both describe the group the torchrun way:
RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT. `init_from_env` is collective on the world;
the rest is not collective.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from gridgnn.c_output import c_output_captured
from gridgnn.errors import ConfigError
from gridgnn.grid.network import port_taken_error, prepare_worker_network
from gridgnn.grid.process_grid import backend_for, default_device

_IMPORTED_AT = time.monotonic()


def init_from_env(timeout_s: float, interface: str | None = None, threads: int | None = None) -> tuple[int, int]:
    """Join the process group described by the torchrun environment; returns (rank, world size).

    ``interface``: the network interface gloo uses (`gridgnn.grid.network.choose_interface`); ``threads``:
    this process's compute threads (None: the machine's cores shared among its local workers)."""
    if not dist.is_initialized():
        prepare_worker_network(timeout_s, interface)  # gloo's interface; a rendezvous that answers
        backend, timeout = backend_for(default_device()), timedelta(seconds=timeout_s)
        try:
            with c_output_captured():  # c10d's own [E ...]/[W ...] lines while it retries: the error says it all
                store = _restart_safe_agent_store(timeout)
                if store is None:
                    dist.init_process_group(backend, init_method="env://", timeout=timeout)
                else:
                    dist.init_process_group(backend, store=store, rank=int(os.environ["RANK"]),
                                            world_size=int(os.environ["WORLD_SIZE"]), timeout=timeout)
        except RuntimeError as error:  # DistNetworkError included
            raise (port_taken_error(error) or error) from None
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    # torchrun leaves OMP_NUM_THREADS=1; share the machine's cores among its local workers instead.
    torch.set_num_threads(threads or max(1, (os.cpu_count() or 1) // local_world))
    return dist.get_rank(), dist.get_world_size()


def _restart_safe_agent_store(timeout: timedelta) -> dist.Store | None:
    """Under torchrun's agent store, a client of it whose keys are private to this restart attempt.

    torchrun keeps one store across ``--max-restarts`` attempts, and the process group's keys of a failed
    attempt (the dead workers' addresses) are still in it: a restarted worker may read them and fail to
    connect (seen with torch 2.13, gloo). A prefix per attempt keeps every attempt to its own keys.
    None outside torchrun's agent store (then ``env://`` is used as is).
    """
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return None
    client = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                           int(os.environ["WORLD_SIZE"]), is_master=False, timeout=timeout)
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return dist.PrefixStore(f"gridgnn/attempt_{attempt}/", client)


def in_launched_worker() -> bool:
    """True inside a worker started by torchrun or `gridgnn train --nprocs` (they set WORLD_SIZE); a
    launcher's environment that is set by hand and incomplete or wrong is refused (`check_launch_environment`)."""
    if "WORLD_SIZE" in os.environ or "RANK" in os.environ:
        check_launch_environment(os.environ)
        return True
    return False


MAX_WORLD_SIZE = 1 << 24
"""The largest WORLD_SIZE taken from the environment (far beyond any job; a guard against nonsense)."""
_FIX = "start workers with torchrun or gridgnn train --nprocs, or unset RANK and WORLD_SIZE to train on one process"


def check_launch_environment(environ) -> None:
    """Refuse (`ConfigError`, one line) a torchrun environment that cannot describe a process group, before
    torch.distributed reads it (its errors are C++ frames or a wait for ranks that never come): RANK and
    WORLD_SIZE both set, whole numbers with 0 <= RANK < WORLD_SIZE <= `MAX_WORLD_SIZE`; LOCAL_RANK and
    LOCAL_WORLD_SIZE likewise when set; MASTER_ADDR set and MASTER_PORT a port in 1..65535."""
    def number(name: str, low: int, high: int) -> int:
        text = environ.get(name)
        if text is None:
            raise ConfigError(f"the torchrun environment sets {'RANK' if name == 'WORLD_SIZE' else 'WORLD_SIZE'} "
                              f"but not {name}: {_FIX}")
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise ConfigError(f"the torchrun environment has {name}={text!r}, not a whole number in "
                              f"[{low}, {high}]: {_FIX}")
        return value

    world = number("WORLD_SIZE", 1, MAX_WORLD_SIZE)
    number("RANK", 0, world - 1)
    if "LOCAL_WORLD_SIZE" in environ or "LOCAL_RANK" in environ:
        local_world = number("LOCAL_WORLD_SIZE", 1, world) if "LOCAL_WORLD_SIZE" in environ else world
        if "LOCAL_RANK" in environ:
            number("LOCAL_RANK", 0, local_world - 1)
    if not environ.get("MASTER_ADDR"):
        raise ConfigError(f"the torchrun environment sets RANK and WORLD_SIZE but not MASTER_ADDR: {_FIX}")
    number("MASTER_PORT", 1, 65535)


def process_age_s() -> float:
    """Seconds since this process started (from /proc; the time since this module was imported elsewhere)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            start_ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", encoding="ascii") as uptime:
            return float(uptime.read().split()[0]) - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return time.monotonic() - _IMPORTED_AT
