"""Every model kind against PyTorch Geometric, one table per property (one process).

- Layers (`LAYERS`): for equal weights, one GCN layer equals PyG's ``GCNConv`` (cached normalization), one SAGE
  layer ``SAGEConv(aggr="mean", root_weight=True)`` (with and without ``normalize``), one GIN layer ``GINConv``
  (ε fixed and trainable) and one GAT layer ``GATConv`` (K = 1 and K = 8 heads concatenated, K = 4 averaged):
  forward, the input's gradient and every parameter's gradient within 1e-5, in both product orders, on directed
  graphs with isolated vertices (so the transpose and the empty mean are exercised; GAT's has an existing
  self-loop, which ``GATConv`` removes and adds again and the ``gat`` operator keeps once).
- Cora (`CORA`): a first layer on the dense input, and on the sparse-feature path (no densified input) where it
  is transform-first, equals PyG too.
- Model files (`MODEL_FILES`): a trained model's file loads back into the same predictions, and `gridgnn.to_pyg`
  maps it onto PyG's convolutions with the same probabilities; each kind's own options travel with it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from model_helpers import random_graph, shared_datasets

import gridgnn
from gridgnn.data.graph import Graph
from gridgnn.data.interop import graph_to_pyg
from gridgnn.data.operators import operator_matrix
from gridgnn.data.registry import load_dataset
from gridgnn.nn import GCNLayer, GINLayer, SAGELayer, SparseFeatures
from gridgnn.nn.gat import GAT, GATLayer
from gridgnn.nn.layout import LocalLayout
from gridgnn.sparse.adjacency import gcn_normalize
from gridgnn.spmm.local import LocalSpMM

pyg = pytest.importorskip("torch_geometric.nn")
TOL = 1e-5
SAME, FIRST = (lambda grad: grad), (lambda grad: grad[0])  # how PyG's gradient reads as ours (or torch.t)


def _edge_index(adj: sp.csr_matrix) -> torch.Tensor:
    """PyG edge_index (source row 0, target row 1) of our adjacency, where adj[dst, src] != 0."""
    coo = adj.tocoo()
    return torch.from_numpy(np.vstack([coo.col, coo.row]).astype(np.int64))


# --- the graphs ---------------------------------------------------------------------------------------------


def _gcn_graph() -> Graph:
    return random_graph(n=200, f=30, directed=True, density=0.03, seed=4)


def _directed_graph() -> Graph:
    graph = random_graph(n=120, f=24, directed=True, density=0.03, seed=5)
    degrees = np.diff(graph.adj.tocsr().indptr)
    assert (degrees == 0).any() and (graph.adj != graph.adj.T).nnz > 0  # isolated rows, not symmetric
    return graph


def _graph_with_a_self_loop() -> Graph:
    graph = _directed_graph()
    adj = graph.adj.tolil()
    adj[3, 3] = 1.0  # an existing self-loop: GATConv removes it and adds one, the gat operator keeps one
    graph.adj = adj.tocsr()
    assert (np.diff(graph.adj.indptr) == 0).any()  # still isolated rows
    return graph


# --- one (PyG conv, our layer) pair per model kind, with equal weights -------------------------------------
# Each maker returns (conv, ours, pairs): pairs are (our parameter, PyG's parameter, how PyG's gradient reads as
# ours: transposed, as is, or its one leading row) whose gradients must agree.


def _gcn_pair(f_in: int, f_out: int, order: str, seed: int = 1):
    torch.manual_seed(seed)
    conv = pyg.GCNConv(f_in, f_out, cached=True)
    torch.nn.init.uniform_(conv.bias, -0.5, 0.5)
    ours = GCNLayer(f_in, f_out, order=order)
    with torch.no_grad():
        ours.weight.copy_(conv.lin.weight.T)
        ours.bias.copy_(conv.bias)
    return conv, ours, [(ours.weight, conv.lin.weight, torch.t), (ours.bias, conv.bias, SAME)]


def _sage_pair(f_in: int, f_out: int, order: str, normalize: bool):
    torch.manual_seed(0)
    conv = pyg.SAGEConv(f_in, f_out, aggr="mean", root_weight=True, normalize=normalize)
    torch.nn.init.uniform_(conv.lin_l.bias, -0.5, 0.5)
    ours = SAGELayer(f_in, f_out, order=order, normalize=normalize)
    with torch.no_grad():
        ours.weight_neigh.copy_(conv.lin_l.weight.T)
        ours.weight_root.copy_(conv.lin_r.weight.T)
        ours.bias.copy_(conv.lin_l.bias)
    pairs = [(ours.weight_neigh, conv.lin_l.weight, torch.t), (ours.weight_root, conv.lin_r.weight, torch.t),
             (ours.bias, conv.lin_l.bias, SAME)]
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
    pairs = [(ours.weight1, mlp[0].weight, torch.t), (ours.bias1, mlp[0].bias, SAME),
             (ours.weight2, mlp[2].weight, torch.t), (ours.bias2, mlp[2].bias, SAME)]
    if train_eps:
        pairs.append((ours.eps, conv.eps, SAME))
    return conv, ours, pairs


def _gat_pair(f_in: int, f_out: int, heads: int, concat: bool):
    torch.manual_seed(heads)
    conv = pyg.GATConv(f_in, f_out, heads=heads, concat=concat)
    torch.nn.init.uniform_(conv.bias, -0.5, 0.5)
    ours = GATLayer(f_in, f_out, heads=heads, concat=concat)
    with torch.no_grad():
        ours.weight.copy_(conv.lin.weight.T)
        ours.att_src.copy_(conv.att_src[0])
        ours.att_dst.copy_(conv.att_dst[0])
        ours.bias.copy_(conv.bias)
    # PyG keeps the attention vectors as (1, heads, C), ours as (heads, C)
    pairs = [(ours.weight, conv.lin.weight, torch.t), (ours.att_src, conv.att_src, FIRST),
             (ours.att_dst, conv.att_dst, FIRST), (ours.bias, conv.bias, SAME)]
    return conv, ours, pairs


@dataclass(frozen=True)
class LayerCase:
    """One row of the layer table: its graph, how our layer aggregates on it (the model's operator), the pair
    maker ``(f_in) -> (conv, ours, pairs)`` and the output width ``(n, width)`` both must have."""

    graph: Callable[[], Graph]
    operator: str
    pair: Callable[[int], tuple]
    width: int

    def aggregation(self, graph: Graph):
        if self.operator == "gcn":  # GCN's layer on a plain callable over Â = D^-1/2 (A + I) D^-1/2
            return LocalSpMM(gcn_normalize(graph.adj))
        return LocalLayout(LocalSpMM(operator_matrix(self.operator, graph.adj)), self.operator)


ORDERS = ["aggregate-first", "transform-first"]
LAYERS = {
    **{f"gcn-{order}": LayerCase(_gcn_graph, "gcn", lambda f, o=order: _gcn_pair(f, 5, o), 5) for order in ORDERS},
    **{f"sage-{order}{'-normalize' if normalize else ''}": LayerCase(
        _directed_graph, "mean", lambda f, o=order, n=normalize: _sage_pair(f, 7, o, n), 7)
       for normalize in (False, True) for order in ORDERS},
    **{f"gin-{order}-eps{eps}{'-trained' if train else ''}": LayerCase(
        _directed_graph, "sum", lambda f, o=order, e=eps, t=train: _gin_pair(f, 7, o, e, t), 7)
       for eps, train in ((0.0, False), (0.25, False), (-0.3, True)) for order in ORDERS},
    **{f"gat-K{heads}-{'concat' if concat else 'mean'}": LayerCase(
        _graph_with_a_self_loop, "gat", lambda f, h=heads, c=concat: _gat_pair(f, 3, h, c), 3 * heads if concat else 3)
       for heads, concat in ((1, True), (8, True), (4, False))},
}


def _check(theirs: torch.nn.Module, ours: torch.nn.Module, pairs, graph: Graph, aggregation, width: int) -> None:
    """Forward, input gradient and each (our parameter, their parameter) gradient agree within `TOL`; every
    parameter gets a gradient; PyG's second call (from its cache, where it has one) gives the same output."""
    torch.manual_seed(3)
    x = torch.from_numpy(graph.dense_features()).requires_grad_(True)
    x_ours = x.detach().clone().requires_grad_(True)
    edges = _edge_index(graph.adj)
    expected = theirs(x, edges)
    with torch.no_grad():
        assert torch.equal(theirs(x, edges), expected)  # GCNConv's second call uses its cached normalization
    got = ours(x_ours, aggregation)
    assert got.shape == expected.shape == (graph.num_nodes, width)
    assert (got - expected).abs().max().item() < TOL
    upstream = torch.randn_like(expected) / expected.shape[0]  # the scale of a mean loss's gradient
    (expected * upstream).sum().backward()
    (got * upstream).sum().backward()
    assert (x_ours.grad - x.grad).abs().max().item() < TOL
    for mine, pyg_param, as_ours in pairs:
        reference = as_ours(pyg_param.grad)
        assert mine.grad.abs().max().item() > 0
        assert (mine.grad - reference).abs().max().item() < TOL


@pytest.mark.parametrize("case", list(LAYERS))
def test_layer_matches_pyg_forward_and_backward(case):
    row = LAYERS[case]
    graph = row.graph()
    conv, ours, pairs = row.pair(graph.num_features)
    _check(conv, ours, pairs, graph, row.aggregation(graph), row.width)


def test_sage_normalize_of_an_all_zero_row_has_finite_gradients_as_pyg():
    """A row whose output is exactly zero (no neighbours, zero input, zero bias: common at initialization
    after a ReLU) divides by the norm floor; its gradients are finite and equal PyG's (they were NaN)."""
    graph = _directed_graph()
    row = int(np.flatnonzero(np.diff(graph.adj.tocsr().indptr) == 0)[0])
    features = graph.dense_features().copy()
    features[row] = 0.0
    graph = dataclasses.replace(graph, features=features)
    case = LAYERS["sage-transform-first-normalize"]
    conv, ours, pairs = _sage_pair(graph.num_features, 7, "transform-first", True)
    with torch.no_grad():
        ours.bias.zero_()
        conv.lin_l.bias.zero_()
    with torch.no_grad():
        assert float(ours(torch.from_numpy(features), case.aggregation(graph))[row].abs().max()) == 0.0
    _check(conv, ours, pairs, graph, case.aggregation(graph), 7)
    assert all(torch.isfinite(param.grad).all() for param, _, _ in pairs)


# --- Cora: dense input in both orders, and the sparse-feature path of a first (transform-first) layer -------

CORA = {
    "gcn-aggregate-first": ("gcn", lambda f: _gcn_pair(f, 16, "aggregate-first", seed=0)),
    "gcn-transform-first": ("gcn", lambda f: _gcn_pair(f, 16, "transform-first", seed=0)),
    "sage-transform-first-normalize": ("mean", lambda f: _sage_pair(f, 16, "transform-first", True)),
    "gin-transform-first-eps0.5-trained": ("sum", lambda f: _gin_pair(f, 16, "transform-first", 0.5, True)),
}


@pytest.fixture(scope="module")
def cora():
    return load_dataset("cora", data_root=str(shared_datasets()))


@pytest.mark.parametrize("case", list(CORA))
def test_layer_matches_pyg_on_cora_with_dense_and_sparse_features(cora, case):
    operator, make = CORA[case]
    conv, ours, _ = make(cora.num_features)
    aggregation = LayerCase(lambda: cora, operator, make, 16).aggregation(cora)
    x = torch.from_numpy(cora.dense_features())
    with torch.no_grad():
        expected = conv(x, _edge_index(cora.adj))
        assert torch.equal(conv(x, _edge_index(cora.adj)), expected)  # GCNConv: the second call uses the cache
        assert (ours(x, aggregation) - expected).abs().max().item() < TOL
        if ours.order == "transform-first":  # the sparse-feature path of the first layer
            block = SparseFeatures(cora.features).block(0.0, seed=0, epoch=0, layer=0, training=False)
            assert (ours(block, aggregation) - expected).abs().max().item() < TOL


# --- model files: saved, loaded, predicted and mapped onto PyG, with each kind's own options -----------------


def _gin_eps_travels(result, loaded, document) -> None:
    assert loaded.layers[0].eps.item() != 0.25  # the trained ε travels with the weights
    assert loaded.layers[0].eps.item() == result.model.layers[0].eps.item()


def _gin_layer_norm_travels(result, loaded, document) -> None:
    assert document["config"]["norm"] == "layer" and "layers.0.norm_weight" in document["state"]
    trained = result.model.layers[0].norm_weight.detach()
    assert not torch.equal(trained, torch.ones_like(trained))  # the gain trained, and travels
    assert torch.equal(loaded.layers[0].norm_weight, trained)
    converted = gridgnn.to_pyg(loaded)
    assert [type(m).__name__ for m in converted.convs[0].nn] == ["Linear", "LayerNorm", "ReLU", "Linear"]


def _gat_heads_travel(result, loaded, document) -> None:
    assert result.model.layers[0].out_channels == 12 and result.model.layers[1].heads == 2
    assert document["config"]["heads"] == 3
    assert document["config"]["hidden_channels"] == 4 and document["config"]["attn_dropout"] == 0.3
    assert type(loaded) is GAT


MODEL_FILES = {  # options of gridgnn.fit, the PyG convolution to_pyg builds, the kind's own checks
    "sage-normalize": (dict(model="sage", sage_normalize=True, hidden=6), "SAGEConv", None),
    "gin-eps-trained": (dict(model="gin", gin_eps=0.25, gin_train_eps=True, hidden=6), "GINConv", _gin_eps_travels),
    "gin-layer-norm": (dict(model="gin", gin_norm="layer", hidden=6), "GINConv", _gin_layer_norm_travels),
    "gat-heads-dropout": (dict(model="gat", heads=3, output_heads=2, attn_dropout=0.3, hidden=4), "GATConv",
                          _gat_heads_travel),
}


@pytest.mark.parametrize("case", list(MODEL_FILES))
def test_model_files_round_trip_and_map_onto_pyg(case, tmp_path):
    options, pyg_class, own_checks = MODEL_FILES[case]
    graph = gridgnn.as_graph("csbm:nodes=90,classes=3,features=7", directed=True)
    result = gridgnn.fit(graph, epochs=3, layers=2, **options)
    path = result.save(tmp_path / "model.pt")
    document = torch.load(path, weights_only=True)
    assert document["model"] == options["model"]
    loaded = gridgnn.load_model(path)
    assert type(loaded) is type(result.model)
    expected = result.predict()
    assert torch.equal(gridgnn.predict(loaded, graph).probabilities, expected.probabilities)
    converted = gridgnn.to_pyg(loaded)
    assert {type(conv).__name__ for conv in converted.convs} == {pyg_class}
    data = graph_to_pyg(graph)
    assert (converted(data.x, data.edge_index).exp() - expected.probabilities).abs().max().item() < TOL
    if own_checks is not None:
        own_checks(result, loaded, document)
