"""Worker-side code of the sparse-communication tests (imported by forked processes)."""

from __future__ import annotations

import spmm_workers as w
import torch

from gridgnn.config import TrainConfig
from gridgnn.grid.comm import Communicator
from gridgnn.grid.process_grid import ProcessGrid
from gridgnn.grid.shape import resolve_grid
from gridgnn.spmm.registry import build_spmm
from gridgnn.train.run.grid_train import train_on_grid
from gridgnn.train.run.resolve import resolve_run
from gridgnn.train.run.training import load_graph


def spmm_case(algo: str, replication: int | None, grid_text: str | None, n: int, seed: int,
              overlap: bool) -> list[dict]:
    """Sparse forward + backward at every width on this rank: blocks, ranges, records."""
    adj = w.random_directed(n, seed=seed)
    shape = resolve_grid(algo, torch.distributed.get_world_size(), replication=replication, grid=grid_text)
    grid = ProcessGrid.create(shape, w.test_device())
    comm = Communicator(grid, overlap=overlap)
    op = build_spmm(grid, comm, adj, comm_mode="sparse")
    setup = comm.reset()
    out = every_width(op, comm, n, seed)
    for res in out:
        res.update(stored_nnz=op.stored_nnz, setup_ops=sorted({(r.op, r.phase) for r in setup}))
    return out


def every_width(op, comm: Communicator, n: int, seed: int) -> list[dict]:
    """Forward and backward of ``op`` at every test width: this rank's blocks, ranges and records."""
    out = []
    for width in w.WIDTHS:
        x_global, g_global = w.dense_inputs(n, width, seed)
        x = op.local_slice(x_global).to(op.grid.device).requires_grad_(True)
        y = op(x)
        forward = comm.reset()
        y.backward(op.local_slice(g_global).to(op.grid.device))
        backward = comm.reset()
        out.append({"width": width, "rows": op.row_range, "cols": op.col_range(width),
                    "y": y.detach().cpu().numpy(), "grad": x.grad.cpu().numpy(),
                    "forward": [(r.op, r.axis, r.bytes) for r in forward],
                    "backward": [(r.op, r.axis, r.bytes) for r in backward], "own_plan": w.own_plan(op, width)})
    return out


def train_cases(rank: int, cases: list[dict]) -> list[dict]:
    """Every training case on the grid; rank 0 returns losses, accuracies, communication and set-up."""
    trains = []
    for kwargs in cases:
        config = TrainConfig(**kwargs)
        config, shape, graph = resolve_run(config, load_graph(config), torch.distributed.get_world_size())
        trained = train_on_grid(config, graph, shape=shape)
        if rank == 0:
            trains.append({"loss": [r.loss for r in trained.result.epochs],
                           "acc": [(r.train_acc, r.val_acc, r.test_acc) for r in trained.result.epochs],
                           "comm": trained.comm, "setup": trained.spmm_setup})
    return trains


def run_all(rank: int, world_size: int, spmm_cases: list[tuple], trainings: list[dict], n: int,
            seed: int) -> dict:
    """Every SpMM case (with and without overlap), then every training case; one process group for all."""
    spmm = [(spmm_case(*case, n, seed, overlap=False), spmm_case(*case, n, seed, overlap=True))
            for case in spmm_cases]
    return {"spmm": spmm, "train": train_cases(rank, trainings)}


def run_uneven_training(rank: int, world_size: int, cases: list[dict], bounds: dict[int, list[int]]) -> list[dict]:
    """Each training case on a randomly renumbered graph whose row blocks follow ``bounds[row blocks]`` (an
    uneven vertex partition, as METIS leaves it); rank 0 returns losses, accuracies, communication, set-up."""
    from gridgnn.data.reorder import reorder_graph

    out = []
    for kwargs in cases:
        config = TrainConfig(**kwargs)
        graph = reorder_graph(load_graph(config), "random", 1, seed=9)
        shape = resolve_grid(config.algo, world_size, replication=config.replication, grid=config.grid)
        graph.meta["reorder_bounds"] = bounds[shape.sizes[0]]
        trained = train_on_grid(config, graph, shape=shape)
        if rank == 0:
            out.append({"loss": [r.loss for r in trained.result.epochs],
                        "acc": [(r.train_acc, r.val_acc, r.test_acc) for r in trained.result.epochs],
                        "comm": trained.comm, "row_blocks": trained.reorder["row_blocks"]})
    return out


def run_trainings(rank: int, world_size: int, cases: list[dict]) -> list[dict]:
    """`train_cases` in a worker of `gridgnn.launch.spawn.run_workers`."""
    return train_cases(rank, cases)


def train_with_weights(rank: int, world_size: int, cases: list[dict]) -> list[dict]:
    """Every training case; every rank returns its losses, accuracies, communication (rank 0), and its
    trained and best weights (numpy arrays: tensors would travel back as shared memory)."""
    out = []
    for kwargs in cases:
        config = TrainConfig(**kwargs)
        config, shape, graph = resolve_run(config, load_graph(config), world_size)
        trained, model = train_on_grid(config, graph, return_model=True, shape=shape)
        out.append({"loss": [r.loss for r in trained.result.epochs],
                    "acc": [(r.train_acc, r.val_acc, r.test_acc) for r in trained.result.epochs],
                    "comm": trained.comm, "setup": trained.spmm_setup, "best_epoch": trained.result.best_epoch,
                    "final": {k: v.detach().numpy().copy() for k, v in model.state_dict().items()},
                    "best": {k: v.numpy().copy() for k, v in (trained.result.best_state or {}).items()}})
    return out
