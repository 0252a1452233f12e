"""Worker-side code of the cost-model tests (imported by forked processes).

Each worker builds the grid, `GridOps` and `DistributedTrainer` itself and runs training steps directly, so
the tests depend only on what a step records (`DistributedTrainer.epoch_comm`), not on the run driver.
"""

from __future__ import annotations

import ctypes
import gc

import torch
import torch.distributed as dist

from gridgnn.config import TrainConfig
from gridgnn.data.edge_features import operator_rows
from gridgnn.data.operators import operator_matrix
from gridgnn.grid.comm import Communicator
from gridgnn.grid.process_grid import ProcessGrid
from gridgnn.nn import GCN, operator_of
from gridgnn.nn.models import reads_edges
from gridgnn.parallel.grid_ops import GridOps
from gridgnn.train.loop.distributed import DistributedTrainer
from gridgnn.train.run.resolve import grid_shape_for
from gridgnn.train.run.training import load_graph


def step_comm_worker(rank: int, world_size: int, config_kwargs: dict, steps: int = 2) -> list[dict]:
    """This rank's ``epoch_comm`` records after ``steps`` training steps (each followed by evaluation)."""
    config = TrainConfig(**config_kwargs)
    graph = load_graph(config)
    grid = ProcessGrid.create(grid_shape_for(config, world_size))
    operator = operator_of(config.model)
    ops = GridOps(grid, Communicator(grid), operator_matrix(operator, graph.adj), operator=operator)
    trainer = DistributedTrainer(config, graph, ops)
    for epoch in range(1, steps + 1):
        trainer.train_step(epoch)
        trainer.evaluate()
    return trainer.epoch_comm


def _status_kib(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak() -> None:
    """Reset VmHWM (Linux >= 4.0: writing 5 to clear_refs)."""
    with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
        refs.write("5")


def _libc_release_freed_memory() -> None:
    """Make freed memory leave the resident set: every allocation of 64 KiB or more gets its own mapping
    (glibc otherwise raises that threshold after frees and keeps freed blocks in its heap), then trim."""
    libc = ctypes.CDLL("libc.so.6")
    libc.mallopt(-3, 64 * 1024)  # M_MMAP_THRESHOLD; setting it also turns off the dynamic threshold
    gc.collect()
    libc.malloc_trim(0)


def _warm_up_libraries() -> None:
    """Load the code a training step uses (Adam pulls in ~24 MB of modules on first use), so the
    baseline holds the libraries and the difference holds data only."""
    model = GCN(4, 4, 2)
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.randn(3, 4), lambda x: x).sum().backward()
    optimizer.step()


def memory_worker(rank: int, world_size: int, config_kwargs: dict, graph, steps: int = 2) -> dict:
    """Measured working set of this rank: the peak resident set during ``steps`` training steps after a
    warm-up step, minus the resident set before the grid's data structures were built (the global graph
    and Â, which every worker holds while loading, are in the baseline). Bytes."""
    _warm_up_libraries()
    _libc_release_freed_memory()
    config = TrainConfig(**config_kwargs)
    operator = operator_of(config.model)
    adj = operator_matrix(operator, graph.adj)
    grid = ProcessGrid.create(grid_shape_for(config, world_size))
    dist.barrier()
    _libc_release_freed_memory()
    baseline = _status_kib("VmRSS")
    comm_mode = config.comm if config.comm in ("sparse", "cover") else "dense"
    ops = GridOps(grid, Communicator(grid, precision=config.comm_precision, seed=config.seed), adj, operator=operator,
                  comm_mode=comm_mode,
                  parts=graph.meta.get("reorder_bounds"), messages=reads_edges(config),
                  edge_attr=operator_rows(graph.adj, graph.edge_attr, adj))
    trainer = DistributedTrainer(config, graph, ops)
    _libc_release_freed_memory()
    after_build = _status_kib("VmRSS")
    trainer.train_step(1)  # warm-up: first-use allocations of the kernels and the process groups
    _libc_release_freed_memory()
    _reset_peak()
    for epoch in range(2, steps + 2):
        trainer.train_step(epoch)
    peak = _status_kib("VmHWM")
    return {"baseline": baseline * 1024, "built": (after_build - baseline) * 1024,
            "peak": (peak - baseline) * 1024}
