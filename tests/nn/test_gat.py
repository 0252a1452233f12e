"""GAT on one process: one layer equals PyG's ``GATConv`` forward and backward (input, weight, both attention
vectors, bias) within 1e-5 for equal weights, with K = 1 and K = 8 heads concatenated and K = 4 averaged, on a
directed graph with isolated vertices and existing self-loops; attention dropout is the layout-invariant mask
of the stored edges; model files, to_pyg, predict and checkpoints carry heads, output heads and attention
dropout."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from model_helpers import random_graph

import gridgnn
from gridgnn.config import TrainConfig
from gridgnn.data.interop import graph_to_pyg
from gridgnn.data.operators import operator_matrix
from gridgnn.nn.gat import GAT, GATLayer
from gridgnn.nn.layout import LocalLayout
from gridgnn.sparse.attention import EdgeBlock
from gridgnn.spmm.local import LocalSpMM
from gridgnn.train.checkpoint_fingerprint import run_fingerprint

pyg = pytest.importorskip("torch_geometric.nn")
TOL = 1e-5


def _graph():
    graph = random_graph(n=120, f=24, directed=True, density=0.03, seed=5)
    adj = graph.adj.tolil()
    adj[3, 3] = 1.0  # an existing self-loop: GATConv removes it and adds one, the gat operator keeps one
    graph.adj = adj.tocsr()
    degrees = np.diff(graph.adj.tocsr().indptr)
    assert (degrees == 0).any() and (graph.adj != graph.adj.T).nnz > 0
    return graph


def _edge_index(adj: sp.csr_matrix) -> torch.Tensor:
    coo = adj.tocoo()
    return torch.from_numpy(np.vstack([coo.col, coo.row]).astype(np.int64))


def _layout(graph) -> LocalLayout:
    return LocalLayout(LocalSpMM(operator_matrix("gat", graph.adj)), "gat")


@pytest.mark.parametrize(("heads", "concat"), [(1, True), (8, True), (4, False)])
def test_gat_layer_matches_gatconv_forward_and_backward(heads, concat):
    graph = _graph()
    torch.manual_seed(heads)
    conv = pyg.GATConv(graph.num_features, 3, heads=heads, concat=concat)
    torch.nn.init.uniform_(conv.bias, -0.5, 0.5)
    ours = GATLayer(graph.num_features, 3, heads=heads, concat=concat)
    with torch.no_grad():
        ours.weight.copy_(conv.lin.weight.T)
        ours.att_src.copy_(conv.att_src[0])
        ours.att_dst.copy_(conv.att_dst[0])
        ours.bias.copy_(conv.bias)
    x = torch.from_numpy(graph.dense_features()).requires_grad_(True)
    x_ours = x.detach().clone().requires_grad_(True)
    expected = conv(x, _edge_index(graph.adj))
    got = ours(x_ours, _layout(graph))
    assert got.shape == expected.shape == (graph.num_nodes, 3 * heads if concat else 3)
    assert (got - expected).abs().max().item() < TOL
    upstream = torch.randn_like(expected) / expected.shape[0]
    (expected * upstream).sum().backward()
    (got * upstream).sum().backward()
    assert (x_ours.grad - x.grad).abs().max().item() < TOL
    pairs = [(ours.weight.grad, conv.lin.weight.grad.T), (ours.att_src.grad, conv.att_src.grad[0]),
             (ours.att_dst.grad, conv.att_dst.grad[0]), (ours.bias.grad, conv.bias.grad)]
    for mine, theirs in pairs:
        assert mine.abs().max().item() > 0
        assert (mine - theirs).abs().max().item() < TOL


def test_attention_dropout_drops_stored_edges_by_global_ids():
    """With p = 0.5 some coefficients vanish, the kept ones are scaled by 2, and the same (seed, epoch) draws
    the same mask; another epoch draws another."""
    graph = _graph()
    layer = GATLayer(graph.num_features, 4, heads=2, attn_dropout=0.5, generator=torch.Generator().manual_seed(0))
    x = torch.from_numpy(graph.dense_features())
    runs = {}
    for epoch in (0, 0, 1):
        layer.stream = {"seed": 3, "epoch": epoch, "training": True, "layer": 0}
        runs.setdefault(epoch, []).append(layer(x, _layout(graph)).detach())
    layer.stream = None
    plain = layer(x, _layout(graph)).detach()
    assert torch.equal(runs[0][0], runs[0][1])
    assert not torch.allclose(runs[0][0], runs[1][0]) and not torch.allclose(runs[0][0], plain)
    drop = GATLayer(4, 4, heads=2, attn_dropout=0.5)
    drop.stream = {"seed": 3, "epoch": 0, "training": True, "layer": 0}
    factors = drop._drop()
    block = EdgeBlock(operator_matrix("gat", graph.adj))
    values = factors(block, torch.arange(graph.num_nodes), torch.arange(graph.num_nodes))
    assert set(values.unique().tolist()) == {0.0, 2.0} and 0.4 < (values == 0).float().mean().item() < 0.6
    assert not torch.equal(values[:, 0], values[:, 1])  # each head draws its own mask


def test_gat_model_files_round_trip_and_map_onto_pyg(tmp_path):
    graph = gridgnn.as_graph("csbm:nodes=90,classes=3,features=7", directed=True)
    options = {"model": "gat", "heads": 3, "output_heads": 2, "attn_dropout": 0.3}
    result = gridgnn.fit(graph, epochs=3, layers=2, hidden=4, **options)
    assert result.model.layers[0].out_channels == 12 and result.model.layers[1].heads == 2
    path = result.save(tmp_path / "model.pt")
    document = torch.load(path, weights_only=True)
    assert document["model"] == "gat" and document["config"]["heads"] == 3
    assert document["config"]["hidden_channels"] == 4 and document["config"]["attn_dropout"] == 0.3
    loaded = gridgnn.load_model(path)
    assert type(loaded) is GAT
    expected = result.predict()
    assert torch.equal(gridgnn.predict(loaded, graph).probabilities, expected.probabilities)
    converted = gridgnn.to_pyg(loaded)
    assert {type(conv).__name__ for conv in converted.convs} == {"GATConv"}
    data = graph_to_pyg(graph)
    assert (converted(data.x, data.edge_index).exp() - expected.probabilities).abs().max().item() < TOL


def test_checkpoint_fingerprint_records_attention_options():
    graph = gridgnn.as_graph("csbm:nodes=60,classes=3,features=5")
    base = run_fingerprint(TrainConfig(model="gat", heads=2, attn_dropout=0.1), graph)["model"]
    assert base["heads"] == 2 and base["output_heads"] == 1 and base["attn_dropout"] == 0.1
    other = run_fingerprint(TrainConfig(model="gat", heads=4, attn_dropout=0.1), graph)["model"]
    assert other != base


def test_plan_says_what_attention_adds(capsys):
    from gridgnn.cli.main import main
    from gridgnn.cost.epoch_model import ModelSpec, predict_epoch
    from gridgnn.cost.graph_stats import GraphStats
    from gridgnn.grid.shape import resolve_grid

    counts = ["--num-nodes", "1000", "--num-edges", "8000", "--num-features", "64", "--num-classes", "5",
              "--nprocs", "4"]
    assert main(["plan", *counts, "--model", "gat", "--heads", "4", "--hidden", "8"]) == 0
    out = capsys.readouterr().out
    assert "GAT widths 64-32-5" in out and "--model gat --heads 4" in out
    line = next(row for row in out.splitlines() if row.startswith("attention"))
    assert "adds" in line and "over a GCN of the same widths" in line
    stats = GraphStats.from_counts(1000, 8000, 64, 5, self_loops=True)
    for algo in ("1d", "1.5d", "2d", "3d"):
        shape = resolve_grid(algo, 8)
        gat = predict_epoch(ModelSpec(64, 5, hidden=8, model="gat", heads=4), stats, shape)
        gcn = predict_epoch(ModelSpec(64, 5, hidden=32, order="transform-first"), stats, shape)
        assert (gat.bytes > gcn.bytes).all(), algo  # the score terms, row reductions and SDDMM pass cost more


def test_memory_model_counts_attention_per_edge():
    """The attention component: zero for GCN; for GAT the tile pattern plus, per layer, K values per entry
    (more with attention dropout), and on 2D the received panels' pattern and coefficients."""
    from gridgnn.cost.epoch_model import ModelSpec, predict_epoch
    from gridgnn.cost.graph_stats import GraphStats
    from gridgnn.grid.shape import resolve_grid

    stats = GraphStats.from_counts(1000, 8000, 64, 5, self_loops=True)
    shape = resolve_grid("1d", 4)
    gcn = predict_epoch(ModelSpec(64, 5, hidden=32), stats, shape).memory["attention"]
    gat = {p: predict_epoch(ModelSpec(64, 5, hidden=8, model="gat", heads=4, attn_dropout=p), stats,
                            shape).memory["attention"] for p in (0.0, 0.5)}
    assert (gcn == 0).all() and (gat[0.0] > 0).all() and (gat[0.5] > gat[0.0]).all()
    # per entry: 32 bytes of pattern, layer 1 (4 heads) and layer 2 (1 head) 5 bytes per head, 16 per head of
    # the widest layer in backward; 8000 + 1000 entries over 4 ranks (uniform estimate)
    assert gat[0.0].sum() == pytest.approx(9000 * (32 + 5 * 5 + 16 * 4), rel=0.01)
    two_d = predict_epoch(ModelSpec(64, 5, hidden=8, model="gat", heads=4), stats, resolve_grid("2d", 4))
    assert (two_d.memory["attention"] > 0).all()
