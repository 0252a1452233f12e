"""Cut one process's panels out of a row block of Â without materializing the row block.

A rank of 1.5D, 2D or 3D keeps a few column panels of its row block ``Â[r0:r1, :]`` and must know the nnz of
the panels it will receive. Slicing ``adj[r0:r1]`` first and then each ``[:, c0:c1]`` holds the whole row block
(n/pr rows of a graph that may not fit twice) plus a temporary copy of every panel. `cut_panels` instead
reads the row block's stored entries in chunks of at most `CHUNK_ENTRIES`, counts every panel's entries and
copies out only the panels it keeps, so the set-up peak beyond the kept panels is one chunk. Not collective.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import scipy.sparse as sp

from gridgnn.errors import DataError

CHUNK_ENTRIES = 1 << 22
"""Stored entries read at once (4M: 16-48 MiB of temporaries per chunk)."""


def cut_panels(matrix, rows: tuple[int, int], panels: Sequence[tuple[int, int]], keep: Iterable[int], *,
               source: str | None = None) -> tuple[list[int], dict[int, sp.csr_matrix]]:
    """Column panels of the row block ``matrix[r0:r1, :]``.

    ``matrix``: CSR-like (``indptr``, ``indices``, ``data``, ``shape``): a scipy CSR matrix or a memory-mapped
    `gridgnn.data.prepared.RowBlockCSR`. ``panels``: disjoint column ranges ``(c0, c1)`` sorted by ``c0``
    (they need not cover every column; entries in no panel are skipped). ``keep``: indices into ``panels``.

    Returns ``(nnz, kept)``: ``nnz[k]`` stored entries of panel k, and ``kept[k]`` the panel
    ``matrix[r0:r1, c0:c1]`` as scipy CSR ((r1 - r0) x (c1 - c0), local column ids, each row's entries in
    their stored order) for every k in ``keep``. Raises `DataError` on decreasing row pointers or column ids
    outside the matrix (a damaged prepared graph), naming ``source`` (default: the matrix's own ``source``).
    """
    source = source or getattr(matrix, "source", "adjacency")
    r0, r1 = rows
    n_rows, n_cols = r1 - r0, int(matrix.shape[1])
    starts = np.array([c0 for c0, _ in panels], dtype=np.int64)
    ends = np.array([c1 for _, c1 in panels], dtype=np.int64)
    if np.any(ends < starts) or np.any(starts[1:] < ends[:-1]):
        raise ValueError(f"panels must be disjoint ranges sorted by start, got {list(panels)}")
    keep = sorted(set(keep))
    indptr = np.asarray(matrix.indptr[r0:r1 + 1], dtype=np.int64)
    if np.any(np.diff(indptr) < 0):
        raise DataError(f"{source}: row pointers decrease in rows {r0}..{r1 - 1}")
    chunks = _row_chunks(indptr, CHUNK_ENTRIES)
    where = (r0, n_cols, source)
    # pass 1 counts every panel's entries; pass 2 copies the kept panels into arrays of their final size, so
    # nothing is held twice
    nnz = np.zeros(len(panels), dtype=np.int64)
    for _a, _b, _cols, panel in _panel_ids(matrix, indptr, chunks, starts, ends, where):
        nnz += np.bincount(panel, minlength=len(panels) + 1)[:len(panels)]
    index_dtype = np.int32 if max(int(nnz.max(initial=0)), n_cols) < 2**31 - 1 else np.int64
    value_dtype = np.asarray(matrix.data[:0]).dtype
    kept_cols = {k: np.empty(nnz[k], dtype=index_dtype) for k in keep}
    kept_values = {k: np.empty(nnz[k], dtype=value_dtype) for k in keep}
    row_counts = {k: np.zeros(n_rows, dtype=np.int64) for k in keep}
    filled = dict.fromkeys(keep, 0)
    is_kept = np.zeros(len(panels) + 1, dtype=bool)
    is_kept[keep] = True
    for a, b, cols, panel in (_panel_ids(matrix, indptr, chunks, starts, ends, where) if keep else ()):
        lo = int(indptr[a])
        selected = np.flatnonzero(is_kept[panel])
        # the kept entries grouped by panel (ascending, as ``keep``), each group in row-major order
        grouped = selected[np.argsort(panel[selected], kind="stable")]
        sizes = np.bincount(panel[selected], minlength=len(panels))
        chunk_pointers = indptr[a:b + 1] - lo
        offset = 0
        for k in keep:
            positions = grouped[offset:offset + sizes[k]]
            offset += sizes[k]
            end = filled[k] + positions.size
            kept_cols[k][filled[k]:end] = cols[positions] - starts[k]
            kept_values[k][filled[k]:end] = matrix.data[lo + positions]
            filled[k] = end
            rows_of = np.searchsorted(chunk_pointers, positions, side="right") - 1
            row_counts[k][a:b] += np.bincount(rows_of, minlength=b - a)
    kept = {}
    for k in keep:
        pointers = np.concatenate([[0], np.cumsum(row_counts[k])]).astype(index_dtype)
        shape = (n_rows, int(ends[k] - starts[k]))
        kept[k] = sp.csr_matrix((kept_values[k], kept_cols[k], pointers), shape=shape)
    return [int(v) for v in nnz], kept


def checked_column_ids(indices, lo: int, hi: int, n_cols: int, rows: tuple[int, int], label: str) -> np.ndarray:
    """``indices[lo:hi]`` (the stored entries of global rows ``rows[0]..rows[1] - 1``) as int64, or `DataError`
    ``"<label> outside [0, n_cols) in rows a..b"`` when one lies outside the matrix (a damaged prepared graph)."""
    cols = np.asarray(indices[lo:hi], dtype=np.int64)
    if cols.size and (cols.min() < 0 or cols.max() >= n_cols):
        raise DataError(f"{label} outside [0, {n_cols}) in rows {rows[0]}..{rows[1] - 1}")
    return cols


def _panel_ids(matrix, indptr: np.ndarray, chunks: list[tuple[int, int]], starts: np.ndarray, ends: np.ndarray,
               where: tuple[int, int, str]):
    """Per row chunk [a, b): its column ids (int64) and the panel of each entry (``len(starts)`` when in none)."""
    r0, n_cols, source = where
    for a, b in chunks:
        lo, hi = int(indptr[a]), int(indptr[b])
        cols = checked_column_ids(matrix.indices, lo, hi, n_cols, (r0 + a, r0 + b), f"{source}: column ids")
        panel = np.searchsorted(starts, cols, side="right") - 1
        inside = panel >= 0
        inside[inside] = cols[inside] < ends[panel[inside]]
        panel[~inside] = len(starts)
        yield a, b, cols, panel


def _row_chunks(indptr: np.ndarray, budget: int) -> list[tuple[int, int]]:
    """Consecutive local row ranges [a, b) holding about ``budget`` stored entries each (at least one row)."""
    n_rows = indptr.size - 1
    if n_rows == 0:
        return []
    targets = np.arange(indptr[0] + budget, indptr[-1], budget)
    cuts = np.unique(np.concatenate([[0], np.searchsorted(indptr, targets, side="right") - 1, [n_rows]]))
    cuts = cuts[(cuts >= 0) & (cuts <= n_rows)]
    if cuts[0] != 0:
        cuts = np.concatenate([[0], cuts])
    return [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:], strict=True) if b > a]


def csr_structure(matrix) -> tuple[np.ndarray, np.ndarray] | None:
    """``(indptr, indices)`` of a sparse matrix read by rows: a scipy sparse matrix (converted to CSR when it is
    not) or a memory-mapped `gridgnn.data.prepared.RowBlockCSR` (as it is); None for a dense array."""
    if sp.issparse(matrix):
        matrix = matrix if matrix.format == "csr" else sp.csr_matrix(matrix)
        return matrix.indptr, matrix.indices
    if hasattr(matrix, "indptr") and hasattr(matrix, "indices"):
        return matrix.indptr, matrix.indices
    return None


BITMAP_RATIO = 32
"""A block of at least n / `BITMAP_RATIO` entries marks its columns in an n-byte bitmap (one pass, no sort);
a smaller one sorts them (its entries are then few beside n)."""


def block_columns(indptr, indices, rows: tuple[int, int], n_cols: int) -> np.ndarray:
    """The sorted distinct column ids (int64) of the rows [a, b) of a CSR structure (any integer dtype,
    memory-mapped or sharded), read `CHUNK_ENTRIES` at a time: marked in a bitmap of the n columns, or, for a
    block with few entries beside n, sorted; `DataError` for a column id outside [0, n_cols). Not collective."""
    a, b = rows
    lo, hi = int(indptr[a]), int(indptr[b])
    chunks = (checked_column_ids(indices, s, min(s + CHUNK_ENTRIES, hi), n_cols, rows, "column ids")
              for s in range(lo, hi, CHUNK_ENTRIES))
    if (hi - lo) * BITMAP_RATIO >= n_cols:
        seen = np.zeros(n_cols, dtype=bool)
        for cols in chunks:
            seen[cols] = True
        return np.flatnonzero(seen).astype(np.int64)
    columns = np.sort(np.concatenate([np.zeros(0, dtype=np.int64), *chunks]))
    keep = np.ones(columns.size, dtype=bool)
    keep[1:] = columns[1:] != columns[:-1]
    return columns[keep]


def block_row_columns(indptr, indices, row_bounds: Sequence[int], n_cols: int) -> list[np.ndarray]:
    """For each block of rows ``row_bounds[r]:row_bounds[r + 1]`` of a CSR structure of ``n_cols`` columns, the
    sorted distinct column ids (int64) its rows hold (`block_columns`). Not collective."""
    return [block_columns(indptr, indices, (int(a), int(b)), n_cols)
            for a, b in zip(row_bounds[:-1], row_bounds[1:], strict=True)]
