"""The processes a run takes, settled before it starts: the default ``--algo`` for the world it finds, the
refusal of a grid algorithm on one process, whether this process starts local workers or trains itself, and
this process's compute threads. Not collective.

The world is ``--nprocs P`` for a run started by hand, or the WORLD_SIZE torchrun (or the local launcher)
gave a worker (`gridgnn.train.run.process_group.in_launched_worker`).
"""

from __future__ import annotations

import os

from gridgnn.config import TrainConfig
from gridgnn.errors import ConfigError
from gridgnn.train.run.process_group import in_launched_worker
from gridgnn.train.run.resolve import grid_shape_for

GRID_ALGOS = ("1d", "1.5d", "2d", "3d")
"""The algorithms that run on a process grid (``--nprocs P`` or torchrun)."""


def settle_algo(algo: str | None, nprocs: int) -> str:
    """The algorithm of a run asked for ``algo`` (None: not given) with ``--nprocs nprocs``.

    Not given: ``local`` on one process, ``auto`` on several (``nprocs > 1``, or a world of P > 1 launched by
    torchrun); the planner's first line then says what ``auto`` chose and why
    (`gridgnn.train.run.resolve.resolve_auto`). ``local`` on several processes is refused (`ConfigError`): it
    would train P independent copies.
    """
    launched = in_launched_worker()
    world = int(os.environ["WORLD_SIZE"]) if launched else nprocs
    if algo is None:
        return "auto" if world > 1 else "local"
    if algo == "local" and world > 1:
        where = f"--nprocs {nprocs} asks for {world}" if not launched else f"torchrun started {world}"
        fix = "drop --nprocs" if not launched else "run it without torchrun"
        raise ConfigError(f"--algo local trains on one process, but {where}: {fix}, or choose a grid with "
                          "--algo auto|1d|1.5d|2d|3d")
    return algo


def check_process_count(config: TrainConfig) -> None:
    """A grid algorithm on one process (no ``--nprocs``, no torchrun) is refused with the fix (`ConfigError`);
    a ``--grid`` that needs more processes is named first."""
    if config.algo in GRID_ALGOS and config.nprocs == 1 and not in_launched_worker():
        grid_shape_for(config, 1)
        raise ConfigError(f"--algo {config.algo} runs on a process grid and needs several processes: add "
                          "--nprocs P (P > 1) or run under torchrun, or use --algo local")


def trains_alone(config: TrainConfig) -> bool:
    """True for a run in this one process and no other: ``local`` or ``auto`` on ``--nprocs 1``, not a worker
    that a launcher started (the run where flags of a grid have nothing to act on)."""
    return config.algo in ("local", "auto") and config.nprocs == 1 and not in_launched_worker()


def launches_workers(config: TrainConfig) -> bool:
    """True when this process starts ``config.nprocs`` local workers (`gridgnn.launch.workers`) instead of
    training itself: a grid algorithm (or ``auto``) on ``--nprocs P > 1``, outside a launched worker."""
    return config.algo != "local" and config.nprocs > 1 and not in_launched_worker()


def is_rank0() -> bool:
    """True in the process that prints a run's lines: rank 0 of a launched world, or a process alone."""
    return int(os.environ.get("RANK", "0")) == 0


def use_threads(threads: int | None) -> None:
    """Honour ``--threads`` in this process, whatever the algorithm: set torch's thread count (a worker
    under torchrun also hands it to `init_from_env` in its `ProcessOptions`; the local launcher writes it
    into the run spec of its workers). None: torch's own count stays."""
    if threads is None:
        return
    import torch

    torch.set_num_threads(threads)
