"""A model gridgnn has never seen, added the way docs/architecture.md says: its own module (here: the classes
below) and its name in the two registries (`gridgnn.nn.models.MODELS`, `gridgnn.config.choices.MODELS`). Nothing in
`gridgnn.cost` knows it, yet the cost model prices it from its traced forward, every rank of every algorithm
moves exactly the predicted bytes per phase, and it trains as one process does.

The model is SGC (Wu et al., "Simplifying Graph Convolutional Networks", ICML 2019): one layer
``Â^K X W + b`` with K = 2 propagation hops."""

from __future__ import annotations

import model_workers as mw
import numpy as np
import pytest
import torch
from torch import nn

import gridgnn.config.choices
from gridgnn.config import TrainConfig
from gridgnn.cost.epoch_model import PHASES, ModelSpec, predict_epoch
from gridgnn.cost.graph_stats import GraphStats
from gridgnn.cost.operations import Aggregate, Bias, FullRows, Product
from gridgnn.grid.shape import resolve_grid
from gridgnn.launch.spawn import run_workers
from gridgnn.nn.models import MODELS
from gridgnn.nn.stack import LayerStack, glorot
from gridgnn.nn.trace import model_spec
from gridgnn.train.loop.trainer import Trainer
from gridgnn.train.run.training import build_aggregation, load_graph

HOPS = 2


class SGCLayer(nn.Module):
    """``Â^K (H W) + b``: the product first (the narrow side), then K aggregations."""

    def __init__(self, in_channels: int, out_channels: int, *, order: str, generator: torch.Generator):
        super().__init__()
        del order  # SGC transforms first
        self.in_channels, self.out_channels = in_channels, out_channels
        self.weight = glorot(in_channels, out_channels, generator)
        self.bias = nn.Parameter(torch.zeros(out_channels))

    def forward(self, h, layout):
        z = layout.linear(h, self.weight)
        for _ in range(HOPS):
            z = layout.aggregate(z)
        return layout.add_bias(z, self.bias)


class SGC(LayerStack):
    """One `SGCLayer` (``layers=1``)."""

    operator = "gcn"
    kind = "sgc"

    def make_layer(self, in_channels, out_channels, *, order, generator):
        return SGCLayer(in_channels, out_channels, order=order, generator=generator)


@pytest.fixture
def sgc_registered(monkeypatch):
    """The two registry entries a new model needs (forked workers inherit them)."""
    monkeypatch.setitem(MODELS, "sgc", SGC)
    monkeypatch.setattr(gridgnn.config.choices, "MODELS", (*gridgnn.config.choices.MODELS, "sgc"))


def test_the_cost_model_reads_a_new_model_from_its_forward(sgc_registered):
    stats = GraphStats.from_counts(400, 4000, 30, 5)
    spec = model_spec(ModelSpec(30, 5, layers=1, model="sgc"), stats)
    (layer,) = spec.ops.layers
    assert [type(op) for op in layer.ops] == [Product, Aggregate, Aggregate, Bias]
    assert [op.backward for op in layer.ops if isinstance(op, Aggregate)] == [True, True]
    assert layer.products[0].reads_features and not layer.products[0].input_grad
    assert spec.ops.tail == (FullRows(5),) and spec.ops.parameters == ((30, 5), (5,))
    assert spec.ops.transforms_features and spec.self_loops  # Â's diagonal: the gcn operator's
    gcn = model_spec(ModelSpec(30, 5, layers=1, order="transform-first"), stats)
    for shape in (resolve_grid("1d", 4), resolve_grid("2d", 4)):
        sgc_step, gcn_step = predict_epoch(spec, stats, shape), predict_epoch(gcn, stats, shape)
        for phase in ("spmm_forward", "spmm_backward"):  # two hops: twice one GCN layer's SpMMs
            assert (sgc_step.bytes_by_phase[phase] == 2 * gcn_step.bytes_by_phase[phase]).all(), phase
        for phase in ("dense", "weight_grad", "loss"):
            assert (sgc_step.bytes_by_phase[phase] == gcn_step.bytes_by_phase[phase]).all(), phase


GRAPH = dict(dataset="csbm:nodes=131,classes=3,features=13", directed=True)
COMMON = dict(GRAPH, model="sgc", layers=1, epochs=3, dropout=0.5)
GRIDS = [dict(algo="1d"), dict(algo="1.5d", replication=2), dict(algo="2d", grid="2x2"), dict(algo="3d", grid="1x1x4")]


def test_a_new_model_trains_exactly_and_moves_the_predicted_bytes_on_every_algorithm(sgc_registered):
    config = TrainConfig(**COMMON)
    graph = load_graph(config)
    reference = Trainer(config, graph, build_aggregation(config, graph)).fit().epochs
    cases = [dict(COMMON, **grid, nprocs=4) for grid in GRIDS]
    per_rank = run_workers(mw.models_worker, 4, cases, timeout_s=300)
    for index, case in enumerate(cases):
        where, out = f"sgc {case['algo']}", per_rank[0][index]
        np.testing.assert_allclose(out["loss"], [r.loss for r in reference], rtol=1e-4, atol=1e-6, err_msg=where)
        assert out["acc"] == [(r.train_acc, r.val_acc, r.test_acc) for r in reference], where
        for epoch in out["comm"]:  # measured = modelled, every rank and phase, every epoch
            assert sum(sum(epoch["by_phase"][phase]) for phase in ("spmm_forward", "spmm_backward")) > 0, where
            for phase in PHASES:
                assert epoch["by_phase"][phase] == out["predicted"]["bytes"][phase].tolist(), (where, phase)
                assert epoch["calls_by_phase"][phase] == out["predicted"]["calls"][phase].tolist(), (where, phase)
