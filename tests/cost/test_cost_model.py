"""The closed-form cost model on its own: scaling ratios of the paper at large P (pure code)."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from cost_oracles import block_nnz, spmm_cost, uniform_block_nnz

from gridgnn.cost.stages import stage_layout
from gridgnn.grid.shape import resolve_grid

N, F = 1 << 22, 64


def _dense_bytes(algo: str, p: int, **kwargs) -> int:
    """Forward bytes of rank 0 for one SpMM with no non-zeros moved (the dense volume only)."""
    shape = resolve_grid(algo, p, **kwargs)
    layout = stage_layout(algo, shape.sizes, N)
    nnz = None
    if algo in ("2d", "3d"):
        nnz = np.zeros((shape.sizes[0], len(layout.segments) - 1), dtype=np.int64)
    return spmm_cost(shape, 0, N, F, nnz).forward_bytes


@pytest.mark.parametrize("p", [64, 256, 4096])
def test_scaling_ratios(p):
    start = time.perf_counter()
    one_d = _dense_bytes("1d", p)
    assert one_d == pytest.approx(N * F * 4, rel=2 / p)
    c = 4
    # n f / c from the stages plus the replica all-reduce, about 2 n f c / P.
    assert abs(_dense_bytes("1.5d", p, replication=c) / one_d - 1 / c) <= 2 * c / p
    # X panels of the other pr - 1 process rows, f / pc columns wide: (1 - 1/√P) n f / √P.
    assert _dense_bytes("2d", p) / one_d * math.sqrt(p) == pytest.approx(1 - 1 / math.sqrt(p), rel=0.05)
    q = round(p ** (1 / 3))
    grid = f"{q}x{q}x{q}" if q**3 == p else "8x8x4"
    # Stage broadcasts move ~n f / P^(2/3) and the depth reduce-scatter as much again: ~2 / P^(2/3).
    ratio_3d = _dense_bytes("3d", p, grid=grid) / one_d * p ** (2 / 3)
    assert 1.0 <= ratio_3d <= 3.0
    assert time.perf_counter() - start < 5.0


def test_block_nnz_counts_every_entry():
    import scipy.sparse as sp

    adj = sp.random(50, 50, density=0.1, format="csr", random_state=0)
    counts = block_nnz(adj, [0, 20, 50], [0, 10, 30, 50])
    dense = adj.toarray() != 0
    assert counts.sum() == adj.nnz
    assert counts[1, 2] == dense[20:50, 30:50].sum()
    assert uniform_block_nnz(1000, 100, [0, 50, 100], [0, 100]).tolist() == [[500], [500]]
