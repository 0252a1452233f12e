"""Test oracles of the cost model: per-rank closed forms the tests price measured runs against (they used to
ship in the package, `gridgnn.cost.spmm_cost` / `epoch_cost` / `block_stats`, but only tests use them).

- `spmm_cost`: bytes and calls of one rank for one distributed SpMM, restating each algorithm's stages (see
  the module docstrings in `gridgnn.spmm`) in the byte convention of `gridgnn.grid.comm`, so a measured run
  must match it exactly; `gridgnn.cost.rank_cost` (the vectorized model `gridgnn plan` uses) must agree with
  it rank by rank.
- `training_step_spmm_cost`: the same summed over the SpMMs of one GCN training step.
- `block_nnz` / `uniform_block_nnz`: the nnz of every block of a partitioned matrix (counted, or expected).

Pure code, no process group.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from gridgnn.config import resolve_order
from gridgnn.cost.spmm_cost import FLOAT32, SizeInfo
from gridgnn.grid.shape import GridShape
from gridgnn.partition import block_bounds, owner, refine, sub_bounds
from gridgnn.sparse.layout import packed_nbytes

# --- one SpMM, one rank --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SpMMCost:
    """Bytes received and collective calls of one rank for one SpMM, forward and backward."""

    forward_bytes: int
    forward_calls: int
    backward_bytes: int
    backward_calls: int


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


# --- one training step -------------------------------------------------------------------------------------


def spmm_widths(widths: list[int], order: str) -> tuple[list[int], list[int]]:
    """Widths of the forward and backward SpMMs of one training step, layer by layer.

    ``widths`` = [f0, f1, ..., fL] (input features, hidden widths, classes).
    """
    forward, backward = [], []
    for index, (w_in, w_out) in enumerate(zip(widths[:-1], widths[1:], strict=True)):
        layer_order = resolve_order(order, w_in, w_out)
        width = w_in if layer_order == "aggregate-first" else w_out
        forward.append(width)
        if not (index == 0 and layer_order == "aggregate-first"):
            backward.append(width)
    return forward, backward


@dataclass(frozen=True)
class StepSpMMCost:
    forward_bytes: int
    forward_calls: int
    backward_bytes: int
    backward_calls: int


def training_step_spmm_cost(shape: GridShape, rank: int, n: int, widths: list[int], order: str,
                            panel_nnz: np.ndarray | None = None, sizes: SizeInfo = FLOAT32) -> StepSpMMCost:
    """SpMM bytes and calls of ``rank`` for one training step (phases spmm_forward / spmm_backward)."""
    forward, backward = spmm_widths(widths, order)
    fwd = [spmm_cost(shape, rank, n, f, panel_nnz, sizes) for f in forward]
    bwd = [spmm_cost(shape, rank, n, f, panel_nnz, sizes) for f in backward]
    return StepSpMMCost(sum(c.forward_bytes for c in fwd), sum(c.forward_calls for c in fwd),
                        sum(c.backward_bytes for c in bwd), sum(c.backward_calls for c in bwd))


# --- nnz per block -----------------------------------------------------------------------------------------


def block_nnz(adj: sp.csr_matrix, row_bounds: list[int], col_bounds: list[int]) -> np.ndarray:
    """nnz of every block (row block r, column block c) of ``adj``; shape (len(row_bounds)-1, len(col_bounds)-1).

    One pass over the stored entries; no block is materialized. Not collective.
    """
    adj = sp.csr_matrix(adj)
    rows = np.repeat(np.arange(adj.shape[0]), np.diff(adj.indptr))
    row_block = np.searchsorted(row_bounds, rows, side="right") - 1
    col_block = np.searchsorted(col_bounds, adj.indices, side="right") - 1
    num_cols = len(col_bounds) - 1
    flat = np.bincount(row_block * num_cols + col_block, minlength=(len(row_bounds) - 1) * num_cols)
    return flat.reshape(len(row_bounds) - 1, num_cols)


def uniform_block_nnz(nnz: int, n: int, row_bounds: list[int], col_bounds: list[int]) -> np.ndarray:
    """Expected nnz per block when the ``nnz`` entries are spread uniformly (for graphs not in memory)."""
    rows = np.diff(np.asarray(row_bounds, dtype=np.float64))
    cols = np.diff(np.asarray(col_bounds, dtype=np.float64))
    return np.rint(nnz * np.outer(rows, cols) / (float(n) * n)).astype(np.int64)


def assert_terms_sum_steps(terms, steps, rank: int, context=None, by_phase: bool = False) -> None:
    """The closed-form ``terms`` (every rank at once) of one priced part equal, for ``rank``, the sum of the plan's
    ``steps`` (records of `gridgnn.cost.spmm_plan.lower`), per (collective, axis): calls and bytes; ``by_phase``:
    ``steps`` are (phase, step) pairs and the terms are compared per phase too."""
    from collections import Counter

    def key(term_phase, op, axis):
        return (term_phase, op, axis) if by_phase else (op, axis)

    planned_bytes, planned_calls = Counter(), Counter()
    for item in steps:
        step_phase, step = item if by_phase else (None, item)
        planned_bytes[key(step_phase, step.op, step.axis)] += step.bytes
        planned_calls[key(step_phase, step.op, step.axis)] += 1
    modelled_bytes, modelled_calls = Counter(), Counter()
    for t in terms:
        if t.calls[rank]:
            modelled_bytes[key(t.phase, t.op, t.axis)] += int(t.bytes[rank])
            modelled_calls[key(t.phase, t.op, t.axis)] += int(t.calls[rank])
    assert +modelled_calls == planned_calls, context
    assert +modelled_bytes == +planned_bytes, context
