"""The models that read edge features, on one process and on the 1D and 1.5D grids: GINE (`gridgnn.nn.gine`, PyG's
``GINEConv``), GAT with ``--edge-dim`` (PyG's ``GATConv(edge_dim=...)``, self-loops filled with the mean of their
in-edges) and MeshGraphNet (`gridgnn.nn.meshgraphnet`, edge features updated per layer).

- Grids (one process group of 4): GINE on 1d with dense and sparse communication, 1.5d 2x2, 2d 2x2 and 1x4,
  and 3d 2x2x1 and 1x1x4 (its message is separable over feature columns: each process runs the edges into its
  rows on its columns; 3D gathers a block's rows on ``depth`` first), on the mesh
  generator (regression, 3 edge features) and on a directed csbm graph whose 4 edge features come from
  ``--edge-features`` in the file's edge order, reordered by METIS (the rows follow their edges); MeshGraphNet
  (3 layers: the edge state changes width, then keeps it with its residual) on 1d sparse and 1.5d; GAT with
  ``--edge-dim 4`` (2 heads concatenated, 2 averaged, attention dropout 0.3: masks by original ids) on 1d
  METIS-reordered, 1.5d, 2d 1x4 and 3d 1x1x4 (one output head there), and (3 heads of 3 channels, cut across
  column blocks) on 2d 2x2 (one output head) and 3d 2x2x1: losses within
  1e-4 of the local run's, identical metrics, replicated weights identical on every rank, and every rank's
  measured communication (halo rows forward and back, the gradient all-reduce) equal to the cost model's per
  phase, calls included, every epoch; the set-up's index exchange equal to its model too.
- PyG: a trained GINE model's file loads back into the same predictions and `gridgnn.to_pyg` maps it onto
  ``GINEConv`` (called with ``edge_attr``) with the same probabilities (within 1e-5); a MeshGraphNet file
  loads back into the same values, and `to_pyg` refuses it with one line (no PyG layer is the same).
- Both kinds again on a 2x2x2 grid (8 processes: the row halo and the depth gather together; slow).
- Refusals: GINE on a graph without edge features, MeshGraphNet (not separable) on 2D and 3D, and edge
  features given to a model that reads none, each one line (exit 2) before any worker starts.
"""

from __future__ import annotations

import functools

import model_workers as mw
import numpy as np
import pytest
import torch

import gridgnn
from gridgnn.cli.main import main
from gridgnn.config import TrainConfig
from gridgnn.cost.epoch_model import PHASES, predict_run
from gridgnn.data.interop import graph_to_pyg
from gridgnn.errors import ConfigError
from gridgnn.launch.spawn import run_workers
from gridgnn.nn.trace import model_spec
from gridgnn.train.loop.trainer import Trainer
from gridgnn.train.run.training import build_aggregation, load_graph

MESH = dict(dataset="mesh:nodes=150", model="gine", epochs=3, hidden=8, dropout=0.5)
CSBM = dict(dataset="csbm:nodes=97,classes=3,features=6", directed=True, model="gine", epochs=3, hidden=8,
            gin_train_eps=True, gin_eps=0.2)
GRIDS = [dict(algo="1d"), dict(algo="1d", comm="sparse"), dict(algo="1.5d", replication=2), dict(algo="2d", grid="2x2"),
         dict(algo="2d", grid="1x4"), dict(algo="3d", grid="2x2x1"), dict(algo="3d", grid="1x1x4", comm="sparse")]
MGN = dict(dataset="mesh:nodes=130", model="meshgraphnet", layers=3, epochs=3, hidden=6, dropout=0.2)


@functools.cache
def _edge_file(folder: str) -> str:
    """A (E, 4) .npy of edge features for CSBM's edges in the generator's CSR order, one run per folder."""
    graph = load_graph(TrainConfig(**CSBM))
    rng = np.random.default_rng(3)
    path = f"{folder}/edges.npy"
    np.save(path, rng.standard_normal((graph.num_edges, 4)).astype(np.float32))
    return path


@pytest.fixture(scope="module")
def csbm(tmp_path_factory) -> dict:
    return dict(CSBM, edge_features=_edge_file(str(tmp_path_factory.mktemp("gine"))))


def _local(config: dict) -> list:
    cfg = TrainConfig(**config)
    graph = load_graph(cfg)
    epochs = Trainer(cfg, graph, build_aggregation(cfg, graph)).fit().epochs
    return [(r.loss, r.train_metric, r.val_metric) for r in epochs]


