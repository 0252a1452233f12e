"""For equal weights, one GCN layer equals PyG's GCNConv (cached normalization) within 1e-5."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from model_helpers import random_graph, shared_datasets

from gridgnn.data.registry import load_dataset
from gridgnn.nn import GCNLayer, SparseFeatures
from gridgnn.sparse.adjacency import gcn_normalize
from gridgnn.spmm.local import LocalSpMM

GCNConv = pytest.importorskip("torch_geometric.nn").GCNConv


@pytest.fixture(scope="module")
def cora():
    return load_dataset("cora", data_root=str(shared_datasets()))


def _edge_index(adj: sp.csr_matrix) -> torch.Tensor:
    """PyG edge_index (source row 0, target row 1) of our adjacency, where adj[dst, src] != 0."""
    coo = adj.tocoo()
    return torch.from_numpy(np.vstack([coo.col, coo.row]).astype(np.int64))


def _pyg_and_ours(graph, order, out_channels=16, seed=0):
    torch.manual_seed(seed)
    conv = GCNConv(graph.num_features, out_channels, cached=True)
    torch.nn.init.uniform_(conv.bias, -0.5, 0.5)
    ours = GCNLayer(graph.num_features, out_channels, order=order)
    with torch.no_grad():
        ours.weight.copy_(conv.lin.weight.T)
        ours.bias.copy_(conv.bias)
    x = torch.from_numpy(graph.dense_features())
    expected = conv(x, _edge_index(graph.adj))
    assert torch.equal(conv(x, _edge_index(graph.adj)), expected)  # second call uses the cache
    return expected, ours, x, LocalSpMM(gcn_normalize(graph.adj))


@pytest.mark.parametrize("order", ["aggregate-first", "transform-first"])
def test_layer_matches_gcnconv_on_cora(cora, order):
    expected, layer, x, agg = _pyg_and_ours(cora, order)
    got = layer(x, agg)
    assert (got - expected).abs().max().item() < 1e-5
    if order == "transform-first":  # the sparse-feature path of the first layer
        block = SparseFeatures(cora.features).block(0.0, seed=0, epoch=0, layer=0, training=False)
        assert (layer(block, agg) - expected).abs().max().item() < 1e-5


@pytest.mark.parametrize("order", ["aggregate-first", "transform-first"])
def test_layer_matches_gcnconv_on_a_directed_graph(order):
    graph = random_graph(n=200, f=30, directed=True, density=0.03, seed=4)
    expected, layer, x, agg = _pyg_and_ours(graph, order, out_channels=5, seed=1)
    assert (layer(x, agg) - expected).abs().max().item() < 1e-5
