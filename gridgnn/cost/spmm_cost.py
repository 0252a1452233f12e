"""Closed-form communication of one distributed SpMM, per rank: bytes and collective calls.

Pure code, no process group. It restates each algorithm's stages (see the module docstrings in
`gridgnn.spmm`) in the byte convention of `gridgnn.grid.comm`, so a measured run must match it exactly.
Inputs are block sizes, the nnz of every Â panel the algorithm moves, the width f and the grid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gridgnn.grid.shape import GridShape
from gridgnn.partition import block_bounds, owner, refine, sub_bounds
from gridgnn.sparse.layout import packed_nbytes


@dataclass(frozen=True)
class SpMMCost:
    """Bytes received and collective calls of one rank for one SpMM, forward and backward."""

    forward_bytes: int
    forward_calls: int
    backward_bytes: int
    backward_calls: int


@dataclass(frozen=True)
class SizeInfo:
    """Element sizes in bytes: dense values, sparse values, sparse indices."""

    value: int = 4
    sparse_value: int = 4
    index: int = 4


FLOAT32 = SizeInfo()
"""float32 values with int32 indices: what gridgnn sends for graphs below 2^31 vertices and non-zeros."""


def partition_stats(algo: str, shape: GridShape, n: int) -> dict:
    """The vertex partitions an algorithm uses, for `block_nnz` (pure)."""
    if algo in ("1d", "1.5d"):
        return {"row_bounds": block_bounds(n, shape.sizes[0])}
    if algo == "2d":
        rows, cols = block_bounds(n, shape.sizes[0]), block_bounds(n, shape.sizes[1])
        return {"row_bounds": rows, "col_bounds": cols, "stages": refine(rows, cols)}
    q, d = shape.sizes[0], shape.sizes[2]
    rows = block_bounds(n, q)
    fine = sorted({b for k in range(q) for b in sub_bounds(rows[k], rows[k + 1], d)})
    return {"row_bounds": rows, "sub_bounds": fine}


def spmm_cost(shape: GridShape, rank: int, n: int, width: int, panel_nnz: np.ndarray | None = None,
              sizes: SizeInfo = FLOAT32) -> SpMMCost:
    """Communication of ``rank`` for one SpMM of width ``width`` on grid ``shape``.

    ``panel_nnz``: for 2D, nnz per (row block, stage segment) — `block_nnz(adj, row_bounds, stages)`; for
    3D, nnz per (row block, fine sub-block) — `block_nnz(adj, row_bounds, sub_bounds)`; unused by 1D/1.5D.
    """
    coords = shape.coords(rank)
    if shape.algo in ("1d", "1.5d"):
        return _cost_15d(shape, coords, n, width, sizes)
    if shape.algo == "2d":
        return _cost_2d(shape, coords, n, width, panel_nnz, sizes)
    return _cost_3d(shape, coords, n, width, panel_nnz, sizes)


def _cost_15d(shape: GridShape, coords: dict, n: int, f: int, sz: SizeInfo) -> SpMMCost:
    num_rows = shape.sizes[0]
    c = shape.sizes[1] if shape.algo == "1.5d" else 1
    i, k = coords["row"], coords.get("rep", 0)
    bounds = block_bounds(n, num_rows)
    share = [j for j in range(num_rows) if j % c == k]
    row_bytes = f * sz.value
    stage_bytes = sum((bounds[j + 1] - bounds[j]) * row_bytes for j in share if j != i)
    stage_calls = len(share) if num_rows > 1 else 0
    own = (bounds[i + 1] - bounds[i]) * row_bytes
    rep_fwd = 2 * own * (c - 1) // c if c > 1 else 0
    rep_bwd = own if c > 1 and k != i % c else 0
    rep_calls = 1 if c > 1 else 0
    return SpMMCost(stage_bytes + rep_fwd, stage_calls + rep_calls, stage_bytes + rep_bwd,
                    stage_calls + rep_calls)


def _feature_width(f: int, parts: int, j: int) -> int:
    bounds = block_bounds(f, parts, allow_empty=True, what="feature columns")
    return bounds[j + 1] - bounds[j]


def _panel_terms(rows: int, segment_rows: list[int], nnz: list[int], own: list[bool], sz: SizeInfo,
                 transpose: bool) -> tuple[int, int]:
    """Bytes and calls of the Â panel broadcasts of one process (non-empty panels only)."""
    total, calls = 0, 0
    for seg, z, mine in zip(segment_rows, nnz, own, strict=True):
        if z == 0:
            continue
        calls += 1
        if not mine:
            packed_rows = seg if transpose else rows
            total += packed_nbytes(packed_rows, z, sz.index, sz.sparse_value)
    return total, calls


def _cost_2d(shape: GridShape, coords: dict, n: int, f: int, panel_nnz, sz: SizeInfo) -> SpMMCost:
    pr, pc = shape.sizes
    i, j = coords["row"], coords["col"]
    rows_b, cols_b = block_bounds(n, pr), block_bounds(n, pc)
    stages = refine(rows_b, cols_b)
    segs = list(zip(stages[:-1], stages[1:], strict=True))
    n_i, f_j = rows_b[i + 1] - rows_b[i], _feature_width(f, pc, j)
    nnz = [int(z) for z in panel_nnz[i]]
    own = [owner(cols_b, a) == j for a, _ in segs]
    seg_rows = [b - a for a, b in segs]
    fwd_a, calls_a = _panel_terms(n_i, seg_rows, nnz, own, sz, transpose=False) if pc > 1 else (0, 0)
    bwd_a, _ = _panel_terms(n_i, seg_rows, nnz, own, sz, transpose=True) if pc > 1 else (0, 0)
    dense, dense_calls = 0, 0
    if f_j > 0 and pr > 1:
        dense = sum((b - a) * f_j * sz.value for a, b in segs if owner(rows_b, a) != i)
        dense_calls = len(segs)
    return SpMMCost(fwd_a + dense, calls_a + dense_calls, bwd_a + dense, calls_a + dense_calls)


def _cost_3d(shape: GridShape, coords: dict, n: int, f: int, panel_nnz, sz: SizeInfo) -> SpMMCost:
    q, _, d = shape.sizes
    i, j, m = coords["row"], coords["col"], coords["depth"]
    rows_b = block_bounds(n, q)
    sub = [sub_bounds(rows_b[k], rows_b[k + 1], d) for k in range(q)]
    n_i, f_j = rows_b[i + 1] - rows_b[i], _feature_width(f, q, j)
    seg_rows = [sub[k][m + 1] - sub[k][m] for k in range(q)]
    nnz = [int(panel_nnz[i][k * d + m]) for k in range(q)]
    own = [k == j for k in range(q)]
    fwd_a, calls_a = _panel_terms(n_i, seg_rows, nnz, own, sz, transpose=False) if q > 1 else (0, 0)
    bwd_a, _ = _panel_terms(n_i, seg_rows, nnz, own, sz, transpose=True) if q > 1 else (0, 0)
    dense, dense_calls, depth, depth_calls = 0, 0, 0, 0
    if f_j > 0 and q > 1:
        dense = sum(seg_rows[k] * f_j * sz.value for k in range(q) if k != i)
        dense_calls = q
    if f_j > 0 and d > 1:
        chunk = max(sub[i][t + 1] - sub[i][t] for t in range(d))
        depth, depth_calls = (d - 1) * chunk * f_j * sz.value, 1
    calls = calls_a + dense_calls + depth_calls
    return SpMMCost(fwd_a + dense + depth, calls, bwd_a + dense + depth, calls)
