"""Sparse communication: which rows of the dense operand each process needs, stage by stage (pure).

The stages themselves (row blocks, segments, each segment's root on ``row`` and who handles it) are
`gridgnn.cost.stages`, shared with the dense algorithms; this module adds what the sparse variants
(``--comm sparse``) need on top of them: the index sets. The distributed SpMMs (`gridgnn.spmm.sparse_15d`,
`gridgnn.spmm.sparse_summa`) build their exchanges from it and the cost model (`gridgnn.cost.rank_cost`)
prices them from it, so both see the same index sets.

An exchange moves rows of X along one grid axis (``row`` on every algorithm). A *receiver* holds a block of
Â's rows (``row_bounds``); the columns of Â are cut into *segments* (``segments``), each held as rows of X by
one process of the axis (``root``). The receiver needs, of segment s, exactly the columns its Â rows touch
(`touched_columns`): those rows travel, nothing else. In backward the same sets travel the other way (the
rows of ``Â[rows, s]ᵀ G`` that can be non-zero), summed at the root.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from gridgnn.sparse.cut import CHUNK_ENTRIES, block_columns, checked_column_ids


def touched_columns(matrix, rows: tuple[int, int], segments: list[int], keep: list[int]) -> dict[int, np.ndarray]:
    """Global column ids (sorted, int64) of the row block ``matrix[r0:r1, :]`` inside each kept segment.

    ``matrix``: CSR-like (``indptr``, ``indices``, ``shape``), scipy or memory-mapped; read in chunks
    (`gridgnn.sparse.cut.block_columns`). Not collective.
    """
    columns = block_columns(matrix.indptr, matrix.indices, rows, int(matrix.shape[1]))
    return {s: columns[np.searchsorted(columns, segments[s]):np.searchsorted(columns, segments[s + 1])]
            for s in keep}


@dataclass(frozen=True)
class ColumnMajor:
    """Â's stored entries in column-major (CSC) order, rows ascending within each column: ``rows`` and ``cols``
    (int32, one per entry, same order). 8 bytes per stored entry."""

    rows: np.ndarray
    cols: np.ndarray


def column_major(indptr, indices, n_cols: int) -> ColumnMajor:
    """`ColumnMajor` of the CSR structure (``indptr``, ``indices``: any integer dtype, memory-mapped arrays
    read once); `DataError` on a column id outside ``[0, n_cols)``. Not collective."""
    n_rows, nnz = len(indptr) - 1, int(indptr[-1])
    for lo in range(0, nnz, CHUNK_ENTRIES):
        checked_column_ids(indices, lo, min(lo + CHUNK_ENTRIES, nnz), n_cols, (0, n_rows), "column ids")
    pattern = sp.csr_matrix((np.ones(nnz, dtype=np.int8), np.asarray(indices, dtype=np.int32),
                             np.asarray(indptr, dtype=np.int64)), shape=(n_rows, n_cols))
    csc = pattern.tocsc()  # scipy fills each column's rows in row order: ascending
    cols = np.repeat(np.arange(n_cols, dtype=np.int32), np.diff(csc.indptr))
    return ColumnMajor(np.asarray(csc.indices, dtype=np.int32), cols)


def touched_counts(columns: ColumnMajor, row_bounds: list[int], segments: list[int]) -> np.ndarray:
    """(R, S) int64: distinct columns of each row block of Â inside each segment (the rows a receiver
    needs). Vectorized over the entries in column order: within a column the rows ascend, so a row block's
    entries form one run, and a run's first entry marks one distinct (block, column) pair. Not collective."""
    num_rows, num_segments = len(row_bounds) - 1, len(segments) - 1
    block_of_row = np.repeat(np.arange(num_rows, dtype=np.int32), np.diff(np.asarray(row_bounds)))
    block = block_of_row[columns.rows]
    first = np.ones(block.size, dtype=bool)
    first[1:] = (block[1:] != block[:-1]) | (columns.cols[1:] != columns.cols[:-1])
    segment_of_col = np.repeat(np.arange(num_segments, dtype=np.int64), np.diff(np.asarray(segments)))
    keys = block[first].astype(np.int64) * num_segments + segment_of_col[columns.cols[first]]
    return np.bincount(keys, minlength=num_rows * num_segments).reshape(num_rows, num_segments)


