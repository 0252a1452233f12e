"""The per-pair minimum vertex cover of a 1D cut (`gridgnn.sparse.cover`): it covers every entry, it is as
small as a maximum matching (König) and as the brute-force minimum on small cuts, and never larger than plain
post-aggregation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import maximum_bipartite_matching

from gridgnn.partition import block_bounds
from gridgnn.sparse.cover import cover_counts, covered_columns, pair_cover, uncovered_entries


def _covers(cut: sp.csr_matrix, rows, cols) -> bool:
    coo = cut.tocoo()
    return bool(np.all(np.isin(coo.row, rows) | np.isin(coo.col, cols)))


def _brute_minimum(cut: sp.csr_matrix) -> int:
    m, n = cut.shape
    for size in range(m + n + 1):
        for chosen in itertools.combinations(range(m + n), size):
            rows = [v for v in chosen if v < m]
            cols = [v - m for v in chosen if v >= m]
            if _covers(cut, rows, cols):
                return size
    raise AssertionError("unreachable")


@pytest.mark.parametrize("seed", range(12))
def test_the_cover_is_a_minimum_cover_of_every_cut(seed):
    rng = np.random.default_rng(seed)
    m, n = rng.integers(1, 6, size=2)
    cut = sp.random(m, n, density=rng.uniform(0.1, 0.8), random_state=seed, format="csr")
    found = pair_cover(cut)
    assert _covers(cut, found.rows, found.columns)
    assert found.size == _brute_minimum(cut)
    assert found.post_rows == len(np.unique(cut.indices)) >= found.size


def test_a_hub_row_is_sent_as_one_partial_sum_and_a_hub_column_as_one_row():
    hub_row = sp.csr_matrix(np.array([[1, 1, 1, 1, 1], [0, 0, 0, 0, 0]], dtype=np.float32))
    found = pair_cover(hub_row)
    assert found.rows.tolist() == [0] and found.columns.size == 0 and found.post_rows == 5
    hub_col = sp.csr_matrix(np.array([[1, 0], [1, 0], [1, 0]], dtype=np.float32))
    found = pair_cover(hub_col)
    assert found.columns.tolist() == [0] and found.rows.size == 0


def test_cover_counts_equal_matchings_on_a_larger_graph():
    adj = sp.random(300, 300, density=0.03, random_state=3, format="csr")
    bounds = block_bounds(300, 4)
    post, cover = cover_counts(adj, bounds)
    for q in range(4):
        rows = adj[bounds[q]:bounds[q + 1]]
        touched = matched = 0
        for p in range(4):
            if p != q:
                cut = sp.csr_matrix(rows[:, bounds[p]:bounds[p + 1]])
                touched += len(np.unique(cut.indices))
                pattern = sp.csr_matrix((np.ones(cut.nnz), cut.indices, cut.indptr), shape=cut.shape)
                matched += int((maximum_bipartite_matching(pattern, perm_type="column") >= 0).sum())
        assert post[q] == touched and cover[q] == matched <= touched
    assert (cover < post).any()


@pytest.mark.parametrize("seed", range(6))
def test_the_two_sides_of_a_pair_split_its_entries_between_them(seed):
    """`covered_columns` (the receiver's entries: cover columns, renumbered in cover order) and
    `uncovered_entries` (the sender's: cover rows without those columns) equal scipy's slicing, drop explicit
    zeros, and together hold every entry of the cut exactly once."""
    cut = sp.random(30, 25, density=0.15, random_state=seed, format="csr")
    cut.data[::7] = 0.0  # explicit zeros: no entries of the cut
    found = pair_cover(cut)
    receiver, sender = covered_columns(cut, found.columns), uncovered_entries(cut, found.rows, found.columns)
    dense = cut.toarray()
    np.testing.assert_array_equal(receiver.toarray(), dense[:, found.columns])
    kept = dense[found.rows].copy()
    kept[:, found.columns] = 0
    np.testing.assert_array_equal(sender.toarray(), kept)
    assert np.all(receiver.data != 0) and np.all(sender.data != 0) and receiver.has_sorted_indices
    assert receiver.nnz + sender.nnz == np.count_nonzero(dense)
    placed = np.zeros_like(dense)
    placed[:, found.columns] += receiver.toarray()
    placed[found.rows] += sender.toarray()
    np.testing.assert_array_equal(placed, dense)
