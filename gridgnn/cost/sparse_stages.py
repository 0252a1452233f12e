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

import numpy as np

from gridgnn.sparse.cut import CHUNK_ENTRIES, checked_column_ids


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
