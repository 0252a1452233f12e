"""The check that a prepared folder's original vertex ids are distinct (`gridgnn.data.prepared._distinct`): by
pieces for increasing sharded ids, by marks a chunk at a time for ids within a narrow range (a random
reordering of them), by a sort otherwise; each finds a repeat within one chunk, across chunks and across pieces,
and names it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import gridgnn.data.prepared as prepared
from gridgnn.data.row_shards import ShardedArray
from gridgnn.errors import DataError

PATH = Path("folder/vertex_ids.npy")


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    monkeypatch.setattr(prepared, "ID_CHUNK", 7)  # several chunks per piece


def _shuffled(n: int, base: int = 0, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).permutation(n).astype(np.int64) + base


@pytest.mark.parametrize("base", [0, 5_000_000_000])  # ids past 2^32 too
def test_distinct_ids_pass_as_an_array_and_as_shuffled_pieces(base):
    ids = _shuffled(50, base)
    assert prepared._distinct(ids, PATH) is ids
    sharded = ShardedArray([ids[:20], ids[20:33], ids[33:]])
    assert prepared._distinct(sharded, PATH) is sharded


@pytest.mark.parametrize("where", ["one chunk", "two chunks", "two pieces"])
@pytest.mark.parametrize("sparse", [False, True])
def test_a_repeated_id_is_named(where, sparse):
    ids = _shuffled(50) * (1000 if sparse else 1)  # sparse: a range far wider than the count, sorted whole
    first, second = {"one chunk": (1, 4), "two chunks": (2, 30), "two pieces": (3, 45)}[where]
    ids[second] = ids[first]
    for given in (ids, ShardedArray([ids[:40], ids[40:]])):
        with pytest.raises(DataError, match=f"original vertex id {ids[first]} is given to more than one vertex"):
            prepared._distinct(given, PATH)


def test_narrow_ids_are_checked_by_marks_not_sorted_whole(monkeypatch):
    def no_sort(*args, **kwargs):
        raise AssertionError("sorted whole")

    ids = ShardedArray([_shuffled(30, seed=1), _shuffled(30, base=30, seed=2)])
    real_sort = np.sort
    monkeypatch.setattr(np, "sort", lambda a, *rest, **kw: no_sort() if len(a) > 7 else real_sort(a, *rest, **kw))
    assert prepared._distinct(ids, PATH) is ids
