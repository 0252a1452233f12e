"""The costs of 3D (`gridgnn.spmm.spmm_3d`): Split-3D on a ``q x q x d`` grid, SUMMA in each depth slice.

One of the algorithm modules of `gridgnn.cost.algorithms` (read its table of what each provides). Block k's
sub-blocks S[k][l] from `gridgnn.cost.stages`; the plan of one rank's collectives is SUMMA's
(`gridgnn.cost.algorithms.summa.schedule`, which runs a depth slice's segments). Pure, every rank at once.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gridgnn.cost.algorithms.summa import schedule
from gridgnn.cost.graph_stats import GraphStats
from gridgnn.cost.spmm_cost import SizeInfo
from gridgnn.cost.stages import StageLayout
from gridgnn.cost.terms import (
    ShapeBlocks,
    Term,
    feature_widths,
    gather_term,
    packed_bytes,
    scatter_sum_term,
    sum_terms,
    term,
)
from gridgnn.grid.shape import GridShape

__all__ = ["DENSE_BUFFERS", "attention_terms", "blocks", "count_bounds", "graph_bytes", "panel_terms", "schedule",
           "spmm_terms"]

DENSE_BUFFERS = 2
"""Dense (rows x width) buffers of a stage beside the X panel: the partial product and the gathered gradient."""


def count_bounds(shape: GridShape, layout: StageLayout) -> tuple[list[int], list[int]]:
    """The (row, column) bounds on which Â's entries are counted: the row blocks and the sub-blocks S[k][l]."""
    return layout.row_bounds, layout.segments


def blocks(shape: GridShape, stats: GraphStats, layout: StageLayout, coords: dict) -> ShapeBlocks:
    """`ShapeBlocks` with ``nnz`` (q, q*d): the entries of every (row block, sub-block S[k][l]) panel, column
    k*d + l, and ``sub`` (q, d): the rows of each sub-block."""
    rows, cols = count_bounds(shape, layout)
    q, _, d = shape.sizes
    sub = np.diff(np.asarray(cols, dtype=np.int64)).reshape(q, d)  # rows of each sub-block S[k][l]
    nnz = stats.grouped_nnz(rows, cols)
    i, j, m = coords["row"], coords["col"], coords["depth"]
    z = nnz.reshape(q, q, d)
    return ShapeBlocks(shape, stats.num_nodes, coords, layout, nnz, sub[i, m], z[i, j, m], z.sum(axis=1)[i, m],
                       sub=sub, stats=stats)


def panel_terms(blocks: ShapeBlocks, backward: bool, sz: SizeInfo) -> list[Term]:
    """The packed Â panels of one SpMM half on ``col``: in each depth slice, every panel Â[i, S[k][l]] (or its
    transpose) of the rank's block row with entries, its own not counted; none when q = 1."""
    shape, p = blocks.shape, blocks.shape.world_size
    q, _, d = shape.sizes
    if q == 1:
        return []
    i, j, m = blocks.coords["row"], blocks.coords["col"], blocks.coords["depth"]
    key = ("3d", backward, sz)
    if key not in blocks.cache:
        heights = np.diff(blocks.row_bounds).astype(np.int64)
        z = blocks.nnz.reshape(q, q, d)  # (row block i, column block k, depth slice l)
        packed_rows = blocks.sub[None, :, :] if backward else heights[:, None, None]
        packed = packed_bytes(packed_rows, z, sz)  # (q, q, d)
        calls = (z > 0).sum(axis=1)  # (q, d)
        blocks.cache[key] = (calls[i, m], packed.sum(axis=1)[i, m] - packed[i, j, m])
    calls, nbytes = blocks.cache[key]
    phase = "spmm_backward" if backward else "spmm_forward"
    return [term(phase, "broadcast", "col", q, calls, nbytes, p)]


