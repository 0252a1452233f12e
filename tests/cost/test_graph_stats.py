"""Exact graph statistics for the planner: block nnz counted in bounded chunks, straight from a memory-mapped
prepared graph (no copy of Â's structure), equal to a dense count."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp
from model_helpers import random_stats

import gridgnn.cost.block_stats as block_stats_module
import gridgnn.cost.graph_stats as graph_stats_module
from gridgnn.config import TrainConfig
from gridgnn.cost.epoch_model import ModelSpec
from gridgnn.cost.graph_stats import GraphStats
from gridgnn.cost.rank_cost import nnz_bounds, shape_blocks
from gridgnn.data.prepared import RowBlockCSR, open_prepared, prepare_graph
from gridgnn.errors import DataError
from gridgnn.plan.planner import candidate_shapes, plan
from gridgnn.train.run.auto import graph_stats
from gridgnn.train.run.training import load_graph

ROWS, COLS = [0, 50, 130, 300], [0, 40, 41, 200, 300]


def _dense_counts(adj: sp.csr_matrix, rows, cols, group, num_groups) -> np.ndarray:
    dense = adj.toarray() != 0
    out = np.zeros((len(rows) - 1, num_groups), dtype=np.int64)
    for i in range(len(rows) - 1):
        for j in range(len(cols) - 1):
            out[i, group[j]] += dense[rows[i]:rows[i + 1], cols[j]:cols[j + 1]].sum()
    return out


@pytest.mark.parametrize("chunk", [7, 1 << 22])
def test_prepared_and_in_memory_counts_equal_a_dense_count(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(block_stats_module, "CHUNK_ENTRIES", chunk)  # 7: many chunks per row block
    graph = load_graph(TrainConfig(dataset="csbm:nodes=300"))
    prepared = open_prepared(prepare_graph(graph, tmp_path))
    in_memory, mapped = graph_stats(graph), graph_stats(prepared)
    assert isinstance(mapped.indices, np.memmap)  # read in place, not copied
    norm = sp.csr_matrix((np.asarray(prepared.norm_adj.data), np.asarray(prepared.norm_adj.indices),
                          np.asarray(prepared.norm_adj.indptr)), shape=prepared.norm_adj.shape)
    group = np.array([0, 2, 0, 1])
    expected = _dense_counts(norm, ROWS, COLS, group, 4)
    for stats in (in_memory, mapped):
        assert stats.exact and stats.nnz == norm.nnz
        np.testing.assert_array_equal(stats.grouped_nnz(ROWS, COLS, group, 4), expected)
        np.testing.assert_array_equal(stats.grouped_nnz(ROWS, COLS).sum(axis=1), np.diff(norm.indptr[ROWS]))
    assert expected[:, 3].sum() == 0 and expected.sum() == norm.nnz  # an empty group counts 0


def test_damaged_column_ids_are_a_data_error():
    matrix = RowBlockCSR(np.array([0, 1, 2]), np.array([0, 5]), np.ones(2, dtype=np.float32), (2, 2))

    class _Graph:
        name, features, num_features, num_classes = "damaged", np.zeros((2, 1)), 1, 1

    stats = GraphStats.from_graph(_Graph, normalized_adj=matrix)
    with pytest.raises(DataError, match=r"damaged: column ids of Â outside \[0, 2\) in rows 1..1"):
        stats.grouped_nnz([0, 1, 2], [0, 2])


def test_counting_holds_one_chunk_of_temporaries_not_the_graph(monkeypatch):
    monkeypatch.setattr(block_stats_module, "CHUNK_ENTRIES", 1 << 16)
    n, nnz = 200_000, 4_000_000
    rng = np.random.default_rng(0)
    indptr = np.linspace(0, nnz, n + 1).astype(np.int64)
    indices = rng.integers(0, n, nnz, dtype=np.int32)
    stats = GraphStats("big", n, nnz, 1, 1, None, indptr, indices)
    bounds = [0, n // 3, n // 2, n]
    tracemalloc.start()
    try:
        counts = stats.grouped_nnz(bounds, bounds)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert counts.sum() == nnz
    # materializing the row and column id of every entry (the old way) took 16 bytes per entry, 64 MB here;
    # a chunk's temporaries are ~3 x 8 bytes x 65536
    assert peak < nnz // 2, peak


def _random_stats(n: int = 97, seed: int = 3) -> tuple[sp.csr_matrix, GraphStats]:
    return random_stats(n, density=0.08, seed=seed, features=5, classes=3)


@pytest.mark.parametrize("world_size", [1, 4, 6, 8, 12, 16])
def test_one_counting_pass_prices_every_grid_shape_as_its_own_pass_would(world_size, monkeypatch):
    adj, fresh = _random_stats()
    _, shared = _random_stats()
    shapes = candidate_shapes(world_size)
    passes = []
    original = GraphStats._count
    monkeypatch.setattr(GraphStats, "_count", lambda self, *a: passes.append(1) or original(self, *a))
    shared.count_once(nnz_bounds(shape, adj.shape[0]) for shape in shapes)
    assert len(passes) == 1
    for shape in shapes:
        rows, cols = nnz_bounds(shape, adj.shape[0])
        group = np.arange(len(cols) - 1)
        dense = _dense_counts(adj, rows, cols, group, len(group))
        assert np.array_equal(shared.grouped_nnz(rows, cols), dense)
        a, b = shape_blocks(shape, shared), shape_blocks(shape, fresh)
        assert np.array_equal(a.nnz, b.nnz) and np.array_equal(a.mult_nnz, b.mult_nnz), shape
        assert np.array_equal(a.local_nnz, b.local_nnz) and a.segments == b.segments, shape
    assert len(passes) == 1 + len(shapes)  # `fresh` counted each shape; `shared` never read Â again


def test_plan_reads_the_graph_once_and_ranks_as_before(monkeypatch):
    _, stats = _random_stats(seed=5)
    _, reference = _random_stats(seed=5)
    monkeypatch.setattr(graph_stats_module, "TABLE_CELLS", 0)  # no table: every shape counts on its own
    before = plan(ModelSpec(5, 3), reference, 8)
    assert reference._table is None
    monkeypatch.setattr(graph_stats_module, "TABLE_CELLS", 1 << 22)
    passes = []
    original = GraphStats._count
    monkeypatch.setattr(GraphStats, "_count", lambda self, *a: passes.append(1) or original(self, *a))
    after = plan(ModelSpec(5, 3), stats, 8)
    assert len(passes) == 1
    assert [e.to_dict() for e in after.entries] == [e.to_dict() for e in before.entries]


def test_bounds_off_the_table_are_counted_directly():
    adj, stats = _random_stats()
    stats.count_once([([0, 50, 97], [0, 30, 97])])
    rows, cols = [0, 20, 97], [0, 30, 60, 97]  # 20 and 60 are not on the table
    group = np.arange(3)
    assert np.array_equal(stats.grouped_nnz(rows, cols), _dense_counts(adj, rows, cols, group, 3))
