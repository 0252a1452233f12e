"""Vectorized per-rank communication of one distributed SpMM: every rank of the grid at once.

The same closed forms as the per-rank test oracle ``tests/cost_oracles.py`` (`spmm_cost`, which prices
one rank; the tests check they agree rank by rank), restated with numpy over all P ranks and split into
*terms*: one (operation, axis) pair each, with per-rank calls and bytes, so a machine profile can price each
collective by its own α and β.
This is what makes `gridgnn plan` answer for P = 4096 in well under a second per configuration.

Rank order is row-major over the grid axes (`GridShape.coords`): ``rank = i*c + k`` on 1.5D,
``i*pc + j`` on 2D, ``(i*q + j)*d + l`` on 3D. Pure code, no process group.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from gridgnn.cost.graph_stats import GraphStats
from gridgnn.cost.spmm_cost import FLOAT32, SizeInfo
from gridgnn.cost.stages import StageLayout, stage_layout
from gridgnn.grid.shape import GridShape
from gridgnn.partition import block_bounds


@dataclass(frozen=True)
class Term:
    """One kind of collective of one phase: per-rank ``calls`` and ``bytes`` (int64 arrays of shape (P,)).

    ``axis`` is the grid axis (or ``world``) it runs on and ``group_size`` the processes of that axis group.
    """

    phase: str
    op: str
    axis: str
    group_size: int
    calls: np.ndarray
    bytes: np.ndarray


@dataclass
class ShapeBlocks:
    """The partition of one grid shape and the nnz of Â it needs (computed once per shape).

    ``coords``: axis -> int64 array (P,) of every rank's coordinate. ``layout``: the stages
    (`gridgnn.cost.stages`), whose ``row_bounds`` (the dense row blocks) and ``segments`` (the stage
    segments) this object also answers for. ``nnz``: 1.5D: (R, c) nnz of block row i in replica k's share
    of column blocks; 2D: (pr, nseg) nnz per (row block, SUMMA stage segment); 3D: (q, q*d) nnz per (row block, fine
    sub-block S[k][l] at column k*d + l). ``local_rows``: (P,) dense rows each rank holds.
    ``local_nnz``: (P,) stored Â entries each rank keeps (its own blocks). ``mult_nnz``: (P,) Â entries
    each rank multiplies per SpMM (its own blocks on 1.5D; every panel of its block row it receives on
    2D/3D).
    """

    shape: GridShape
    n: int
    coords: dict
    layout: StageLayout = field(repr=False)
    nnz: np.ndarray
    local_rows: np.ndarray
    local_nnz: np.ndarray
    mult_nnz: np.ndarray
    sub: np.ndarray | None = None  # 3D: (q, d) rows of each sub-block S[k][l]
    stats: GraphStats | None = field(default=None, repr=False)  # for the sparse variants' touched rows
    cache: dict = field(default_factory=dict, repr=False)  # width-independent Â panel terms

    @property
    def row_bounds(self) -> list[int]:
        """The dense row blocks' vertex boundaries (``layout.row_bounds``)."""
        return self.layout.row_bounds

    @property
    def segments(self) -> list[int]:
        """The stage segments' vertex boundaries (``layout.segments``; the SUMMA stages on 2D)."""
        return self.layout.segments


def nnz_bounds(shape: GridShape, n: int, parts: tuple[int, ...] | None = None) -> tuple[list[int], list[int]]:
    """The (row bounds, column bounds) on which `shape_blocks` counts Â's entries for ``shape`` (n vertices,
    ``parts`` as `GraphStats.parts`): the row blocks and the stage segments of `gridgnn.cost.stages`."""
    return _count_bounds(shape, stage_layout(shape.algo, shape.sizes, n, parts))


def _count_bounds(shape: GridShape, layout: StageLayout) -> tuple[list[int], list[int]]:
    n = layout.row_bounds[-1]
    if shape.algo == "2d" and shape.sizes[1] == 1:
        return layout.row_bounds, [0, n]  # per-stage nnz only matter when panels move; one column needs row sums
    return layout.row_bounds, layout.segments


