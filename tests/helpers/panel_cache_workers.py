"""Worker-side code of the ``--cache-panels`` tests (imported by forked processes)."""

from __future__ import annotations

import spmm_workers as w
import torch
from sparse_workers import every_width, train_cases

from gridgnn.grid.comm import Communicator
from gridgnn.grid.process_grid import ProcessGrid
from gridgnn.grid.shape import resolve_grid
from gridgnn.spmm.registry import build_spmm


def spmm_case(algo: str, grid_text: str, comm_mode: str, n: int, seed: int, overlap: bool) -> dict:
    """Forward and backward of a cached-panel SpMM at every width on this rank, and its set-up's records."""
    adj = w.random_directed(n, seed=seed)
    shape = resolve_grid(algo, torch.distributed.get_world_size(), grid=grid_text)
    grid = ProcessGrid.create(shape, w.test_device())
    comm = Communicator(grid, overlap=overlap)
    op = build_spmm(grid, comm, adj, comm_mode=comm_mode, cache_panels=(False, True))
    setup = comm.reset()
    return {"widths": every_width(op, comm, n, seed), "setup": [(r.op, r.axis, r.phase, r.bytes) for r in setup]}


def run_all(rank: int, world_size: int, spmm_cases: list[tuple], cases: list[dict], n: int, seed: int) -> dict:
    """Every SpMM case (with and without overlap), then every training case; one process group for all."""
    spmm = [(spmm_case(*case, n, seed, overlap=False), spmm_case(*case, n, seed, overlap=True))
            for case in spmm_cases]
    return {"spmm": spmm, "train": train_cases(rank, cases)}
