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

import gridgnn
import gridgnn.config.choices
from gridgnn.cli.main import main
from gridgnn.config import TrainConfig
from gridgnn.cost.epoch_model import PHASES, ModelSpec, predict_epoch
from gridgnn.cost.graph_stats import GraphStats
from gridgnn.cost.operations import Aggregate, Bias, FullRows, Product
from gridgnn.errors import ConfigError
from gridgnn.grid.shape import resolve_grid
from gridgnn.launch.spawn import run_workers
from gridgnn.nn.export import ModelFileError
from gridgnn.nn.models import MODELS, label_of
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


# --- what else a kind says about itself (its class, nothing elsewhere): its name in summaries, its model file and
# its PyG mapping, each asked for only where it is used -----------------------------------------------------------

PLAN = ["plan", "--num-nodes", "400", "--num-edges", "4000", "--num-features", "13", "--num-classes", "3",
        "--model", "sgc", "--layers", "1", "--nprocs", "4"]
TRAIN = ["train", "--dataset", GRAPH["dataset"], "--directed", "--model", "sgc", "--layers", "1", "--epochs", "2",
         "--hidden", "8"]


def test_plan_and_train_name_a_new_model_by_its_label_or_else_its_kind(sgc_registered, monkeypatch, capsys):
    assert main(PLAN) == 0
    out = capsys.readouterr().out
    assert "\nmodel      sgc widths 13-3," in out  # no label: the kind name
    assert "--model sgc" in out  # the command the plan proposes selects it
    monkeypatch.setattr(SGC, "label", "SGC")
    assert main(PLAN) == 0
    assert "\nmodel      SGC widths 13-3," in capsys.readouterr().out
    assert main(TRAIN) == 0
    assert "\nmodel      SGC 1 layers, hidden 8," in capsys.readouterr().out
    assert [label_of(kind) for kind in ("gcn", "sage", "gin", "gat")] == ["GCN", "GraphSAGE-mean", "GIN", "GAT"]


def test_saving_or_converting_a_kind_without_a_file_layout_is_refused_only_when_asked(sgc_registered, tmp_path,
                                                                                       capsys):
    target = tmp_path / "sgc.pt"
    assert main([*TRAIN, "--save-model", str(target)]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and "--save-model" in captured.err and "--model sgc" in captured.err
    assert "model      " not in captured.out and not target.exists()  # refused before training, nothing written
    trained = gridgnn.fit(dataset=GRAPH["dataset"], directed=True, model="sgc", layers=1, epochs=2)
    assert type(trained.model) is SGC
    probabilities = trained.predict().probabilities  # training and predicting need no file layout
    assert probabilities.shape == (131, 3) and torch.allclose(probabilities.sum(dim=1), torch.ones(131))
    with pytest.raises(ConfigError, match="kind sgc cannot be saved to a model file"):
        trained.save(target)
    assert not target.exists()
    with pytest.raises(ConfigError, match="kind sgc cannot be converted to PyG"):
        gridgnn.to_pyg(trained.model)
    with pytest.raises(ConfigError, match=r"fit\(nprocs > 1\): --model sgc has no model-file layout"):
        gridgnn.fit(dataset=GRAPH["dataset"], directed=True, model="sgc", layers=1, epochs=1, nprocs=2)  # no start
    gcn = gridgnn.fit(dataset=GRAPH["dataset"], directed=True, layers=1, epochs=1).save(tmp_path / "gcn.pt")
    document = torch.load(gcn, weights_only=True)
    torch.save(dict(document, model="sgc"), tmp_path / "claims_sgc.pt")  # a file naming a kind without a layout
    readable = "gcn, sage, gin, gat, gine, meshgraphnet"
    with pytest.raises(ModelFileError, match=f"unknown model kind 'sgc'.*reads {readable} model files"):
        gridgnn.load_model(tmp_path / "claims_sgc.pt")


class FiledSGC(SGC):
    """SGC given a model-file layout (no fields beyond the shared ones) and PyG's ``SGConv(in, out, K)`` as its
    mapping (``lin.weight = Wᵀ``, ``lin.bias = b``): all a kind writes, in its own class, to be saved and
    converted."""

    label = "SGC"
    file_fields = ()

    def file_config(self) -> dict:
        return self.stack_config()

    @classmethod
    def check_file_config(cls, config: dict) -> int:
        return 1

    @classmethod
    def from_file_config(cls, config: dict) -> FiledSGC:
        args, kwargs = cls.stack_arguments(config)
        return cls(*args, **kwargs)

    def pyg_convs(self) -> list[nn.Module]:
        from torch_geometric.nn import SGConv

        (layer,) = self.layers
        conv = SGConv(layer.in_channels, layer.out_channels, K=HOPS)
        with torch.no_grad():
            conv.lin.weight.copy_(layer.weight.detach().T)
            conv.lin.bias.copy_(layer.bias.detach())
        return [conv]


def test_a_new_model_given_a_file_layout_saves_loads_and_maps_onto_pyg(monkeypatch, tmp_path):
    pytest.importorskip("torch_geometric")
    monkeypatch.setitem(MODELS, "sgc", FiledSGC)
    model = FiledSGC(13, 8, 3, num_layers=1, seed=3).eval()
    with torch.no_grad():  # a bias that is not zero, so that its mapping counts
        model.layers[0].bias.uniform_(-0.5, 0.5, generator=torch.Generator().manual_seed(1))
    path = gridgnn.save_model(model, tmp_path / "sgc.pt")
    document = torch.load(path, weights_only=True)
    assert document["model"] == "sgc" and document["config"] == {
        "in_channels": 13, "hidden_channels": 3, "out_channels": 3, "num_layers": 1, "order": "auto",
        "dropout": 0.5, "seed": 3, "task": "multiclass"}
    loaded = gridgnn.load_model(path)
    assert type(loaded) is FiledSGC and loaded.state_dict().keys() == model.state_dict().keys()
    assert all(torch.equal(loaded.state_dict()[key], value) for key, value in model.state_dict().items())
    graph = gridgnn.as_graph("csbm:nodes=131,classes=3,features=13")
    data = gridgnn.graph_to_pyg(graph)
    ours = gridgnn.predict(loaded, graph).probabilities
    theirs = gridgnn.to_pyg(loaded)(data.x, data.edge_index).exp()
    assert (ours - theirs).abs().max().item() < 1e-5