def shape_blocks(shape: GridShape, stats: GraphStats) -> ShapeBlocks:
    """Partition and block nnz of ``stats``'s Â on ``shape`` (exact or uniform, as ``stats`` is)."""
    n = stats.num_nodes
    coords = {a: c.astype(np.int64) for a, c in zip(shape.axes, np.unravel_index(np.arange(shape.world_size),
                                                                                   shape.sizes), strict=True)}
    layout = stage_layout(shape.algo, shape.sizes, n, stats.parts)
    rows, cols = _count_bounds(shape, layout)
    if shape.algo in ("1d", "1.5d"):
        num_rows, c = shape.sizes[0], shape.replication
        nnz = stats.grouped_nnz(rows, cols, np.arange(num_rows) % c, num_groups=c)
        i, k = coords["row"], coords.get("rep", np.zeros_like(coords["row"]))
        return ShapeBlocks(shape, n, coords, layout, nnz, np.diff(rows)[i], nnz[i, k], nnz[i, k], stats=stats)
    if shape.algo == "2d":
        pc = shape.sizes[1]
        nnz = stats.grouped_nnz(rows, cols)
        i, j = coords["row"], coords["col"]
        owner = layout.panel_root if pc > 1 else np.zeros(1, dtype=np.int64)
        own = np.add.reduceat(nnz, np.searchsorted(owner, np.arange(pc)), axis=1) if pc > 1 else nnz
        return ShapeBlocks(shape, n, coords, layout, nnz, np.diff(rows)[i], own[i, j], nnz.sum(axis=1)[i],
                           stats=stats)
    q, _, d = shape.sizes
    sub = np.diff(np.asarray(cols, dtype=np.int64)).reshape(q, d)  # rows of each sub-block S[k][l]
    nnz = stats.grouped_nnz(rows, cols)
    i, j, m = coords["row"], coords["col"], coords["depth"]
    z = nnz.reshape(q, q, d)
    return ShapeBlocks(shape, n, coords, layout, nnz, sub[i, m], z[i, j, m], z.sum(axis=1)[i, m], sub=sub,
                       stats=stats)


def feature_widths(width: int, parts: int) -> np.ndarray:
    """Columns of each of ``parts`` feature blocks of a width-``width`` matrix (empty blocks allowed)."""
    return np.array(_feature_widths(width, parts), dtype=np.int64)


@lru_cache(maxsize=256)
def _feature_widths(width: int, parts: int) -> tuple[int, ...]:
    return tuple(np.diff(block_bounds(width, parts, allow_empty=True, what="feature columns")).tolist())


def _packed(rows, nnz, sz: SizeInfo) -> np.ndarray:
    """Bytes of packed CSR panels (0 where a panel is empty: it is never sent)."""
    rows, nnz = np.asarray(rows, dtype=np.int64), np.asarray(nnz, dtype=np.int64)
    return np.where(nnz > 0, (rows + 1 + nnz) * sz.index + nnz * sz.sparse_value, 0)


def spmm_terms(blocks: ShapeBlocks, width: int, *, backward: bool, sizes: SizeInfo = FLOAT32) -> list[Term]:
    """Terms of one dense SpMM of width ``width``: its forward (``Â X``) or its backward (``Âᵀ G``) half (the
    sparse variants: `gridgnn.cost.sparse_cost.comm_spmm_terms`)."""
    algo = blocks.shape.algo
    if algo in ("1d", "1.5d"):
        return _terms_15d(blocks, width, backward, sizes)
    if algo == "2d":
        return _terms_2d(blocks, width, backward, sizes)
    return _terms_3d(blocks, width, backward, sizes)


def _term(phase, op, axis, size, calls, nbytes, num_ranks) -> Term:
    calls = np.broadcast_to(np.asarray(calls, dtype=np.int64), (num_ranks,)).copy()
    nbytes = np.broadcast_to(np.asarray(nbytes, dtype=np.int64), (num_ranks,)).copy()
    return Term(phase, op, axis, size, calls, nbytes)