@functools.cache
def _trained(csbm_path: str) -> tuple[list[dict], list[list[dict]]]:
    cases = [dict(MESH, **grid, nprocs=4) for grid in GRIDS]
    cases.append(dict(CSBM, edge_features=csbm_path, algo="1d", nprocs=4, reorder="metis"))
    cases += [dict(MGN, algo="1d", comm="sparse", nprocs=4), dict(MGN, algo="1.5d", replication=2, nprocs=4)]
    cases.append(dict(MESH, algo="2d", grid="2x2", nprocs=4, gin_norm="layer"))  # the norm's row sums on col
    gat = dict(CSBM, model="gat", gin_train_eps=False, gin_eps=0.0, heads=2, output_heads=2, hidden=3, edge_dim=4,
               edge_features=csbm_path, attn_dropout=0.3)
    cases += [dict(gat, algo="1d", nprocs=4, reorder="metis"), dict(gat, algo="1.5d", replication=2, nprocs=4),
              # 2D: the scores' per-head sums from each process's columns (a head cut across column blocks)
              dict(gat, algo="2d", grid="2x2", nprocs=4, heads=3, output_heads=1, comm="sparse"),
              dict(gat, algo="2d", grid="1x4", nprocs=4), dict(gat, algo="3d", grid="2x2x1", nprocs=4, heads=3),
              dict(gat, algo="3d", grid="1x1x4", nprocs=4, output_heads=1)]
    return cases, run_workers(mw.models_worker, 4, cases, timeout_s=300)


def test_gine_gat_and_meshgraphnet_on_their_grids_equal_one_process_and_the_cost_model(csbm):
    cases, per_rank = _trained(csbm["edge_features"])
    for index, case in enumerate(cases):
        local = dict(case, algo="local", nprocs=1, comm="auto", replication=1, reorder="none")
        reference = _local({k: v for k, v in local.items() if k not in ("nprocs", "comm", "replication")})
        out = per_rank[0][index]
        where = f"{case['dataset']} {case['algo']} {case.get('grid', '')} {case.get('comm', '')}"
        np.testing.assert_allclose(out["loss"], [r[0] for r in reference], rtol=1e-4, atol=1e-6, err_msg=where)
        np.testing.assert_allclose([m[0] for m in out["metric"]], [r[1] for r in reference], rtol=1e-4,
                                   err_msg=where)
        for other in per_rank[1:]:
            for mine, theirs in zip(out["weights"], other[index]["weights"], strict=True):
                np.testing.assert_array_equal(mine, theirs, err_msg=where)
        if case.get("grid") != "1x4":  # one row block: no halo
            assert max(out["comm"][0]["by_phase"]["spmm_forward"]) > 0, where  # halo rows move
        for epoch in out["comm"]:
            for phase in PHASES:
                assert epoch["by_phase"][phase] == out["predicted"]["bytes"][phase].tolist(), (where, phase)
                assert epoch["calls_by_phase"][phase] == out["predicted"]["calls"][phase].tolist(), (where, phase)


