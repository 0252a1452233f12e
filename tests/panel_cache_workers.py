"""Worker-side code of the ``--cache-panels`` tests (imported by forked processes)."""

from __future__ import annotations

import spmm_workers as w
import torch

from gridgnn.config import TrainConfig
from gridgnn.grid.comm import Communicator
from gridgnn.grid.process_grid import ProcessGrid
from gridgnn.grid.shape import resolve_grid
from gridgnn.spmm.registry import build_spmm
from gridgnn.train.grid_train import train_on_grid
from gridgnn.train.run import load_graph


def spmm_case(algo: str, grid_text: str, comm_mode: str, n: int, seed: int, overlap: bool) -> dict:
    """Forward and backward of a cached-panel SpMM at every width on this rank: blocks and records."""
    adj = w.random_directed(n, seed=seed)
    shape = resolve_grid(algo, torch.distributed.get_world_size(), grid=grid_text)
    grid = ProcessGrid.create(shape, w.test_device())
    comm = Communicator(grid, overlap=overlap)
    op = build_spmm(grid, comm, adj, comm_mode=comm_mode, cache_panels=(False, True))
    setup = comm.reset()
    widths = []
    for width in w.WIDTHS:
        x_global, g_global = w.dense_inputs(n, width, seed)
        x = op.local_slice(x_global).to(grid.device).requires_grad_(True)
        y = op(x)
        forward = comm.reset()
        y.backward(op.local_slice(g_global).to(grid.device))
        backward = comm.reset()
        widths.append({"width": width, "rows": op.row_range, "cols": op.col_range(width),
                       "y": y.detach().cpu().numpy(), "grad": x.grad.cpu().numpy(),
                       "forward": [(r.op, r.axis, r.bytes) for r in forward],
                       "backward": [(r.op, r.axis, r.bytes) for r in backward]})
    return {"widths": widths, "setup": [(r.op, r.axis, r.phase, r.bytes) for r in setup]}


def run_all(rank: int, world_size: int, spmm_cases: list[tuple], train_cases: list[dict], n: int,
            seed: int) -> dict:
    """Every SpMM case (with and without overlap), then every training case; one process group for all."""
    spmm = [(spmm_case(*case, n, seed, overlap=False), spmm_case(*case, n, seed, overlap=True))
            for case in spmm_cases]
    trains = []
    for kwargs in train_cases:
        config = TrainConfig(**kwargs)
        trained = train_on_grid(config, load_graph(config))
        if rank == 0:
            trains.append({"loss": [r.loss for r in trained.result.epochs],
                           "acc": [(r.train_acc, r.val_acc, r.test_acc) for r in trained.result.epochs],
                           "comm": trained.comm, "setup": trained.spmm_setup})
    return {"spmm": spmm, "train": trains}
