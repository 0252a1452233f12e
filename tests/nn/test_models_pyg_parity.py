"""For equal weights, one SAGE layer equals PyG's ``SAGEConv(aggr="mean", root_weight=True)`` (with and
without ``normalize``) and one GIN layer equals PyG's ``GINConv`` (ε fixed and trainable), forward and
backward (input and every parameter gradient) within 1e-5, in both product orders, on a directed graph
with isolated vertices (so the transpose and the empty mean are exercised) and on Cora's sparse features."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from model_helpers import random_graph, shared_datasets

from gridgnn.data.operators import operator_matrix
from gridgnn.data.registry import load_dataset
from gridgnn.nn import GINLayer, SAGELayer, SparseFeatures
from gridgnn.nn.layout import LocalLayout
from gridgnn.spmm.local import LocalSpMM

pyg = pytest.importorskip("torch_geometric.nn")
ORDERS = ["aggregate-first", "transform-first"]
TOL = 1e-5


def _edge_index(adj: sp.csr_matrix) -> torch.Tensor:
    """PyG edge_index (source row 0, target row 1) of our adjacency, where adj[dst, src] != 0."""
    coo = adj.tocoo()
    return torch.from_numpy(np.vstack([coo.col, coo.row]).astype(np.int64))


def _directed_graph():
    graph = random_graph(n=120, f=24, directed=True, density=0.03, seed=5)
    degrees = np.diff(graph.adj.tocsr().indptr)
    assert (degrees == 0).any() and (graph.adj != graph.adj.T).nnz > 0  # isolated rows, not symmetric
    return graph


def _layout(graph, operator: str) -> LocalLayout:
    return LocalLayout(LocalSpMM(operator_matrix(operator, graph.adj)), operator)


def _check(theirs: torch.nn.Module, ours: torch.nn.Module, pairs, graph, operator: str) -> None:
    """Forward, input gradient and each (their parameter, our parameter) gradient agree within `TOL`."""
    torch.manual_seed(3)
    x = torch.from_numpy(graph.dense_features()).requires_grad_(True)
    x_ours = x.detach().clone().requires_grad_(True)
    expected = theirs(x, _edge_index(graph.adj))
    got = ours(x_ours, _layout(graph, operator))
    assert (got - expected).abs().max().item() < TOL
    upstream = torch.randn_like(expected) / expected.shape[0]  # the scale of a mean loss's gradient
    (expected * upstream).sum().backward()
    (got * upstream).sum().backward()
    assert (x_ours.grad - x.grad).abs().max().item() < TOL
    for mine, pyg_param, transpose in pairs:
        reference = pyg_param.grad.T if transpose else pyg_param.grad
        assert (mine.grad - reference).abs().max().item() < TOL


def _sage_pair(f_in: int, f_out: int, order: str, normalize: bool):
    torch.manual_seed(0)
    conv = pyg.SAGEConv(f_in, f_out, aggr="mean", root_weight=True, normalize=normalize)
    torch.nn.init.uniform_(conv.lin_l.bias, -0.5, 0.5)
    ours = SAGELayer(f_in, f_out, order=order, normalize=normalize)
    with torch.no_grad():
        ours.weight_neigh.copy_(conv.lin_l.weight.T)
        ours.weight_root.copy_(conv.lin_r.weight.T)
        ours.bias.copy_(conv.lin_l.bias)
    pairs = [(ours.weight_neigh, conv.lin_l.weight, True), (ours.weight_root, conv.lin_r.weight, True),
             (ours.bias, conv.lin_l.bias, False)]
    return conv, ours, pairs


def _gin_pair(f_in: int, f_out: int, order: str, eps: float, train_eps: bool):
    torch.manual_seed(1)
    mlp = torch.nn.Sequential(torch.nn.Linear(f_in, f_out), torch.nn.ReLU(), torch.nn.Linear(f_out, f_out))
    conv = pyg.GINConv(mlp, eps=eps, train_eps=train_eps)
    ours = GINLayer(f_in, f_out, order=order, eps=eps, train_eps=train_eps)
    with torch.no_grad():
        ours.weight1.copy_(mlp[0].weight.T)
        ours.bias1.copy_(mlp[0].bias)
        ours.weight2.copy_(mlp[2].weight.T)
        ours.bias2.copy_(mlp[2].bias)
    pairs = [(ours.weight1, mlp[0].weight, True), (ours.bias1, mlp[0].bias, False),
             (ours.weight2, mlp[2].weight, True), (ours.bias2, mlp[2].bias, False)]
    if train_eps:
        pairs.append((ours.eps, conv.eps, False))
    return conv, ours, pairs


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("order", ORDERS)
def test_sage_layer_matches_sageconv_forward_and_backward(order, normalize):
    graph = _directed_graph()
    conv, ours, pairs = _sage_pair(graph.num_features, 7, order, normalize)
    _check(conv, ours, pairs, graph, "mean")


def test_sage_normalize_of_an_all_zero_row_has_finite_gradients_as_pyg():
    """A row whose output is exactly zero (no neighbours, zero input, zero bias: common at initialization
    after a ReLU) divides by the norm floor; its gradients are finite and equal PyG's (they were NaN)."""
    graph = _directed_graph()
    row = int(np.flatnonzero(np.diff(graph.adj.tocsr().indptr) == 0)[0])
    features = graph.dense_features().copy()
    features[row] = 0.0
    graph = dataclasses.replace(graph, features=features)
    conv, ours, pairs = _sage_pair(graph.num_features, 7, "transform-first", True)
    with torch.no_grad():
        ours.bias.zero_()
        conv.lin_l.bias.zero_()
    with torch.no_grad():
        assert float(ours(torch.from_numpy(features), _layout(graph, "mean"))[row].abs().max()) == 0.0
    _check(conv, ours, pairs, graph, "mean")
    assert all(torch.isfinite(param.grad).all() for param, _, _ in pairs)


@pytest.mark.parametrize(("eps", "train_eps"), [(0.0, False), (0.25, False), (-0.3, True)])
@pytest.mark.parametrize("order", ORDERS)
def test_gin_layer_matches_ginconv_forward_and_backward(order, eps, train_eps):
    graph = _directed_graph()
    conv, ours, pairs = _gin_pair(graph.num_features, 7, order, eps, train_eps)
    _check(conv, ours, pairs, graph, "sum")


def test_sparse_features_on_cora_match_pyg():
    """The sparse-feature path of a first layer (no densified input) agrees with PyG on Cora."""
    cora = load_dataset("cora", data_root=str(shared_datasets()))
    x = torch.from_numpy(cora.dense_features())
    block = SparseFeatures(cora.features).block(0.0, seed=0, epoch=0, layer=0, training=False)
    edges = _edge_index(cora.adj)
    for operator, (conv, ours, _) in (("mean", _sage_pair(cora.num_features, 16, "transform-first", True)),
                                      ("sum", _gin_pair(cora.num_features, 16, "transform-first", 0.5, True))):
        with torch.no_grad():
            assert (ours(block, _layout(cora, operator)) - conv(x, edges)).abs().max().item() < TOL
