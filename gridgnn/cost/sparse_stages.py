"""Sparse communication: which rows of the dense operand each process needs, stage by stage (pure).

The one place that knows the stages of every algorithm's sparse variant (``--comm sparse``); the
distributed SpMMs (`gridgnn.spmm.sparse_15d`, `gridgnn.spmm.sparse_summa`) build their exchanges from it and
the cost model (`gridgnn.cost.rank_cost`) prices them from it, so both see the same index sets.

An exchange moves rows of X along one grid axis (``row`` on every algorithm). A *receiver* holds a block of
Â's rows (``row_bounds``); the columns of Â are cut into *segments* (``segments``), each held as rows of X by
one process of the axis (``root``). The receiver needs, of segment s, exactly the columns its Â rows touch
(`touched_columns`): those rows travel, nothing else. In backward the same sets travel the other way (the
rows of ``Â[rows, s]ᵀ G`` that can be non-zero), summed at the root.

=====  ===============================  ===============================  =========================  ============
algo   receiver's Â rows                segments                         root (coordinate on row)   handled by
=====  ===============================  ===============================  =========================  ============
1.5d   block i of ``block_bounds(n,R)``  the R row blocks                 j (the segment's block)     replica j % c
2d     block i of ``block_bounds(n,pr)`` stages ``refine(rows, cols)``    the row block holding s     every process
3d     block i of ``block_bounds(n,q)``  sub-blocks S[k][l] (k-major)     k                           depth l
=====  ===============================  ===============================  =========================  ============
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gridgnn.partition import block_bounds, refine, sub_bounds
from gridgnn.sparse.cut import CHUNK_ENTRIES, checked_column_ids


@dataclass(frozen=True)
class StageLayout:
    """The receivers' Â row blocks, the column segments, each segment's root on the ``row`` axis and the
    group (replica on 1.5D, depth on 3D, 0 on 2D) that handles it."""

    row_bounds: list[int]
    segments: list[int]
    root: np.ndarray
    group: np.ndarray

    def handled_by(self, group: int) -> list[int]:
        """The segments a process of ``group`` (replica or depth index) receives."""
        return np.flatnonzero(self.group == group).tolist()


def stage_layout(algo: str, sizes: tuple[int, ...], n: int) -> StageLayout:
    """The `StageLayout` of ``algo`` on a grid of ``sizes`` (as `GridShape.sizes`) for n vertices."""
    if algo in ("1d", "1.5d"):
        num_rows = sizes[0]
        c = sizes[1] if algo == "1.5d" else 1
        rows = block_bounds(n, num_rows)
        blocks = np.arange(num_rows)
        return StageLayout(rows, rows, blocks, blocks % c)
    if algo == "2d":
        rows = block_bounds(n, sizes[0])
        segments = refine(rows, block_bounds(n, sizes[1]))
        root = np.searchsorted(rows, segments[:-1], side="right") - 1
        return StageLayout(rows, segments, root, np.zeros(len(segments) - 1, dtype=np.int64))
    q, d = sizes[0], sizes[2]
    rows = block_bounds(n, q)
    segments = [0] + [b for k in range(q) for b in sub_bounds(rows[k], rows[k + 1], d)[1:]]
    index = np.arange(q * d)
    return StageLayout(rows, segments, index // d, index % d)


def touched_columns(matrix, rows: tuple[int, int], segments: list[int], keep: list[int]) -> dict[int, np.ndarray]:
    """Global column ids (sorted, int64) of the row block ``matrix[r0:r1, :]`` inside each kept segment.

    ``matrix``: CSR-like (``indptr``, ``indices``, ``shape``), scipy or memory-mapped; read in chunks of
    `CHUNK_ENTRIES`, with one byte per column of scratch. Not collective.
    """
    r0, r1 = rows
    n_cols = int(matrix.shape[1])
    seen = np.zeros(n_cols, dtype=bool)
    indptr = np.asarray(matrix.indptr[r0:r1 + 1], dtype=np.int64)
    start, stop = int(indptr[0]), int(indptr[-1])
    for lo in range(start, stop, CHUNK_ENTRIES):
        seen[checked_column_ids(matrix.indices, lo, min(lo + CHUNK_ENTRIES, stop), n_cols, rows, "column ids")] = True
    return {s: np.flatnonzero(seen[segments[s]:segments[s + 1]]) + segments[s] for s in keep}


def touched_counts(indptr, indices, row_bounds: list[int], segments: list[int]) -> np.ndarray:
    """(R, S) int64: distinct columns of each row block of Â inside each segment (the rows a receiver
    needs). One pass over the entries, row block by row block. Not collective."""
    seg = np.asarray(segments, dtype=np.int64)
    out = np.zeros((len(row_bounds) - 1, len(seg) - 1), dtype=np.int64)
    n_cols = int(seg[-1])
    for block in range(len(row_bounds) - 1):
        lo, hi = int(indptr[row_bounds[block]]), int(indptr[row_bounds[block + 1]])
        if hi == lo:
            continue
        rows = (row_bounds[block], row_bounds[block + 1])
        parts = [np.unique(checked_column_ids(indices, a, min(a + CHUNK_ENTRIES, hi), n_cols, rows, "column ids"))
                 for a in range(lo, hi, CHUNK_ENTRIES)]
        cols = parts[0] if len(parts) == 1 else np.unique(np.concatenate(parts))
        out[block] = np.bincount(np.searchsorted(seg, cols, side="right") - 1, minlength=len(seg) - 1)
    return out


def expected_touched(block_nnz: np.ndarray, segments: list[int]) -> np.ndarray:
    """(R, S) expected distinct columns per block when its ``block_nnz`` entries fall uniformly on the
    segment's columns (for statistics without the graph)."""
    width = np.diff(np.asarray(segments, dtype=np.float64))[None, :]
    rate = np.log1p(-1.0 / np.maximum(width, 2.0))  # log(1 - 1/w); a 1-column segment is touched by any entry
    rate = np.where(width == 1.0, -np.inf, rate)
    return np.rint(-width * np.expm1(block_nnz * rate)).astype(np.int64)
