"""The rows two 1D ranks must exchange, by minimum vertex cover (pre- and post-aggregation; pure index math,
not collective).

On a 1D grid rank q computes ``Y[R_q] = Σ_p Â[R_q, C_p] X[C_p]``, where rank p owns the rows ``C_p`` of X. For
one ordered pair (p sends to q), the *cut* is the bipartite graph of the non-zeros ``(i, j)`` of
``Â[R_q, C_p]``: receiver rows i, sender columns j. Each cut entry must be served one of two ways:

- *post-aggregation*: p sends the row ``X[j]`` and q multiplies (what ``--comm sparse`` does for every j);
- *pre-aggregation*: p, holding the entries, sends the partial sum ``Σ_j Â[i, j] X[j]`` of row i.

A set of receiver rows and sender columns that touches every entry of the cut is a *vertex cover*; the rows
the pair exchanges are its size. The smallest is as large as a maximum matching of the cut (König), and
`pair_cover` builds it from one (`scipy.sparse.csgraph.maximum_bipartite_matching`): the rows not reachable
from an unmatched row by alternating paths, and the columns that are. An entry whose column is in the cover
goes to the receiver (post); the others have their row in the cover (pre).

`cover_counts` gives, for a vertex partition, the rows every rank receives per forward SpMM under plain
post-aggregation (the touched columns) and under the per-pair cover.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import maximum_bipartite_matching


@dataclass(frozen=True)
class PairCover:
    """The cover of one pair's cut: ``columns`` (sender-local column indices whose rows of X are sent) and
    ``rows`` (receiver-local row indices whose partial sums are sent); ``post_rows`` is how many rows plain
    post-aggregation sends (the touched columns)."""

    columns: np.ndarray
    rows: np.ndarray
    post_rows: int

    @property
    def size(self) -> int:
        """Rows the pair exchanges under the cover."""
        return len(self.columns) + len(self.rows)


def pair_cover(cut: sp.csr_matrix) -> PairCover:
    """The minimum vertex cover of the bipartite graph of ``cut``'s non-zeros (rows x columns, CSR)."""
    cut = sp.csr_matrix(cut)
    if cut.nnz and not cut.data.all():  # explicit zeros are no entries of the cut
        cut = cut.copy()
        cut.eliminate_zeros()
    if cut.nnz == 0:
        empty = np.zeros(0, dtype=np.int64)
        return PairCover(empty, empty, 0)
    n_rows, n_cols = cut.shape
    touched = int(np.count_nonzero(np.bincount(cut.indices, minlength=n_cols)))
    pattern = sp.csr_matrix((np.ones(cut.nnz, dtype=np.int8), cut.indices, cut.indptr), shape=cut.shape)
    match_of_row = maximum_bipartite_matching(pattern, perm_type="column")  # row -> its column, or -1
    match_of_col = np.full(n_cols, -1, dtype=np.int64)
    matched = match_of_row >= 0
    match_of_col[match_of_row[matched]] = np.flatnonzero(matched)
    has_entries = np.diff(cut.indptr) > 0
    row_seen = (~matched) & has_entries  # alternating paths start at unmatched rows with entries
    col_seen = np.zeros(n_cols, dtype=bool)
    frontier = np.flatnonzero(row_seen)
    while frontier.size:
        cols = cut.indices[_entries_of_rows(cut.indptr, frontier)]
        cols = cols[~col_seen[cols]]  # repeats are harmless: marks, not lists, decide what is new
        col_seen[cols] = True
        rows = match_of_col[cols]  # every reached column is matched (else the matching would grow)
        rows = rows[(rows >= 0) & ~row_seen[rows]]
        row_seen[rows] = True
        frontier = np.unique(rows)
    cover_rows = np.flatnonzero(has_entries & ~row_seen)
    cover_cols = np.flatnonzero(col_seen)
    return PairCover(cover_cols.astype(np.int64), cover_rows.astype(np.int64), touched)


