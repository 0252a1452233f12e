"""The memory guard: refuse, before any work, a run whose predicted working set does not fit.

The planner's per-rank memory prediction (`gridgnn.cost.memory_model`, the peak of a training step: for
``predict`` an upper bound, as inference keeps no gradients or optimizer state) is compared with what each
process will have: ``memory_per_proc`` when given (``--memory-per-proc``), else on GPU the device's free
memory, on CPU the host's available memory (``MemAvailable``) divided among the processes on this machine. A
run that does not fit fails with one line naming both sizes and the configurations `gridgnn.plan.plan` says
would fit; ``memory_check=False`` (``--no-memory-check``) skips the guard. The prediction counts what every
process holds before any data (Python and torch: `gridgnn.cost.process_baseline`, measured per device kind);
where the available memory is measured inside a process that already holds it, it is added back.
"""

from __future__ import annotations

import dataclasses
import os

import torch

from gridgnn.config import ExecutionOptions, TrainConfig
from gridgnn.cost.epoch_model import predict_run
from gridgnn.cost.process_baseline import process_baseline
from gridgnn.cost.profile import default_profile
from gridgnn.errors import ConfigError
from gridgnn.grid.process_grid import default_device
from gridgnn.grid.shape import GridShape, resolve_grid
from gridgnn.limits import oversized_product
from gridgnn.nn.stack import check_model_size
from gridgnn.plan import plan
from gridgnn.plan.op_templates import spec_for
from gridgnn.plan.planner import _human

MEMINFO = "/proc/meminfo"
LARGER_GRIDS = (2, 4, 8, 16)
"""Multiples of the process count tried for a suggestion when nothing fits on the requested count."""


def host_available_bytes() -> int | None:
    """``MemAvailable`` of /proc/meminfo in bytes (None where there is no such file)."""
    try:
        with open(MEMINFO, encoding="ascii") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def available_per_proc(execution: ExecutionOptions, local_procs: int) -> tuple[int | None, str]:
    """Bytes each of ``local_procs`` processes on this machine may use under ``execution`` (its
    ``memory_per_proc`` when given), and where the figure comes from (None: unknown, no check)."""
    if execution.memory_per_proc is not None:
        return execution.memory_per_proc, "--memory-per-proc"
    device = default_device()  # where the run holds its tensors, one process included
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(int(os.environ.get("LOCAL_RANK", "0")))
        return int(free), "free device memory"
    host = host_available_bytes()
    if host is None:
        return None, "unknown"
    share = f" / {local_procs} processes" if local_procs > 1 else ""
    return host // max(local_procs, 1), f"available host memory{share}"


def predicted_per_proc(config: TrainConfig, stats, world_size: int, shape: GridShape | None = None) -> int:
    """The planner's peak bytes on the busiest rank of ``config``'s grid (``local``: a 1-process 1D grid;
    ``shape``: the grid of a resolved run, else validated here), plus the process baseline of the run's device
    (Python and torch before any data, `gridgnn.cost.process_baseline`)."""
    if config.algo == "local":
        shape = resolve_grid("1d", 1)
    elif shape is None:
        shape = resolve_grid(config.algo, world_size, replication=config.replication, grid=config.grid)
    device = default_device().type  # comm is resolved by now (sparse buffers differ)
    return int(predict_run(spec_for(config, stats), stats, shape, config, device=device).memory_bytes.max()) \
        + process_baseline(device)


def memory_refusal(config: TrainConfig, graph, world_size: int, local_procs: int | None = None,
                   shape: GridShape | None = None, *, started: bool = True) -> str | None:
    """The one-line refusal when the run does not fit, else None. Not collective. ``started``: the processes
    that train run already (this one, torchrun's workers), so the memory measured as available is what is left
    after their baseline; the local launcher, whose workers do not exist yet, passes False."""
    if not config.memory_check:
        return None
    available, source = available_per_proc(config, local_procs or world_size)
    if available is None:
        return None
    baseline = process_baseline(default_device().type)
    if started and source != "--memory-per-proc":
        available += baseline  # measured with this process's own interpreter and torch already resident
    from gridgnn.train.run.auto import graph_stats

    stats = graph_stats(graph)
    where = "one process" if config.algo == "local" else f"--algo {config.algo} on {world_size} processes"
    oversized = oversized_product(stats.num_nodes, stats.nnz, {"--hidden": config.hidden,
                                                               "features": stats.num_features,
                                                               "classes": stats.num_classes})
    if oversized is not None:  # beyond 2^58 elements: no machine holds it, and the estimate would overflow
        return (f"not enough memory: {oversized} is more than 2^58 elements for {where}, beyond any "
                f"machine's memory; lower --hidden (now {config.hidden}) or use a smaller graph")
    needed = predicted_per_proc(config, stats, world_size, shape)
    if needed <= available:
        return None
    counted = f" (with {_human(baseline)} for Python and torch)" if baseline else ""
    return (f"not enough memory: predicted {_human(needed)} per process{counted} for {where}, but {source} is "
            f"{_human(available)}; {_suggest(config, stats, world_size, available)}; or pass "
            "--no-memory-check to run anyway")


def _suggest(config: TrainConfig, stats, world_size: int, available: int) -> str:
    """The configurations `gridgnn plan` says fit, on this process count or the smallest larger one; with
    ``--cache-panels`` or ``--full-feature-rows``, those with them first, then those that fit only without
    them (their flags leave them out)."""
    caching = (True, False) if config.cache_panels else (False,)
    rows = (True, False) if config.full_feature_rows else (False,)
    variants = [(dataclasses.replace(config, full_feature_rows=r), c) for r in rows for c in caching]
    # priced for this machine, as the run itself was (the planner's default profile is a GPU cluster's)
    profile = default_profile(default_device().type)
    for factor in (1, *LARGER_GRIDS):
        procs = world_size * factor
        if procs == 1:
            continue
        fitting = [e for priced, cache in variants
                   for e in plan(priced, stats, procs, profile=profile, memory_per_proc=available,
                                 cache_panels=cache).entries
                   if e.fits][:3]
        if fitting:
            return "configurations that fit (gridgnn plan): " + ", ".join(" ".join(e.train_flags())
                                                                          for e in fitting)
    return f"no configuration fits on up to {world_size * LARGER_GRIDS[-1]} processes (see gridgnn plan)"


def check_memory(config: TrainConfig, graph, world_size: int, local_procs: int | None = None, *,
                 shape: GridShape | None = None, started: bool = True) -> None:
    """Raise `ConfigError` when the run will not fit (see the module docstring): first the model's weight
    matrices alone (`check_model_size`, on every rank alike), then the planner's estimate (on ``shape``, the
    grid of a resolved run, when given). In a launched worker of a process group, rank 0's verdict is shared
    so all ranks stop together (collective on the world). Workers started by ``gridgnn train --nprocs`` do
    not call it: the launcher checked."""
    import torch.distributed as dist

    if not config.memory_check:
        return
    check_model_size(graph.num_features, config.hidden, graph.num_classes, config.layers)  # alike on every rank
    local = local_procs or int(os.environ.get("LOCAL_WORLD_SIZE", world_size))
    grouped = dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
    mine = not grouped or dist.get_rank() == 0
    refusal = memory_refusal(config, graph, world_size, local, shape, started=started) if mine else None
    if grouped:
        shared = [refusal]
        dist.broadcast_object_list(shared, src=0)
        refusal = shared[0]
    if refusal is not None:
        raise ConfigError(refusal)