def spmm_terms(blocks: ShapeBlocks, f: int, backward: bool, sz: SizeInfo, cached: bool = False) -> list[Term]:
    """One dense SpMM half of width ``f``: SUMMA within each depth slice (panels on ``col``, `panel_terms`, not
    with ``cached``; X or partial products on ``row``), the depth all-gather (backward, first) or
    reduce-scatter (forward, last)."""
    shape, p = blocks.shape, blocks.shape.world_size
    q, _, d = shape.sizes
    phase = "spmm_backward" if backward else "spmm_forward"
    i, j, m = blocks.coords["row"], blocks.coords["col"], blocks.coords["depth"]
    sub = blocks.sub  # (q, d)
    fw = feature_widths(f, q)[j]
    active = fw > 0
    terms = []
    if d > 1 and backward:
        chunk = sub.max(axis=1)[i]
        terms.append(gather_term(phase, "depth", d, np.where(active, chunk, 0), fw, sz, active.astype(np.int64), p))
    if q > 1:
        terms += [] if cached else panel_terms(blocks, backward, sz)
        dense = np.where(active, (sub[:, :].sum(axis=0)[m] - sub[i, m]) * sz.row_bytes(fw), 0)
        terms.append(term(phase, "reduce" if backward else "broadcast", "row", q,
                           np.where(active, q, 0), dense, p))
    if d > 1 and not backward:
        chunk = sub.max(axis=1)[i]
        terms.append(scatter_sum_term(phase, "depth", d, np.where(active, chunk, 0), np.where(active, sub[i, m], 0),
                                      fw, sz, active.astype(np.int64), p))
    return terms


def attention_terms(blocks: ShapeBlocks, width: int, heads: int, sizes: SizeInfo,
                    cached: bool = False) -> list[Term]:
    """One GAT layer's attention on 3D: the Split-3D stages of width ``width`` forward and backward (panels
    on ``col`` both ways, X on ``row`` both ways, the depth reduce-scatter forward and all-gather backward, dX
    reduced on ``row``), the coefficients with every panel on ``col`` both ways and the SDDMM's reduce to the
    owner, the block's score terms all-gathered on ``depth`` (their gradient reduce-scattered), s_src[S[j][l]]
    on ``row`` (its gradient reduced), and the row maxima and sums all-reduced on ``col`` and on ``depth``
    (two forward, one backward). ``cached`` (``--cache-panels``): the panels' patterns stay put; their
    coefficients move."""
    shape, p = blocks.shape, blocks.shape.world_size
    q, _, d = shape.sizes
    i, j, m = blocks.coords["row"], blocks.coords["col"], blocks.coords["depth"]
    value = sizes.row_bytes(heads)  # one row of scores, in the wire precision (every term here is an SpMM phase)
    heights = np.diff(blocks.row_bounds).astype(np.int64)[i]
    ones = np.ones(p, dtype=np.int64)
    forward = spmm_terms(blocks, width, False, sizes, cached)
    terms = forward + [replace(t, phase="spmm_backward") for t in forward if t.axis != "depth"]
    terms += [t for t in spmm_terms(blocks, width, True, sizes) if t.axis != "col"]
    if d > 1:
        chunk = blocks.sub.max(axis=1)[i]
        terms += [gather_term("spmm_forward", "depth", d, chunk, heads, sizes, ones, p),
                  scatter_sum_term("spmm_backward", "depth", d, chunk, blocks.sub[i, m], heads, sizes, ones, p)]
    for axis, size in (("col", q), ("depth", d)):
        if size > 1:
            maxima = 2 * heights * heads * sizes.value * (size - 1) // size  # the row maxima stay float32
            terms += [Term("spmm_forward", "all_reduce", axis, size, ones, maxima)]
            terms += sum_terms("spmm_forward", axis, size, heights, heads, blocks.coords[axis], sizes, 1, p)
            terms += sum_terms("spmm_backward", axis, size, heights, heads, blocks.coords[axis], sizes, 1, p)
    if q > 1:
        remote = np.where(i != j, blocks.sub[j, m] * value, 0).astype(np.int64)
        terms += [Term("spmm_forward", "broadcast", "row", q, ones, remote),
                  Term("spmm_backward", "reduce", "row", q, ones, remote)]
        z = blocks.nnz.reshape(q, q, d)[i, :, m]  # (P, q): entries of panel k of the rank's block row and layer
        calls = (z > 0).sum(axis=1).astype(np.int64)
        nbytes = (z.sum(axis=1) - z[np.arange(p), j]).astype(np.int64) * value
        terms += [Term(phase, op, "col", q, calls, nbytes) for phase, op in
                  (("spmm_forward", "broadcast"), ("spmm_backward", "broadcast"), ("spmm_backward", "reduce"))]
    return terms


def graph_bytes(blocks: ShapeBlocks, sz: SizeInfo) -> np.ndarray:
    """(P,) bytes of the rank's one packed panel, both orientations (`gridgnn.cost.memory_model`)."""
    idx = sz.index
    heights = np.diff(blocks.row_bounds).astype(np.int64)
    values = 2 * blocks.local_nnz * (idx + sz.sparse_value)
    i, j, m = blocks.coords["row"], blocks.coords["col"], blocks.coords["depth"]
    return (heights[i] + 1 + blocks.sub[j, m] + 1) * idx + values
