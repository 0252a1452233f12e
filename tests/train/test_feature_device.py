"""Sparse input features stay sparse only on a CPU: on any other device `gridgnn.train.loop.trainer.model_input` makes
them dense, and the memory and compute models, the planner (through its profile's ``device``) and the memory
guard (through the run's own device) price them so."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from gridgnn.config import TrainConfig
from gridgnn.cost.epoch_model import predict_epoch
from gridgnn.cost.graph_stats import GraphStats
from gridgnn.cost.memory_model import sparse_features
from gridgnn.cost.process_baseline import process_baseline
from gridgnn.cost.profile import CPU_GLOO_LOOPBACK, GPU_CLUSTER, MachineProfile, check_profile_dict, load_profile
from gridgnn.grid.shape import resolve_grid
from gridgnn.nn.layout import LocalLayout
from gridgnn.nn.trace import model_spec
from gridgnn.plan.planner import plan
from gridgnn.sparse.csr import SparseBlock
from gridgnn.train.loop.trainer import model_input
from gridgnn.train.run.training import load_graph

CORA = TrainConfig(dataset="cora", data_root="../shared/datasets")


@pytest.fixture(scope="module")
def cora():
    graph = load_graph(CORA)
    return graph, GraphStats.from_graph(graph)


def test_the_rule_follows_model_input(cora):
    graph, stats = cora
    assert sparse_features(stats, "cpu") and not sparse_features(stats, "cuda")
    layout = LocalLayout(lambda x: x, "gcn", graph.num_nodes)
    kept = model_input(graph.features, layout, graph.num_features)
    assert not isinstance(kept, torch.Tensor)  # sparse on the CPU: what sparse_features(..., "cpu") says
    assert isinstance(kept.block(0.0, seed=0, epoch=1, layer=0, training=False), SparseBlock)


def test_memory_and_compute_price_dense_features_on_a_gpu(cora):
    _, stats = cora
    shape = resolve_grid("2d", 4, grid="2x2")
    cpu = predict_epoch(model_spec(CORA, stats), stats, shape, profile=GPU_CLUSTER, device="cpu")
    gpu = predict_epoch(model_spec(CORA, stats), stats, shape, profile=GPU_CLUSTER, device="cuda")
    rows = np.diff(np.linspace(0, stats.num_nodes, 3).astype(int))  # 2 row blocks, 2 column blocks of 1433
    dense = np.repeat(rows, 2) * np.tile([717, 716], 2) * 4
    np.testing.assert_array_equal(gpu.memory["features"], dense)
    assert (cpu.memory["features"] < dense / 5).all()  # 1.3 % of its values stored, 16 B each, and row indices
    assert (gpu.compute_s > cpu.compute_s).all()
    assert gpu.bytes.tolist() == cpu.bytes.tolist()  # what moves does not depend on it


def test_the_planner_prices_its_profiles_device(cora):
    _, stats = cora
    on_cpu = dataclasses.replace(GPU_CLUSTER, device="cpu")
    gpu = {(e.algo, e.grid, e.comm): e for e in plan(CORA, stats, 4, profile=GPU_CLUSTER).entries}
    cpu = {(e.algo, e.grid, e.comm): e for e in plan(CORA, stats, 4, profile=on_cpu).entries}
    for key, entry in gpu.items():
        assert entry.prediction.memory["features"].max() > cpu[key].prediction.memory["features"].max(), key
        assert entry.prediction.bytes.tolist() == cpu[key].prediction.bytes.tolist(), key


def test_the_memory_guard_prices_the_runs_own_device(cora, monkeypatch):
    import gridgnn.train.run.memory_guard as guard

    _, stats = cora
    grid = dataclasses.replace(CORA, algo="2d", nprocs=4)
    on_cpu = {c.algo: guard.predicted_per_proc(c, stats, 4) for c in (CORA, grid)}
    monkeypatch.setattr(guard, "default_device", lambda: torch.device("cuda", 0))
    on_gpu = {c.algo: guard.predicted_per_proc(c, stats, 4) for c in (CORA, grid)}
    # a local run computes on the GPU too (dense features there), so both hold the dense feature block
    for algo, dense_block in (("local", stats.num_nodes * stats.num_features * 4),
                              ("2d", (stats.num_nodes / 2) * (stats.num_features / 2) * 4)):  # busiest of 2 x 2
        working = {device: predicted - process_baseline(device) for device, predicted in
                   (("cuda", on_gpu[algo]), ("cpu", on_cpu[algo]))}
        assert working["cuda"] - working["cpu"] >= 0.9 * dense_block, algo


def test_the_memory_guards_suggestions_are_priced_for_this_machine(cora):
    """On a CPU the configurations the guard offers are priced with sparse features, as the run was: Cora on
    1D with 2 processes, refused at a byte below its need, is offered P = 4 configurations (priced as a GPU
    cluster's, with dense features, only 32-process grids would fit)."""
    from gridgnn.train.run.memory_guard import memory_refusal, predicted_per_proc

    graph, stats = cora
    run = dataclasses.replace(CORA, algo="1d", nprocs=2)
    need = predicted_per_proc(run, stats, 2)
    refusal = memory_refusal(dataclasses.replace(run, memory_per_proc=need - 1), graph, 2, 1)
    assert refusal is not None and "configurations that fit" in refusal
    assert "--nprocs 4" in refusal and "--nprocs 32" not in refusal, refusal


def test_profiles_name_their_device(tmp_path):
    assert GPU_CLUSTER.device == "cuda" and CPU_GLOO_LOOPBACK.device == "cpu"
    assert load_profile("cpu-local").device == "cpu"
    data = GPU_CLUSTER.to_dict()
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    assert load_profile(path) == GPU_CLUSTER
    del data["device"]  # a file written before the field: a CPU's
    assert MachineProfile.from_dict(data).device == "cpu"
    assert sparse_features(GraphStats.from_graph(load_graph(CORA)), "cpu:0")  # a device name, not its type
    for bad in ("", 3, None):
        with pytest.raises(ValueError, match="'device' must be"):
            check_profile_dict({**data, "device": bad})
