"""Sharded arrays read as one, and the 64-bit arithmetic of sharded preparation, tested without allocating
billions: offsets and row ranges past 2^31, counts that overflow int32, keys that would overflow int64."""

from __future__ import annotations

import numpy as np
import pytest

from gridgnn.data.prepared import RowBlockCSR, index_dtype
from gridgnn.data.row_shards import ShardedArray, sharded_indptr
from gridgnn.prepare.rows import operator_values, pattern_block, with_diagonal

BIG = 1 << 31


def test_a_sharded_array_slices_indexes_and_sums_like_the_concatenation():
    rng = np.random.default_rng(0)
    pieces = [rng.normal(size=(k, 3)).astype(np.float32) for k in (4, 0, 7, 2)]
    whole = np.concatenate(pieces)
    array = ShardedArray(pieces)
    assert array.shape == whole.shape and len(array) == 13 and array.dtype == np.float32
    for key in [slice(0, 13), slice(2, 9), slice(4, 4), slice(11, 20), slice(None, None, 3), 5, -1,
                (slice(1, 12), slice(1, 3)), np.array([12, 0, 5, 5]), whole[:, 0] > 0]:
        np.testing.assert_array_equal(array[key], whole[key])
    np.testing.assert_array_equal(np.asarray(array), whole)
    masks = ShardedArray([np.array([True, False]), np.array([True, True, False])])
    assert masks.sum() == 3 and masks.min() == 0 and masks.max() == 1
    with pytest.raises(IndexError):
        array[np.array([13])]


def test_sharded_row_pointers_add_each_shards_offset_in_64_bits():
    local = [np.array([0, 2, 2, 5], dtype=np.int64), np.array([0, 1], dtype=np.int64),
             np.array([0, 3 * BIG, 3 * BIG + 4], dtype=np.int64)]  # a shard of more than 2^32 entries
    indptr = sharded_indptr(local)
    expected = np.array([0, 2, 2, 5, 6, 6 + 3 * BIG, 10 + 3 * BIG], dtype=np.int64)
    np.testing.assert_array_equal(np.asarray(indptr), expected)
    assert indptr[-1] == 10 + 3 * BIG and indptr[4] == 6 and indptr.dtype == np.int64
    np.testing.assert_array_equal(indptr[3:6], expected[3:6])
    np.testing.assert_array_equal(indptr[np.array([6, 0, 4])], expected[[6, 0, 4]])


def test_row_blocks_cut_across_shards_equal_the_matrix():
    import scipy.sparse as sp

    matrix = sp.random(40, 40, density=0.2, format="csr", random_state=1, dtype=np.float32)
    cuts = [0, 9, 10, 31, 40]
    pointers = [matrix.indptr[a:b + 1] - matrix.indptr[a] for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    entries = [(matrix.indptr[a], matrix.indptr[b]) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    sharded = RowBlockCSR(sharded_indptr([p.astype(np.int64) for p in pointers]),
                          ShardedArray([matrix.indices[a:b] for a, b in entries]),
                          ShardedArray([matrix.data[a:b] for a, b in entries]), matrix.shape)
    for r0, r1 in [(0, 40), (5, 12), (9, 10), (30, 31), (12, 12)]:
        assert (sharded[r0:r1] != matrix[r0:r1]).nnz == 0
        assert (sharded[r0:r1, 3:17] != matrix[r0:r1, 3:17]).nnz == 0


def test_a_row_block_past_2_31_of_a_graph_past_2_32_vertices():
    n, r0, r1 = 1 << 33, BIG + 5, BIG + 9
    rows = np.array([r0, r0, r0 + 3, r0 + 1, r0 + 3, r0 + 2], dtype=np.int64)
    cols = np.array([n - 1, 7, BIG + 1, r0 + 1, BIG + 1, 3 * BIG], dtype=np.int64)  # a duplicate, a loop
    block = pattern_block(rows, cols, r0, r1, n)
    np.testing.assert_array_equal(block.indptr, [0, 2, 2, 3, 4])
    np.testing.assert_array_equal(block.indices, [7, n - 1, 3 * BIG, BIG + 1])
    assert block.indices.dtype == np.int64 and index_dtype(n) == np.int64 and index_dtype(BIG - 1) == np.int32
    full = with_diagonal(block)
    np.testing.assert_array_equal(full.indptr, [0, 3, 4, 6, 8])
    np.testing.assert_array_equal(full.indices, [7, r0, n - 1, r0 + 1, r0 + 2, 3 * BIG, BIG + 1, r0 + 3])
    summed = operator_values("mean", block)
    np.testing.assert_array_equal(summed.data, np.array([0.5, 0.5, 1, 1], dtype=np.float32))


def test_pairs_whose_int64_key_would_overflow_are_sorted_instead():
    n = 1 << 62  # (rows in the block) * n overflows int64: the lexsort path
    rows = np.array([5, 3, 5, 3, 4], dtype=np.int64)
    cols = np.array([n - 2, 9, 1, n - 2, 4], dtype=np.int64)  # (4, 4) is a self-loop
    block = pattern_block(np.concatenate([rows, rows]), np.concatenate([cols, cols]), 3, 6, n)
    np.testing.assert_array_equal(block.indptr, [0, 2, 2, 4])
    np.testing.assert_array_equal(block.indices, [9, n - 2, 1, n - 2])


@pytest.mark.parametrize("n", [1 << 20, 1 << 62])  # keys, and pairs where a key would overflow int64
def test_routing_in_two_passes_fills_one_array_with_every_entry(n):
    from prepare_workers import route_worker

    from gridgnn.launch.spawn import run_workers

    r0 = n - 4
    edges = np.array([[n - 4, n - 1], [5, n - 3], [n - 2, n - 2], [5, n - 3], [0, n - 1], [n - 1, n - 4]])
    (indptr, indices, pairs, sent), = run_workers(route_worker, 1, n, edges, (r0, n), timeout_s=60)
    assert pairs == (n == 1 << 62) and sent == 5  # the self-loop dropped at the sender
    np.testing.assert_array_equal(indptr, [0, 1, 2, 2, 4])  # rows n-4, n-3, n-2, n-1 (ids 0 and 5 are others')
    np.testing.assert_array_equal(indices, [n - 1, 5, 0, n - 4])
