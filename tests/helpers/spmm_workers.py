"""Worker-side code of the distributed SpMM tests (imported by spawned processes)."""

from __future__ import annotations

import os

import numpy as np
import scipy.sparse as sp
import torch
from torch.distributed.tensor.debug import CommDebugMode

from gridgnn.cost.spmm_plan import lower
from gridgnn.grid.comm import Communicator
from gridgnn.grid.process_grid import ProcessGrid
from gridgnn.grid.shape import resolve_grid
from gridgnn.spmm.registry import build_spmm

WIDTHS = (1, 7, 33)


def test_device() -> str:
    """``cpu`` (gloo), or ``cuda`` (NCCL) when GRIDGNN_TEST_DEVICE=cuda (see scripts/gpu_check.sh)."""
    return os.environ.get("GRIDGNN_TEST_DEVICE", "cpu")


def random_directed(n: int, density: float = 0.08, seed: int = 0) -> sp.csr_matrix:
    """A random directed (non-symmetric) sparse matrix with empty rows and an empty off-diagonal region."""
    a = sp.random(n, n, density=density, format="lil", dtype=np.float32, random_state=seed)
    a[: n // 3, n // 2:] = 0  # whole panels without non-zeros
    a[n // 2] = 0  # an empty row
    return sp.csr_matrix(a)


def dense_inputs(n: int, width: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed * 1000 + width)
    return torch.randn(n, width, generator=gen), torch.randn(n, width, generator=gen)


def run_case(algo: str, replication: int | None, grid_text: str | None, n: int, seed: int,
             overlap: bool = True, parts: list[int] | None = None, comm_mode: str = "dense") -> list[dict]:
    """Forward + backward at every width on this rank; returns blocks, ranges and counted communication.
    ``parts``: a vertex partition the row blocks follow (`gridgnn.cost.stages`)."""
    adj = random_directed(n, seed=seed)
    shape = resolve_grid(algo, torch.distributed.get_world_size(), replication=replication, grid=grid_text)
    grid = ProcessGrid.create(shape, test_device())
    comm = Communicator(grid, overlap=overlap)
    op = build_spmm(grid, comm, adj, parts=parts, comm_mode=comm_mode)
    comm.reset()  # the sparse variants' index exchange is set-up, not the product
    out = []
    for width in WIDTHS:
        x_global, g_global = dense_inputs(n, width, seed)
        x = op.local_slice(x_global).to(grid.device).requires_grad_(True)
        debug = CommDebugMode()
        with debug:
            y = op(x)
            forward = comm.reset()
            y.backward(op.local_slice(g_global).to(grid.device))
            backward = comm.reset()
        out.append({
            "width": width, "rows": op.row_range, "cols": op.col_range(width),
            "y": y.detach().cpu().numpy(), "grad": x.grad.cpu().numpy(), "stored_nnz": op.stored_nnz,
            "forward_bytes": sum(r.bytes for r in forward), "forward_calls": len(forward),
            "backward_bytes": sum(r.bytes for r in backward), "backward_calls": len(backward),
            "phases": sorted({r.phase for r in forward}) + sorted({r.phase for r in backward}),
            "records": sorted((r.op, r.axis, r.bytes, r.phase) for r in forward + backward),
            "sequence": [[(r.op, r.axis, r.bytes) for r in half] for half in (forward, backward)],
            "own_plan": own_plan(op, width),
            "exposed_within_total": all(0 <= r.blocked_seconds <= r.seconds + 1e-3 for r in forward + backward),
            "debug_calls": debug.get_total_counts(),
        })
    return out


def run_cases(rank: int, world_size: int, cases: list[tuple], n: int, seed: int) -> list[list[dict]]:
    return [run_case(algo, c, g, n, seed) for algo, c, g in cases]


def run_overlap_pairs(rank: int, world_size: int, cases: list[tuple], n: int, seed: int) -> list[tuple]:
    """Each case without and with overlap on this rank: (blocking results, overlapped results)."""
    return [(run_case(algo, c, g, n, seed, overlap=False), run_case(algo, c, g, n, seed, overlap=True))
            for algo, c, g in cases]


def run_partition_cases(rank: int, world_size: int, cases: list[tuple], n: int, seed: int) -> list[list[dict]]:
    """Each (algo, c, grid, parts, comm_mode) case on this rank, blocks following ``parts``."""
    return [run_case(algo, c, g, n, seed, parts=parts, comm_mode=mode) for algo, c, g, parts, mode in cases]


def own_plan(op, width: int) -> list[list[tuple]] | None:
    """The (op, axis, bytes) steps of the plan ``op`` runs (`gridgnn.cost.spmm_plan.lower` of ``op.plan``), forward
    and backward, for a dense operand ``width`` wide (its own feature block's columns); None for an SpMM without
    a plan."""
    if not hasattr(op, "plan"):
        return None
    local = op.col_range(width)[1] - op.col_range(width)[0]
    return [[(s.op, s.axis, s.bytes) for s in lower(op.plan(local, backward), op.grid.shape, op.grid.coords)]
            for backward in (False, True)]
