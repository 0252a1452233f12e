"""Generators: requested sizes, seeded determinism, learnability of csbm, R-MAT's skew."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest
import scipy.sparse as sp

from gridgnn.data import Graph
from gridgnn.data.generators import csbm, rmat
from gridgnn.sparse.adjacency import gcn_normalize


def _same(a: Graph, b: Graph) -> bool:
    return (
        (a.adj != b.adj).nnz == 0
        and np.array_equal(a.features, b.features)
        and np.array_equal(a.labels, b.labels)
        and np.array_equal(a.train_mask, b.train_mask)
    )


def test_csbm_sizes_and_determinism() -> None:
    graph = csbm(nodes=1000, classes=4, features=12, avg_degree=8, seed=3)
    assert (graph.num_nodes, graph.num_classes, graph.num_features) == (1000, 4, 12)
    assert not graph.directed and (graph.adj != graph.adj.T).nnz == 0 and graph.adj.diagonal().sum() == 0
    assert 7.0 < graph.adj.nnz / 1000 <= 8.0  # duplicates and self-loops are dropped
    assert np.array_equal(np.bincount(graph.labels), [250] * 4)
    assert np.all(np.bincount(graph.labels[graph.train_mask]) == 20)
    assert _same(graph, csbm(nodes=1000, classes=4, features=12, avg_degree=8, seed=3))
    assert not _same(graph, csbm(nodes=1000, classes=4, features=12, avg_degree=8, seed=4))


def test_csbm_homophily_and_probabilities() -> None:
    graph = csbm(nodes=3000, classes=3, homophily=0.7, seed=0)
    coo = graph.adj.tocoo()
    assert abs(np.mean(graph.labels[coo.row] == graph.labels[coo.col]) - 0.7) < 0.02
    by_probability = csbm(nodes=3000, classes=3, p_in=0.004, p_out=0.001, seed=0)
    coo = by_probability.adj.tocoo()
    # expected within-class degree 0.004 * 999, between-class 0.001 * 2000: homophily ~ 0.666
    assert abs(np.mean(by_probability.labels[coo.row] == by_probability.labels[coo.col]) - 0.666) < 0.03
    directed = csbm(nodes=500, seed=1, directed=True)
    assert directed.directed and (directed.adj != directed.adj.T).nnz > 0


def _train_gcn(graph: Graph, epochs: int = 60) -> float:
    """Test accuracy of a plain 2-layer GCN (hidden 16, Adam lr 0.01, wd 5e-4, dropout 0.5)."""
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # far faster than contended threads for a graph this small
    try:
        return _train(torch, graph, epochs)
    finally:
        torch.set_num_threads(threads)


def _train(torch: ModuleType, graph: Graph, epochs: int) -> float:
    torch.manual_seed(0)
    coo = gcn_normalize(graph.adj).tocoo()
    index = torch.from_numpy(np.vstack([coo.row, coo.col]).astype(np.int64))
    adj = torch.sparse_coo_tensor(index, torch.from_numpy(coo.data), coo.shape, check_invariants=True).coalesce()
    x, y = torch.from_numpy(graph.dense_features()), torch.from_numpy(graph.labels)
    layers = torch.nn.ModuleList([torch.nn.Linear(x.shape[1], 16), torch.nn.Linear(16, graph.num_classes)])
    optimizer = torch.optim.Adam(layers.parameters(), lr=0.01, weight_decay=5e-4)
    train, test = torch.from_numpy(graph.train_mask), torch.from_numpy(graph.test_mask)

    def forward(dropout: float) -> torch.Tensor:
        hidden = torch.relu(adj @ layers[0](torch.nn.functional.dropout(x, dropout)))
        return adj @ layers[1](torch.nn.functional.dropout(hidden, dropout))

    for _ in range(epochs):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(forward(0.5)[train], y[train]).backward()
        optimizer.step()
    with torch.no_grad():
        return float((forward(0.0).argmax(1)[test] == y[test]).float().mean())


def test_csbm_default_is_learnable_by_a_gcn_but_not_from_features_alone() -> None:
    graph = csbm()
    assert (graph.num_nodes, graph.num_classes, graph.num_features) == (2000, 5, 32)
    assert _train_gcn(graph) > 0.9
    no_edges = type(graph)(**{**graph.__dict__, "adj": sp.csr_matrix(graph.adj.shape, dtype=np.float32)})
    assert _train_gcn(no_edges) < 0.8  # the graph carries most of the signal


def test_rmat_sizes_determinism_and_skew() -> None:
    graph = rmat(scale=12, edge_factor=8, features=5, classes=3, seed=2)
    assert graph.num_nodes == 4096 and graph.num_features == 5 and graph.num_classes == 3
    assert not graph.directed and (graph.adj != graph.adj.T).nnz == 0 and graph.adj.diagonal().sum() == 0
    assert 0.5 * 2 * 8 * 4096 < graph.adj.nnz <= 2 * 8 * 4096
    degree = np.diff(graph.adj.indptr)
    assert degree.max() > 20 * degree.mean()  # heavy-tailed, unlike a uniform random graph
    assert _same(graph, rmat(scale=12, edge_factor=8, features=5, classes=3, seed=2))
    assert not _same(graph, rmat(scale=12, edge_factor=8, features=5, classes=3, seed=3))
    assert set(np.unique(graph.labels)) == {0, 1, 2} and graph.features.dtype == np.float32


def test_rmat_directed_and_chunking() -> None:
    graph = rmat(scale=10, edge_factor=4, seed=0, directed=True, chunk_edges=1000)
    assert graph.directed and (graph.adj != graph.adj.T).nnz > 0
    assert graph.adj.nnz <= 4 * 1024 and graph.adj.diagonal().sum() == 0


@pytest.mark.slow
def test_rmat_graph500_scale_22() -> None:
    graph = rmat(scale=22, edge_factor=16, features=4)
    assert graph.num_nodes == 1 << 22 and graph.adj.nnz > 16 * (1 << 22)
    assert graph.adj.indices.dtype == np.int32
