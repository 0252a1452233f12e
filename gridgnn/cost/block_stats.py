"""Non-zeros per block of a partitioned sparse matrix: the graph statistics the cost model needs."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


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