def _entries_of_rows(indptr: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The positions of the stored entries of ``rows`` (a CSR's ``indptr``), concatenated, in one vectorized
    pass (the alternating-path search visits thousands of rows per step)."""
    starts, ends = indptr[rows].astype(np.int64), indptr[rows + 1].astype(np.int64)
    counts = ends - starts
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
    return np.arange(total, dtype=np.int64) + offsets


def covered_columns(cut: sp.csr_matrix, columns: np.ndarray) -> sp.csr_matrix:
    """The receiver's side of a pair: ``cut[:, columns]`` (n_rows x len(columns), CSR, explicit zeros dropped)
    for ``columns`` ascending, by one mask over the stored entries (no fancy column indexing)."""
    position = np.full(cut.shape[1], -1, dtype=np.int64)
    position[columns] = np.arange(len(columns))
    keep = (position[cut.indices] >= 0) & (cut.data != 0)
    return _kept_entries(cut, keep, position[cut.indices[keep]], len(columns))


def uncovered_entries(cut: sp.csr_matrix, rows: np.ndarray, columns: np.ndarray) -> sp.csr_matrix:
    """The sender's side of a pair: rows ``rows`` of ``cut`` without the entries of ``columns`` (len(rows) x
    n_cols, CSR, explicit zeros dropped): the entries whose partial sums it sends."""
    picked = cut[rows]
    dropped = np.zeros(cut.shape[1], dtype=bool)
    dropped[columns] = True
    keep = ~dropped[picked.indices] & (picked.data != 0)
    return _kept_entries(picked, keep, picked.indices[keep], cut.shape[1])


def _kept_entries(matrix: sp.csr_matrix, keep: np.ndarray, indices: np.ndarray, n_cols: int) -> sp.csr_matrix:
    """The CSR of ``matrix``'s entries where ``keep`` (one flag per stored entry), with column ids ``indices``."""
    kept_before = np.concatenate([[0], np.cumsum(keep)])
    pointers = kept_before[matrix.indptr]
    return sp.csr_matrix((matrix.data[keep], indices, pointers), shape=(matrix.shape[0], n_cols))


def column_block_cuts(block_row: sp.spmatrix, bounds: Sequence[int], blocks: Iterable[int]) -> dict[int, sp.csr_matrix]:
    """The cuts of ``block_row`` (one row block's rows of the matrix, all n columns) with each column block of
    ``blocks`` (``bounds[j]:bounds[j + 1]``): CSR with local column ids, duplicates summed and sorted ids (one
    pattern for whoever covers it). The block row is converted to CSC once and sliced."""
    by_columns = sp.csc_matrix(block_row)
    return {j: canonical(by_columns[:, bounds[j]:bounds[j + 1]]) for j in blocks}


def canonical(matrix) -> sp.csr_matrix:
    """``matrix`` as CSR with duplicates summed and sorted column ids."""
    matrix = sp.csr_matrix(matrix)
    matrix.sum_duplicates()
    matrix.sort_indices()
    return matrix


def block_row_covers(block_row: sp.spmatrix, bounds: list[int], q: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(post, cover, pre): (R,) int64, entry p for the pair "block p sends to block q", from block q's rows of the
    matrix (``block_row``, all n columns): its touched columns, its minimum cover (the rows it exchanges), and
    the entries whose partial sums the sender computes (`uncovered_entries`); 0 for p = q."""
    parts = len(bounds) - 1
    post, cover, pre = (np.zeros(parts, dtype=np.int64) for _ in range(3))
    for p, cut in column_block_cuts(block_row, bounds, (p for p in range(parts) if p != q)).items():
        found = pair_cover(cut)
        post[p], cover[p] = found.post_rows, found.size
        pre[p] = uncovered_entries(cut, found.rows, found.columns).nnz
    return post, cover, pre


def pair_matrices(adj: sp.csr_matrix, bounds: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(post, cover): (R, R) int64, entry [i, j] the rows the pair "block j sends to block i" exchanges in one
    forward SpMM of ``adj`` (n x n) on the row blocks ``bounds`` (R + 1 vertex boundaries): its touched columns,
    and its minimum cover (0 on the diagonal); one block row at a time (`block_row_covers`)."""
    adj = sp.csr_matrix(adj)
    rows = [block_row_covers(adj[bounds[q]:bounds[q + 1]], bounds, q)[:2] for q in range(len(bounds) - 1)]
    return np.array([r[0] for r in rows], dtype=np.int64), np.array([r[1] for r in rows], dtype=np.int64)


def cover_counts(adj: sp.csr_matrix, bounds: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(post, cover): (P,) rows each rank receives in one forward SpMM of ``adj`` (n x n) on the 1D row blocks
    ``bounds`` (P + 1 vertex boundaries), by post-aggregation and by the per-pair minimum cover."""
    post, cover = pair_matrices(adj, bounds)
    return post.sum(axis=1), cover.sum(axis=1)
