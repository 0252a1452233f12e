"""Transforms against hand-computed examples and against PyG's gcn_norm / to_undirected / NormalizeFeatures."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from gridgnn.data.transforms import (
    drop_duplicate_edges,
    remove_self_loops,
    row_normalize_features,
    symmetrize,
)
from gridgnn.sparse.adjacency import add_self_loops, gcn_normalize

# Directed 3-node graph, adj[dst, src]: edges 0 -> 1, 2 -> 1, 1 -> 2.
SMALL = sp.csr_matrix(np.array([[0, 0, 0], [1, 0, 1], [0, 1, 0]], dtype=np.float32))


def _random_adj(n: int, nnz: int, seed: int, loops: bool = True) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    rows, cols = rng.integers(0, n, nnz), rng.integers(0, n, nnz)
    if not loops:
        keep = rows != cols
        rows, cols = rows[keep], cols[keep]
    adj = sp.csr_matrix((np.ones(rows.size, dtype=np.float32), (rows, cols)), shape=(n, n))
    adj.data[:] = 1.0
    return adj


def test_gcn_normalize_hand_computed() -> None:
    # A + I = [[1,0,0],[1,1,1],[0,1,1]]; row sums (in-degree + 1) d = [1, 3, 2].
    expected = np.array(
        [[1, 0, 0], [1 / np.sqrt(3), 1 / 3, 1 / np.sqrt(6)], [0, 1 / np.sqrt(6), 1 / 2]], dtype=np.float32
    )
    result = gcn_normalize(SMALL)
    assert result.format == "csr" and result.dtype == np.float32
    assert np.allclose(result.toarray(), expected, atol=1e-7)
    assert SMALL.nnz == 3  # input untouched


@pytest.mark.parametrize("seed", [0, 1])
def test_gcn_normalize_matches_pyg_gcn_norm_directed(seed: int) -> None:
    torch = pytest.importorskip("torch")
    gcn_norm = pytest.importorskip("torch_geometric.nn.conv.gcn_conv").gcn_norm
    adj = _random_adj(40, 150, seed)  # directed, with some self-loops
    coo = adj.tocoo()
    edge_index = torch.tensor(np.vstack([coo.col, coo.row]), dtype=torch.long)  # (src, dst)
    index, weight = gcn_norm(edge_index, None, num_nodes=40, add_self_loops=True)
    src, dst = index.numpy()
    expected = sp.csr_matrix((weight.numpy(), (dst, src)), shape=(40, 40)).toarray()
    assert np.allclose(gcn_normalize(adj).toarray(), expected, atol=1e-6)


def test_symmetrize_matches_pyg_to_undirected() -> None:
    torch = pytest.importorskip("torch")
    to_undirected = pytest.importorskip("torch_geometric.utils").to_undirected
    adj = _random_adj(30, 80, 2)
    coo = adj.tocoo()
    index = to_undirected(torch.tensor(np.vstack([coo.col, coo.row]), dtype=torch.long), num_nodes=30)
    src, dst = index.numpy()
    expected = sp.csr_matrix((np.ones(src.size), (dst, src)), shape=(30, 30))
    result = symmetrize(adj)
    assert (result != expected).nnz == 0 and result.dtype == np.float32 and result.has_sorted_indices
    assert np.array_equal(symmetrize(SMALL).toarray(), [[0, 1, 0], [1, 0, 1], [0, 1, 0]])


def test_drop_duplicates_and_self_loops() -> None:
    # Row 0 holds column 1 twice plus a self-loop and an explicit zero (non-canonical CSR).
    raw = sp.csr_matrix(
        (np.array([2.0, 1.0, 5.0, 0.0, 1.0]), np.array([1, 1, 0, 2, 0]), np.array([0, 4, 5, 5])), shape=(3, 3)
    )
    binary = drop_duplicate_edges(raw)
    assert binary.nnz == 3 and set(binary.data) == {1.0} and binary.dtype == np.float32
    assert np.array_equal(binary.toarray(), [[1, 1, 0], [1, 0, 0], [0, 0, 0]])
    without = remove_self_loops(binary)
    assert np.array_equal(without.toarray(), [[0, 1, 0], [1, 0, 0], [0, 0, 0]])
    assert raw.nnz == 5 and binary.nnz == 3  # inputs untouched


def test_add_self_loops_keeps_existing_weights() -> None:
    adj = sp.csr_matrix(np.array([[3, 1], [1, 0]], dtype=np.float32))
    assert np.array_equal(add_self_loops(adj).toarray(), [[3, 1], [1, 1]])
    assert np.array_equal(add_self_loops(SMALL, fill_value=2.0).diagonal(), [2, 2, 2])


def test_row_normalize_features_sparse_and_dense() -> None:
    dense = np.array([[1, 1, 2], [0, 0, 0], [0, 3, 0]], dtype=np.float32)
    expected = np.array([[0.25, 0.25, 0.5], [0, 0, 0], [0, 1, 0]], dtype=np.float32)
    sparse_result = row_normalize_features(sp.csr_matrix(dense))
    assert sp.issparse(sparse_result) and sparse_result.dtype == np.float32
    assert np.allclose(sparse_result.toarray(), expected)
    dense_result = row_normalize_features(dense)
    assert isinstance(dense_result, np.ndarray) and np.allclose(dense_result, expected)
    assert dense[0, 2] == 2  # input untouched


def test_row_normalize_matches_pyg_on_binary_features() -> None:
    torch = pytest.importorskip("torch")
    transforms = pytest.importorskip("torch_geometric.transforms")
    data_cls = pytest.importorskip("torch_geometric.data").Data
    x = (np.random.default_rng(0).random((20, 12)) < 0.3).astype(np.float32)
    data = transforms.NormalizeFeatures()(data_cls(x=torch.from_numpy(x.copy())))
    assert np.allclose(row_normalize_features(sp.csr_matrix(x)).toarray(), data.x.numpy())


def test_l2_row_normalization_sparse_and_dense() -> None:
    dense = np.array([[3.0, 4.0, 0.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0]], dtype=np.float32)
    expected = np.array([[0.6, 0.8, 0.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    assert np.allclose(row_normalize_features(sp.csr_matrix(dense), "l2").toarray(), expected)
    assert np.allclose(row_normalize_features(dense, "l2"), expected)


def test_the_cost_model_counts_the_entries_of_the_operators_training_builds() -> None:
    """One `add_self_loops` behind Â, GAT's pattern and the cost model's count (weights, loops, zeros)."""
    from types import SimpleNamespace

    from gridgnn.cost.graph_stats import GraphStats
    from gridgnn.data.operators import operator_matrix

    adj = _random_adj(40, 200, seed=5)
    adj.data[::7] = 0.0  # explicit zeros are not edges
    adj.data[1::7] = 2.5
    graph = SimpleNamespace(adj=adj, features=np.zeros((40, 3), np.float32), name="g", num_features=3,
                            num_classes=2)
    for self_loops, operators in ((True, ("gcn", "gat")), (False, ("sum", "mean"))):
        stats = GraphStats.from_graph(graph, self_loops=self_loops)
        for operator in operators:
            matrix = operator_matrix(operator, adj)
            assert stats.nnz == matrix.nnz and np.array_equal(stats.indptr, matrix.indptr), operator
            assert np.array_equal(np.sort(stats.indices), np.sort(matrix.indices)), operator
    pattern = add_self_loops((adj != 0).astype(np.int8), dtype=np.int8)
    assert pattern.dtype == np.int8 and np.array_equal(pattern.diagonal(), np.ones(40))