def _terms_15d(blocks: ShapeBlocks, f: int, backward: bool, sz: SizeInfo) -> list[Term]:
    shape, p = blocks.shape, blocks.shape.world_size
    num_rows, c = shape.sizes[0], shape.replication
    phase = "spmm_backward" if backward else "spmm_forward"
    sizes = np.diff(blocks.row_bounds).astype(np.int64)
    share = np.arange(num_rows) % c
    share_rows = np.bincount(share, weights=sizes, minlength=c).astype(np.int64)
    share_count = np.bincount(share, minlength=c).astype(np.int64)
    i, k = blocks.coords["row"], blocks.coords.get("rep", np.zeros(p, dtype=np.int64))
    row_bytes = f * sz.value
    stage = (share_rows[k] - np.where(i % c == k, sizes[i], 0)) * row_bytes
    terms = []
    if num_rows > 1:
        terms.append(_term(phase, "reduce" if backward else "broadcast", "row", num_rows, share_count[k], stage, p))
    if c > 1:
        own = sizes[i] * row_bytes
        if backward:
            terms.append(_term(phase, "broadcast", "rep", c, 1, np.where(k != i % c, own, 0), p))
        else:
            terms.append(_term(phase, "all_reduce", "rep", c, 1, 2 * own * (c - 1) // c, p))
    return terms


def _terms_2d(blocks: ShapeBlocks, f: int, backward: bool, sz: SizeInfo) -> list[Term]:
    shape, p = blocks.shape, blocks.shape.world_size
    pr, pc = shape.sizes
    phase = "spmm_backward" if backward else "spmm_forward"
    i, j = blocks.coords["row"], blocks.coords["col"]
    stages = blocks.segments
    seg_rows = np.diff(stages).astype(np.int64)
    heights = np.diff(blocks.row_bounds).astype(np.int64)
    fw = feature_widths(f, pc)[j]
    terms = []
    if pc > 1:
        key = ("2d", backward, sz)
        if key not in blocks.cache:
            packed_rows = seg_rows[None, :] if backward else heights[:, None]
            packed = _packed(packed_rows, blocks.nnz, sz)  # (pr, nseg)
            owner = blocks.layout.panel_root
            starts = np.searchsorted(owner, np.arange(pc))  # owners ascend: each column block's first segment
            own = np.add.reduceat(packed, starts, axis=1)  # (pr, pc)
            calls = (blocks.nnz > 0).sum(axis=1)
            blocks.cache[key] = (calls[i], packed.sum(axis=1)[i] - own[i, j])
        calls, nbytes = blocks.cache[key]
        terms.append(_term(phase, "broadcast", "col", pc, calls, nbytes, p))
    if pr > 1:
        active = fw > 0
        dense = np.where(active, (blocks.n - heights[i]) * fw * sz.value, 0)
        terms.append(_term(phase, "reduce" if backward else "broadcast", "row", pr,
                           np.where(active, len(seg_rows), 0), dense, p))
    return terms


def _terms_3d(blocks: ShapeBlocks, f: int, backward: bool, sz: SizeInfo) -> list[Term]:
    shape, p = blocks.shape, blocks.shape.world_size
    q, _, d = shape.sizes
    phase = "spmm_backward" if backward else "spmm_forward"
    i, j, m = blocks.coords["row"], blocks.coords["col"], blocks.coords["depth"]
    sub = blocks.sub  # (q, d)
    heights = np.diff(blocks.row_bounds).astype(np.int64)
    z = blocks.nnz.reshape(q, q, d)  # (row block i, column block k, depth slice l)
    fw = feature_widths(f, q)[j]
    active = fw > 0
    terms = []
    if d > 1 and backward:
        chunk = sub.max(axis=1)[i]
        terms.append(_term(phase, "all_gather", "depth", d, active.astype(np.int64),
                           np.where(active, (d - 1) * chunk * fw * sz.value, 0), p))
    if q > 1:
        key = ("3d", backward, sz)
        if key not in blocks.cache:
            packed_rows = sub[None, :, :] if backward else heights[:, None, None]
            packed = _packed(packed_rows, z, sz)  # (q, q, d)
            calls = (z > 0).sum(axis=1)  # (q, d)
            blocks.cache[key] = (calls[i, m], packed.sum(axis=1)[i, m] - packed[i, j, m])
        calls, nbytes = blocks.cache[key]
        terms.append(_term(phase, "broadcast", "col", q, calls, nbytes, p))
        dense = np.where(active, (sub[:, :].sum(axis=0)[m] - sub[i, m]) * fw * sz.value, 0)
        terms.append(_term(phase, "reduce" if backward else "broadcast", "row", q,
                           np.where(active, q, 0), dense, p))
    if d > 1 and not backward:
        chunk = sub.max(axis=1)[i]
        terms.append(_term(phase, "reduce_scatter", "depth", d, active.astype(np.int64),
                           np.where(active, (d - 1) * chunk * fw * sz.value, 0), p))
    return terms