def expected_touched(block_nnz: np.ndarray, segments: list[int]) -> np.ndarray:
    """(R, S) expected distinct columns per block when its ``block_nnz`` entries fall uniformly on the
    segment's columns (for statistics without the graph)."""
    width = np.diff(np.asarray(segments, dtype=np.float64))[None, :]
    rate = np.log1p(-1.0 / np.maximum(width, 2.0))  # log(1 - 1/w); a 1-column segment is touched by any entry
    rate = np.where(width == 1.0, -np.inf, rate)
    block_nnz = np.asarray(block_nnz, dtype=np.float64)
    exponent = np.zeros(np.broadcast_shapes(block_nnz.shape, rate.shape))
    np.multiply(block_nnz, rate, out=exponent, where=block_nnz > 0)  # an empty block touches nothing (not 0 x -inf)
    return np.rint(-width * np.expm1(exponent)).astype(np.int64)


def slice_pairs(indptr, indices, rows: tuple[int, int], segments: list[int], slices: int) -> np.ndarray:
    """The distinct (row, depth slice) pairs of the rows ``[r0, r1)`` of the CSR structure ``indptr``,
    ``indices`` (n x n, the columns cut by ``segments``), as sorted int64 keys
    ``row * slices + slice``: row u has a stored entry in a column of segment s, and slice ``s % slices``
    holds that segment (3D: segment ``k * d + l`` is sub-block S[k][l], run by depth slice l). These are the
    rows a depth slice's partial product can make non-zero (`gridgnn.spmm.depth_rows`, sparse 3D's depth
    exchange). The arrays may be memory-mapped; they are read in chunks of `CHUNK_ENTRIES`; the pairs are
    marked in a bitmap of (r1 - r0) x slices bytes when that is at most `PAIR_BITMAP_BYTES`, else sorted
    out chunk by chunk. Not collective.
    """
    r0, r1 = rows
    n_cols = int(segments[-1])
    slice_of = np.repeat(np.arange(len(segments) - 1, dtype=np.int64) % slices, np.diff(np.asarray(segments)))
    all_indices, indptr = indices, np.asarray(indptr[r0:r1 + 1], dtype=np.int64)
    bitmap = np.zeros((r1 - r0) * slices, dtype=bool) if (r1 - r0) * slices <= PAIR_BITMAP_BYTES else None
    keys = []
    for lo in range(int(indptr[0]), int(indptr[-1]), CHUNK_ENTRIES):
        hi = min(lo + CHUNK_ENTRIES, int(indptr[-1]))
        cols = checked_column_ids(all_indices, lo, hi, n_cols, rows, "column ids")
        first = np.searchsorted(indptr, lo, side="right") - 1  # the row of entry lo (relative to r0)
        last = np.searchsorted(indptr, hi - 1, side="right") - 1
        counts = np.diff(np.clip(indptr[first:last + 2], lo, hi))
        chunk = np.repeat(np.arange(first, last + 1, dtype=np.int64), counts) * slices + slice_of[cols]
        if bitmap is not None:
            bitmap[chunk] = True
        else:
            keys.append(np.unique(chunk))
    if bitmap is not None:
        local = np.flatnonzero(bitmap)
    else:
        local = np.unique(np.concatenate(keys)) if keys else np.zeros(0, dtype=np.int64)
    return local + r0 * slices


PAIR_BITMAP_BYTES = 1 << 27
"""Largest (rows x slices) bitmap `slice_pairs` marks pairs in (128 MiB); above it, it sorts."""


def slice_counts(indptr, indices, segments: list[int], slices: int) -> np.ndarray:
    """(S, slices) int64: rows of each segment (as a block of rows) with an entry in each depth slice's
    columns (`slice_pairs` over the whole matrix, counted). Not collective."""
    keys = slice_pairs(indptr, indices, (0, len(indptr) - 1), segments, slices)
    segment_of_row = np.repeat(np.arange(len(segments) - 1, dtype=np.int64), np.diff(np.asarray(segments)))
    flat = segment_of_row[keys // slices] * slices + keys % slices
    return np.bincount(flat, minlength=(len(segments) - 1) * slices).reshape(len(segments) - 1, slices)
