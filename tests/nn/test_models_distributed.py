"""Every model kind on every algorithm equals the local run, one table of models (`MODELS`).

Each row trains on odd grids with uneven vertex and feature blocks (157 and 131 vertices, 13 and 40 features), a
directed graph and class counts that do not divide the grid (5 and 3), with dropout:

- GCN, GraphSAGE (either order, with and without ``normalize``) and GIN (ε fixed and trainable, and with
  ``--gin-norm layer``: its row statistics all-reduced on ``col`` on 2D and 3D), 3 epochs, on
  P = 6: 1d, 1.5d 3x2, 2d 2x3, 3d 1x1x6 and P = 8: 3d 2x2x2;
- GAT on P = 6: 1d, 1.5d 3x2, 1.5d 2x3 (a replica without column blocks), 2d 2x3 and 3x2, 3d 1x1x6; P = 8: 3d
  2x2x2 (split rows: maxima and sums all-reduced on col and depth, coefficients travelling with the panels;
  K·C = 16 columns cut heads across the grid row); and P = 4: 2d 1x4 (3 output columns on 4 column blocks: one
  rank holds no column of any head, and its score sums must still take part in backward); a directed graph with
  K = 8 heads of 2 channels, 2 averaged output heads and both dropouts, and an undirected one with K = 1, 2 epochs.

Per row and grid: losses within 1e-4 of the local run's, identical accuracies, replicated weights identical on
every rank, the forward SpMM moves bytes, and every rank's measured communication equals the cost model's per
phase and epoch. One process group per world size trains every row of the table (`model_workers.models_worker`),
so a spawn is paid once per world size; each (world, model) pair is its own test."""

from __future__ import annotations

import functools

import model_workers as mw
import numpy as np
import pytest

from gridgnn.config import TrainConfig
from gridgnn.cost.epoch_model import PHASES
from gridgnn.launch.spawn import run_workers
from gridgnn.train.loop.trainer import Trainer
from gridgnn.train.run.training import build_aggregation, load_graph

DIRECTED = dict(dataset="csbm:nodes=157,classes=5,features=13", directed=True)
UNDIRECTED = dict(dataset="csbm:nodes=131,classes=3,features=40")
MPNN = dict(epochs=3, dropout=0.5, hidden=16)  # GCN, GraphSAGE and GIN: their settings and grids
MPNN_GRIDS = {6: [dict(algo="1d"), dict(algo="1.5d", replication=2), dict(algo="2d", grid="2x3"),
                  dict(algo="3d", grid="1x1x6")],
              8: [dict(algo="3d", grid="2x2x2")]}
GAT = dict(epochs=2, dropout=0.5)
GAT_GRIDS = {4: [dict(algo="2d", grid="1x4")],  # 3 classes on 4 column blocks: a rank without a column of the output
             6: [dict(algo="1d"), dict(algo="1.5d", replication=2), dict(algo="1.5d", replication=3),
                 dict(algo="2d", grid="2x3"), dict(algo="2d", grid="3x2"), dict(algo="3d", grid="1x1x6")],
             8: [dict(algo="3d", grid="2x2x2")]}

MODELS = {  # name: (the TrainConfig of its local run, the grids it trains on per world size)
    "gcn-directed": (dict(MPNN, **DIRECTED, model="gcn"), MPNN_GRIDS),
    "sage-transform-first-directed": (dict(MPNN, **DIRECTED, model="sage", order="transform-first"), MPNN_GRIDS),
    "sage-normalize": (dict(MPNN, **UNDIRECTED, model="sage", sage_normalize=True), MPNN_GRIDS),
    "gin-eps0.3-directed": (dict(MPNN, **DIRECTED, model="gin", gin_eps=0.3), MPNN_GRIDS),
    "gin-eps-trained-aggregate-first": (dict(MPNN, **UNDIRECTED, model="gin", gin_train_eps=True, gin_eps=0.1,
                                             order="aggregate-first"), MPNN_GRIDS),
    "gin-layer-norm-directed": (dict(MPNN, **DIRECTED, model="gin", gin_norm="layer"), MPNN_GRIDS),
    "gat-8-heads-directed": (dict(GAT, **DIRECTED, model="gat", heads=8, hidden=2, output_heads=2,
                                  attn_dropout=0.3), GAT_GRIDS),
    "gat-1-head": (dict(GAT, **UNDIRECTED, model="gat", hidden=5, attn_dropout=0.5), GAT_GRIDS),
}
WORLDS = sorted({world for _, grids in MODELS.values() for world in grids})


@functools.cache
def _local(name: str) -> list[tuple[float, tuple]]:
    """The one-process run of a row of `MODELS`: (loss, (train, val, test accuracy)) per epoch."""
    config = TrainConfig(**MODELS[name][0])
    graph = load_graph(config)
    result = Trainer(config, graph, build_aggregation(config, graph)).fit()
    return [(r.loss, (r.train_acc, r.val_acc, r.test_acc)) for r in result.epochs]


def _cases(world: int) -> list[tuple[str, dict]]:
    """Every (row of `MODELS`, its TrainConfig keywords on one grid) at this world size, in one fixed order."""
    return [(name, dict(config, **grid, nprocs=world)) for name, (config, grids) in MODELS.items()
            for grid in grids.get(world, [])]


@functools.cache
def _trained(world: int) -> list[list[dict]]:
    """What every rank returned for every case of `_cases(world)`: one process group per world size. The local runs
    go first: the forked workers then inherit what they imported and warmed."""
    for name in dict(_cases(world)):
        _local(name)
    return run_workers(mw.models_worker, world, [case for _, case in _cases(world)], timeout_s=600)


@pytest.mark.parametrize(("world", "name"), [pytest.param(world, name, id=f"P{world}-{name}") for world in WORLDS
                                             for name, (_, grids) in MODELS.items() if world in grids])
def test_every_model_matches_local_and_the_cost_model_on_every_grid(world, name):
    per_rank, reference = _trained(world), _local(name)
    rows = [(index, case) for index, (row, case) in enumerate(_cases(world)) if row == name]
    assert len(rows) == len(MODELS[name][1][world])
    for index, case in rows:
        where = f"{name} {case['algo']} {case.get('grid', '')} c={case.get('replication', 1)}"
        out = per_rank[0][index]
        np.testing.assert_allclose(out["loss"], [loss for loss, _ in reference], rtol=1e-4, atol=1e-6,
                                   err_msg=where)
        assert out["acc"] == [acc for _, acc in reference], where
        for other in per_rank[1:]:  # replicated parameters stay bit-identical on every rank
            for mine, theirs in zip(out["weights"], other[index]["weights"], strict=True):
                np.testing.assert_array_equal(mine, theirs, err_msg=where)
        assert sum(out["comm"][0]["by_phase"]["spmm_forward"]) > 0, where
        for epoch in out["comm"]:  # measured = modelled, every rank and phase, every epoch
            for phase in PHASES:
                assert epoch["by_phase"][phase] == out["predicted"]["bytes"][phase].tolist(), (where, phase)
                assert epoch["calls_by_phase"][phase] == out["predicted"]["calls"][phase].tolist(), (where, phase)
