"""Worker-side code of the ``--reorder double-random`` tests (imported by forked processes)."""

from __future__ import annotations

import spmm_workers as w
import torch

from gridgnn.config import TrainConfig
from gridgnn.data.prepared import is_prepared, open_prepared
from gridgnn.grid.comm import Communicator
from gridgnn.grid.process_grid import ProcessGrid
from gridgnn.grid.shape import resolve_grid
from gridgnn.spmm.registry import build_spmm
from gridgnn.train.run.grid_train import train_on_grid
from gridgnn.train.run.resolve import resolve_run
from gridgnn.train.run.training import load_graph


def spmm_case(algo: str, grid_text: str, n: int, seed: int, column_seed: int) -> list[dict]:
    """Forward + backward of the column-ordered SpMM at every test width on this rank: its blocks, ranges and
    every record (op, axis, bytes, phase)."""
    adj = w.random_directed(n, seed=seed)
    shape = resolve_grid(algo, torch.distributed.get_world_size(), grid=grid_text)
    grid = ProcessGrid.create(shape, w.test_device())
    comm = Communicator(grid)
    op = build_spmm(grid, comm, adj, column_seed=column_seed)
    comm.reset()
    out = []
    for width in w.WIDTHS:
        x_global, g_global = w.dense_inputs(n, width, seed)
        x = op.local_slice(x_global).to(grid.device).requires_grad_(True)
        y = op(x)
        forward = comm.reset()
        y.backward(op.local_slice(g_global).to(grid.device))
        backward = comm.reset()
        out.append({"width": width, "rows": op.row_range, "cols": op.col_range(width),
                    "y": y.detach().cpu().numpy(), "grad": x.grad.cpu().numpy(),
                    "records": [(r.op, r.axis, r.bytes, r.phase) for r in forward + backward],
                    "own_plan": w.own_plan(op, width)})
    return out


def run_all(rank: int, world_size: int, spmm_cases: list[tuple], trainings: list[dict], n: int,
            seed: int) -> dict:
    """Every SpMM case, then every training case (rank 0 returns the trainings' losses, accuracies and
    communication)."""
    spmm = [spmm_case(algo, grid_text, n, seed, column_seed) for algo, grid_text, column_seed in spmm_cases]
    trains = []
    for kwargs in trainings:
        config = TrainConfig(**kwargs)
        source = open_prepared(config.dataset) if is_prepared(config.dataset) else load_graph(config)
        config, shape, graph = resolve_run(config, source, world_size)
        trained = train_on_grid(config, graph, shape=shape)
        if rank == 0:
            trains.append({"loss": [r.loss for r in trained.result.epochs],
                           "acc": [(r.train_acc, r.val_acc, r.test_acc) for r in trained.result.epochs],
                           "comm": trained.comm, "reorder": config.reorder, "algo": config.algo,
                           "grid": shape.label(), "comm_mode": config.comm})
    return {"spmm": spmm, "train": trains}
