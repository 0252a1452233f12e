"""GAT on one process: attention dropout is the layout-invariant mask of the stored edges; checkpoints carry
heads, output heads and attention dropout; the planner and the memory model price attention. (GAT against
PyG's ``GATConv``, and its model files: the tables of `test_pyg_parity.py`; on every grid: the table of
`test_models_distributed.py`.)"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from model_helpers import random_graph

import gridgnn
from gridgnn.config import TrainConfig
from gridgnn.data.operators import operator_matrix
from gridgnn.nn.gat import GATLayer
from gridgnn.nn.layout import LocalLayout
from gridgnn.nn.trace import model_spec
from gridgnn.sparse.attention import EdgeBlock
from gridgnn.spmm.local import LocalSpMM
from gridgnn.train.checkpoint.fingerprint import run_fingerprint


def _graph():
    graph = random_graph(n=120, f=24, directed=True, density=0.03, seed=5)
    adj = graph.adj.tolil()
    adj[3, 3] = 1.0  # an existing self-loop: GATConv removes it and adds one, the gat operator keeps one
    graph.adj = adj.tocsr()
    degrees = np.diff(graph.adj.tocsr().indptr)
    assert (degrees == 0).any() and (graph.adj != graph.adj.T).nnz > 0
    return graph


def _layout(graph) -> LocalLayout:
    return LocalLayout(LocalSpMM(operator_matrix("gat", graph.adj)), "gat")


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
        gat = predict_epoch(model_spec(ModelSpec(64, 5, hidden=8, model="gat", heads=4), stats), stats, shape)
        gcn = predict_epoch(model_spec(ModelSpec(64, 5, hidden=32, order="transform-first"), stats), stats, shape)
        assert (gat.bytes > gcn.bytes).all(), algo  # the score terms, row reductions and SDDMM pass cost more


def test_memory_model_counts_attention_per_edge():
    """The attention component: zero for GCN; for GAT the tile pattern plus, per layer, K values per entry
    (more with attention dropout), and on 2D the received panels' pattern and coefficients."""
    from gridgnn.cost.epoch_model import ModelSpec, predict_epoch
    from gridgnn.cost.graph_stats import GraphStats
    from gridgnn.grid.shape import resolve_grid

    stats = GraphStats.from_counts(1000, 8000, 64, 5, self_loops=True)
    shape = resolve_grid("1d", 4)
    gcn = predict_epoch(model_spec(ModelSpec(64, 5, hidden=32), stats), stats, shape).memory["attention"]
    gat = {p: predict_epoch(model_spec(ModelSpec(64, 5, hidden=8, model="gat", heads=4, attn_dropout=p), stats), stats,
                            shape).memory["attention"] for p in (0.0, 0.5)}
    assert (gcn == 0).all() and (gat[0.0] > 0).all() and (gat[0.5] > gat[0.0]).all()
    # per entry: 32 bytes of pattern, layer 1 (4 heads) and layer 2 (1 head) 5 bytes per head, 16 per head of
    # the widest layer in backward; 8000 + 1000 entries over 4 ranks (uniform estimate)
    assert gat[0.0].sum() == pytest.approx(9000 * (32 + 5 * 5 + 16 * 4), rel=0.01)
    gat = model_spec(ModelSpec(64, 5, hidden=8, model="gat", heads=4), stats)
    two_d = predict_epoch(gat, stats, resolve_grid("2d", 4))
    assert (two_d.memory["attention"] > 0).all()
