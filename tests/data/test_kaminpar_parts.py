"""KaMinPar as the partitioner of ``--reorder metis|metis-nnz`` for graphs METIS cannot fit in memory: the rule,
the ParHIP file it reads, balanced and deterministic parts of a quality near METIS's, and one line without it."""

from __future__ import annotations

import builtins

import numpy as np
import pytest

from gridgnn.data import metis
from gridgnn.data.generators import csbm
from gridgnn.data.kaminpar_parts import write_parhip
from gridgnn.data.reorder import symmetric_pattern, vertex_order
from gridgnn.errors import ConfigError

kaminpar = pytest.importorskip("kaminpar")


@pytest.fixture(scope="module")
def sym():
    return symmetric_pattern(csbm(nodes=3000, classes=6, avg_degree=12, seed=3).adj)


def cut(sym, membership: np.ndarray) -> int:
    rows = np.repeat(np.arange(sym.shape[0]), np.diff(sym.indptr))
    return int((membership[rows] != membership[sym.indices]).sum() // 2)


def test_the_parhip_file_holds_the_pattern_and_the_weights(tmp_path, sym):
    weights = np.arange(1, sym.shape[0] + 1)
    write_parhip(tmp_path / "g.parhip", sym, weights)
    graph = kaminpar.load_graph(str(tmp_path / "g.parhip"), kaminpar.GraphFileFormat.PARHIP)
    assert (graph.n(), graph.m()) == (sym.shape[0], sym.nnz)
    for v in (0, 17, sym.shape[0] - 1):
        assert sorted(u for u, _ in graph.neighbors(v)) == sorted(sym.indices[sym.indptr[v]:sym.indptr[v + 1]])
        assert graph.node_weight(v) == v + 1


def test_metis_runs_while_it_fits_and_kaminpar_beyond(monkeypatch, sym):
    monkeypatch.setattr(metis, "available_memory_bytes", lambda: metis.METIS_BYTES_PER_ENTRY * sym.nnz)
    assert metis.metis_fits(sym)
    by_metis = metis.membership(sym, 8)
    monkeypatch.setattr(metis, "available_memory_bytes", lambda: metis.METIS_BYTES_PER_ENTRY * sym.nnz - 1)
    assert not metis.metis_fits(sym)
    first, again = metis.membership(sym, 8), metis.membership(sym, 8)
    np.testing.assert_array_equal(first, again)  # seeded, one thread: deterministic
    assert not np.array_equal(first, by_metis)  # another partitioner ran
    sizes = np.bincount(first, minlength=8)
    assert sizes.min() > 0 and sizes.max() <= 1.03 * sym.shape[0] / 8 + 1
    assert cut(sym, first) <= 1.3 * cut(sym, by_metis)  # a cut of METIS's quality (6 planted classes)
    weights = 1 + np.diff(sym.indptr)  # metis-nnz's weights: balanced on them, not on vertices
    weighted = metis.membership(sym, 8, weights)
    per_part = np.bincount(weighted, weights=weights, minlength=8)
    assert per_part.max() <= 1.03 * weights.sum() / 8 + weights.max()


def test_the_orders_follow_the_fallback_parts(monkeypatch):
    graph = csbm(nodes=2000, classes=4, seed=1)
    monkeypatch.setattr(metis, "available_memory_bytes", lambda: 0)
    order, bounds = vertex_order(graph.adj, "metis-nnz", 4)
    assert sorted(order.tolist()) == list(range(2000)) and bounds[0] == 0 and bounds[-1] == 2000
    monkeypatch.setattr(metis, "available_memory_bytes", lambda: None)  # unknown memory: METIS, as before
    assert metis.metis_fits(symmetric_pattern(graph.adj))


def test_without_kaminpar_the_fallback_is_one_line(monkeypatch, sym):
    real_import = builtins.__import__

    def no_kaminpar(name, *args, **kwargs):
        if name == "kaminpar":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(metis, "available_memory_bytes", lambda: 0)
    monkeypatch.setattr(builtins, "__import__", no_kaminpar)
    with pytest.raises(ConfigError, match="pip install kaminpar"):
        metis.membership(sym, 4, method="metis")
