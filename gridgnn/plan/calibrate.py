"""Measure a machine profile on the spot: collectives on P local workers, and the local kernels.

Collectives run through `gridgnn.grid.comm.Communicator` on a 1D grid of P processes (axis ``row``), so
bytes follow the byte convention the cost model uses; for each operation and payload the slowest rank's
median time over repetitions is fitted by least squares to ``α · ⌈log2 P⌉ + β · bytes`` (α, β ≥ 0).
Kernels run in this process with the threads one of P workers would get: a CSR sparse-dense product
(``sparse_flops``), a dense product (``dense_flops``) and layout-invariant dropout plus ReLU
(``elementwise_per_s``).
"""

from __future__ import annotations

import math
import os
import statistics
import time

import numpy as np
from scipy.optimize import nnls

from gridgnn.cost.profile import OPS, LinkCost, MachineProfile

PAYLOADS = (1 << 12, 1 << 16, 1 << 20, 1 << 22)
"""Payload sizes in bytes (the tensor each rank passes to the collective)."""


def _time_op(comm, op: str, nbytes: int, repeats: int) -> list[tuple[int, float]]:
    import torch
    import torch.distributed as dist

    p = comm.grid.size("row")
    rows = max(p, nbytes // (4 * 64)) // p * p
    out = []
    for _ in range(repeats):
        x = torch.ones(rows, 64)
        dist.barrier()
        before = len(comm.records)
        if op == "broadcast":
            comm.broadcast(x, "row", root=0)
        elif op == "reduce":
            comm.reduce(x, "row", root=0)
        elif op == "all_reduce":
            comm.all_reduce(x, "row")
        elif op == "all_gather":
            comm.all_gather_rows(x[: rows // p].contiguous(), "row", [rows // p] * p)
        else:
            comm.reduce_scatter_rows(x, "row", [rows // p] * p)
        rec = comm.records[before]
        out.append((rec.bytes, rec.seconds))
    return out


def collective_worker(rank: int, world_size: int, payloads: tuple[int, ...], repeats: int) -> dict:
    """Per op: list of (bytes received by this rank, seconds) over payloads and repetitions."""
    from gridgnn.grid.comm import Communicator
    from gridgnn.grid.process_grid import ProcessGrid
    from gridgnn.grid.shape import resolve_grid

    grid = ProcessGrid.create(resolve_grid("1d", world_size))
    comm = Communicator(grid)
    results = {}
    for op in OPS:
        _time_op(comm, op, payloads[0], 2)  # warm up the connections
        results[op] = [_time_op(comm, op, nbytes, repeats) for nbytes in payloads]
    return results


def fit_link(samples: list[tuple[int, float]], group_size: int) -> LinkCost:
    """Non-negative least-squares α (per ⌈log2 p⌉ step) and β (seconds per byte), relative errors."""
    steps = max(1, math.ceil(math.log2(group_size)))
    x = np.array([[steps, b] for b, _ in samples], dtype=np.float64)
    y = np.array([t for _, t in samples], dtype=np.float64)
    scale = np.maximum(y, 1e-9)  # relative errors: small payloads weigh as much as large ones
    coef, _ = nnls(x / scale[:, None], y / scale)
    return LinkCost(float(coef[0]), float(coef[1]))


def measure_collectives(world_size: int, *, payloads=PAYLOADS, repeats: int = 5, backend: str = "gloo",
                        timeout_s: float = 300.0) -> dict[str, LinkCost]:
    """α and β per operation on ``world_size`` local workers (``backend``: gloo or nccl)."""
    from gridgnn.launch.spawn import run_workers

    threads = max(1, (os.cpu_count() or 1) // world_size)
    per_rank = run_workers(collective_worker, world_size, tuple(payloads), repeats, timeout_s=timeout_s,
                           threads=threads, backend=backend)
    links = {}
    for op in OPS:
        samples = []
        for k in range(len(payloads)):
            slowest = [max(per_rank[r][op][k][t][1] for r in range(world_size)) for t in range(repeats)]
            nbytes = max(per_rank[r][op][k][0][0] for r in range(world_size))
            samples.append((nbytes, statistics.median(slowest)))
        links[op] = fit_link(samples, world_size)
    return links


def _best_time(fn, repeats: int = 5) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def measure_kernels(threads: int, device: str = "cpu") -> dict[str, float]:
    """Rates of the local kernels: sparse and dense flop/s, element-wise elements/s."""
    import scipy.sparse as sp
    import torch

    from gridgnn.nn.dropout import dropout
    from gridgnn.sparse.csr import SparseBlock

    torch.set_num_threads(threads)
    n, nnz, f = 50_000, 1_000_000, 32
    rng = np.random.default_rng(0)
    adj = sp.csr_matrix((np.ones(nnz, dtype=np.float32), (rng.integers(0, n, nnz), rng.integers(0, n, nnz))),
                        shape=(n, n))
    block = SparseBlock.from_scipy(adj, index_dtype=torch.int32, device=device, transpose=False)
    x = torch.randn(n, f, device=device)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    t_sparse = _best_time(lambda: (block.matmul(x), sync()))
    a, w = torch.randn(20_000, 256, device=device), torch.randn(256, 64, device=device)
    t_dense = _best_time(lambda: (a @ w, sync()))
    h = torch.randn(20_000, 64, device=device)
    t_elem = _best_time(lambda: (dropout(torch.relu(h), 0.5, seed=0, epoch=1, layer=1), sync()))
    return {"sparse_flops": 2.0 * adj.nnz * f / t_sparse, "dense_flops": 2.0 * a.shape[0] * 256 * 64 / t_dense,
            "elementwise_per_s": h.numel() / t_elem}


def calibrate(world_size: int = 2, *, name: str = "calibrated", repeats: int = 5, backend: str = "gloo",
              device: str = "cpu") -> MachineProfile:
    """A profile of this machine: collectives on ``world_size`` local workers, kernels in this process."""
    import platform

    links = measure_collectives(world_size, repeats=repeats, backend=backend)
    threads = max(1, (os.cpu_count() or 1) // world_size)
    rates = measure_kernels(threads, device)
    description = (f"measured by 'gridgnn calibrate' on {platform.node() or 'this machine'}: {world_size} "
                   f"{backend} workers, {threads} threads each, {device}")
    return MachineProfile(name=name, description=description, intra_node=links, sources=[description],
                          device=device.split(":")[0], **rates)