@pytest.mark.slow
def test_gine_and_gat_with_edge_features_on_a_full_3d_grid(csbm):
    gat = dict(CSBM, model="gat", gin_train_eps=False, gin_eps=0.0, heads=3, output_heads=1, hidden=3, edge_dim=4,
               edge_features=csbm["edge_features"], attn_dropout=0.3)
    cases = [dict(MESH, algo="3d", grid="2x2x2", nprocs=8), dict(gat, algo="3d", grid="2x2x2", nprocs=8, comm="sparse")]
    per_rank = run_workers(mw.models_worker, 8, cases, timeout_s=300)
    for index, case in enumerate(cases):
        local = {k: v for k, v in case.items() if k not in ("nprocs", "comm", "grid")}
        reference = _local(dict(local, algo="local"))
        out = per_rank[0][index]
        np.testing.assert_allclose(out["loss"], [r[0] for r in reference], rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose([m[0] for m in out["metric"]], [r[1] for r in reference], rtol=1e-4)
        assert min(out["comm"][0]["by_phase"]["spmm_forward"]) > 0
        for epoch in out["comm"]:
            for phase in PHASES:
                assert epoch["by_phase"][phase] == out["predicted"]["bytes"][phase].tolist(), phase
                assert epoch["calls_by_phase"][phase] == out["predicted"]["calls"][phase].tolist(), phase


def test_the_halo_index_exchange_is_priced_at_set_up(csbm):
    config = TrainConfig(**MESH, algo="1d", nprocs=4)
    graph = load_graph(config)
    from gridgnn.grid.shape import resolve_grid

    prediction = predict_run(model_spec(config, graph), graph, resolve_grid("1d", 4), config)
    setup = prediction.setup_sum("bytes", "all_to_all")
    assert (setup > 8 * 3).all()  # counts, then the ids each holder is asked for
    assert prediction.memory["messages"].min() > 0


def test_a_gine_model_file_maps_onto_pyg_gineconv(tmp_path, csbm):
    graph = gridgnn.as_graph(csbm["dataset"], directed=True, edge_features=csbm["edge_features"])
    assert graph.num_edge_features == 4
    result = gridgnn.fit(graph, epochs=1, layers=2, model="gine", hidden=16, gin_eps=0.2, gin_train_eps=True, lr=0.001)
    path = result.save(tmp_path / "gine.pt")
    document = torch.load(path, weights_only=True)
    assert document["model"] == "gine" and document["config"]["edge_dim"] == 4
    assert document["state"]["layers.0.edge_weight"].shape == (4, 6)
    loaded = gridgnn.load_model(path)
    expected = result.predict()
    assert expected.probabilities.std(dim=0).min() > 1e-3  # not a constant (a dead ReLU would hide the mapping)
    assert torch.equal(gridgnn.predict(loaded, graph).probabilities, expected.probabilities)
    converted = gridgnn.to_pyg(loaded)
    assert {type(conv).__name__ for conv in converted.convs} == {"GINEConv"}
    data = graph_to_pyg(graph)
    probabilities = converted(data.x, data.edge_index, data.edge_attr).exp()
    assert (probabilities - expected.probabilities).abs().max().item() < 1e-5


@pytest.mark.parametrize(("flags", "message"), [
    (["--dataset", "csbm:nodes=60", "--model", "gine"], "--model gine needs edge features: the graph has none"),
    (["--dataset", "mesh:nodes=60", "--model", "meshgraphnet", "--algo", "2d", "--nprocs", "4"],
     "--model meshgraphnet runs on the 1d and 1.5d grids"),
    (["--dataset", "mesh:nodes=60", "--model", "meshgraphnet", "--algo", "3d", "--nprocs", "8"],
     "--model meshgraphnet runs on the 1d and 1.5d grids"),
    (["--dataset", "mesh:nodes=60", "--model", "gat", "--edge-dim", "5"],
     "--edge-dim 5 was given, but the graph's edges have 3 features each"),
    (["--dataset", "mesh:nodes=60", "--edge-dim", "3"], "--edge-dim applies to --model gat"),
])
def test_gine_refusals_are_one_line_and_exit_2(flags, message, capsys):
    assert main(["train", *flags, "--epochs", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


def test_edge_features_for_a_model_that_reads_none_are_refused(tmp_path, capsys, csbm):
    assert main(["train", "--dataset", csbm["dataset"], "--directed", "--edge-features", csbm["edge_features"],
                 "--epochs", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "reads no edge features (models that do: gine, meshgraphnet, gat --edge-dim D)" in err


def test_a_meshgraphnet_model_file_round_trips_and_to_pyg_refuses_it(tmp_path):
    graph = gridgnn.as_graph(MGN["dataset"])
    result = gridgnn.fit(graph, epochs=2, model="meshgraphnet", layers=3, hidden=6, dropout=0.0)
    path = result.save(tmp_path / "mgn.pt")
    document = torch.load(path, weights_only=True)
    assert document["model"] == "meshgraphnet" and document["config"]["edge_dim"] == 3
    assert document["state"]["layers.0.edge_mlp.0.weight"].shape == (6, 3 + 2 * 4)  # [e, x_i, x_j] -> hidden
    loaded = gridgnn.load_model(path)
    assert torch.equal(gridgnn.predict(loaded, graph).predicted, result.predict().predicted)
    with pytest.raises(ConfigError, match="cannot be converted to PyG"):
        gridgnn.to_pyg(loaded)


def test_a_gat_with_edge_features_maps_onto_pyg_gatconv_with_edge_dim(tmp_path, csbm):
    graph = gridgnn.as_graph(csbm["dataset"], directed=True, edge_features=csbm["edge_features"])
    result = gridgnn.fit(graph, epochs=3, model="gat", heads=2, output_heads=2, hidden=3, edge_dim=4)
    loaded = gridgnn.load_model(result.save(tmp_path / "gat.pt"))
    assert loaded.edge_dim == 4 and torch.equal(gridgnn.predict(loaded, graph).probabilities,
                                                result.predict().probabilities)
    assert result.predict().probabilities.std(dim=0).min() > 1e-3  # not a constant
    converted = gridgnn.to_pyg(loaded)
    assert all(conv.lin_edge is not None for conv in converted.convs)
    data = graph_to_pyg(graph)
    probabilities = converted(data.x, data.edge_index, data.edge_attr).exp()
    assert (probabilities - result.predict().probabilities).abs().max().item() < 1e-5


def test_a_regression_checkpoint_of_an_edge_model_predicts_alike_on_one_process_and_a_grid(tmp_path, capsys):
    """A checkpoint folder of a GINE run (a regression: its history holds metrics, not accuracies) is read back
    with the edge features' width from its fingerprint, and predicts the same values on one process and on a 1d
    grid of two (the halo exchange in inference)."""
    folder = tmp_path / "ck"
    assert main(["train", "--dataset", MESH["dataset"], "--model", "gine", "--epochs", "2", "--hidden", "8",
                 "--checkpoint-dir", str(folder), "--quiet"]) == 0
    checkpoint = str(next(folder.glob("epoch-*")))
    outputs = []
    for extra in ([], ["--nprocs", "2", "--algo", "1d"]):
        out = tmp_path / f"p{len(outputs)}.csv"
        assert main(["predict", "--model", checkpoint, "--dataset", MESH["dataset"], "--predictions-out", str(out),
                     *extra]) == 0
        outputs.append(np.loadtxt(out, delimiter=",", skiprows=1))
    capsys.readouterr()
    assert outputs[0].shape == (150, 2)
    np.testing.assert_allclose(outputs[0], outputs[1], rtol=1e-5, atol=1e-6)
