"""GraphSAGE and GIN (and GCN) on every algorithm: the local run's losses and accuracies on odd grids (P = 6:
1d, 1.5d 3x2, 2d 2x3, 3d 1x1x6; P = 8: 3d 2x2x2), uneven vertex and feature blocks (157 and 131 vertices, 13
and 40 features), a directed graph and class counts that do not divide the grid (5 and 3), with dropout; every
rank's communication equal to the cost model's, per phase; replicated weights identical on every rank.

One process group per world size trains every case (`model_workers.models_worker`)."""

from __future__ import annotations

import model_workers as mw
import numpy as np
import pytest

from gridgnn.config import TrainConfig
from gridgnn.cost.epoch_model import PHASES
from gridgnn.launch.spawn import run_workers
from gridgnn.train.run import build_aggregation, load_graph
from gridgnn.train.trainer import Trainer

DIRECTED = dict(dataset="csbm:nodes=157,classes=5,features=13", directed=True)
UNDIRECTED = dict(dataset="csbm:nodes=131,classes=3,features=40")
MODELS = [
    dict(DIRECTED, model="gcn"),
    dict(DIRECTED, model="sage", order="transform-first"),
    dict(UNDIRECTED, model="sage", sage_normalize=True),
    dict(DIRECTED, model="gin", gin_eps=0.3),
    dict(UNDIRECTED, model="gin", gin_train_eps=True, gin_eps=0.1, order="aggregate-first"),
]
GRIDS = {6: [dict(algo="1d"), dict(algo="1.5d", replication=2), dict(algo="2d", grid="2x3"),
             dict(algo="3d", grid="1x1x6")],
         8: [dict(algo="3d", grid="2x2x2")]}
COMMON = dict(epochs=3, dropout=0.5, hidden=16)


def _local(kwargs: dict) -> list[tuple[float, tuple]]:
    config = TrainConfig(**kwargs)
    graph = load_graph(config)
    result = Trainer(config, graph, build_aggregation(config, graph)).fit()
    return [(r.loss, (r.train_acc, r.val_acc, r.test_acc)) for r in result.epochs]


@pytest.mark.parametrize("world", sorted(GRIDS))
def test_every_model_matches_local_and_the_cost_model_on_every_grid(world):
    cases = [dict(COMMON, **model, **grid, nprocs=world) for grid in GRIDS[world] for model in MODELS]
    references = [_local(dict(COMMON, **model)) for model in MODELS]
    per_rank = run_workers(mw.models_worker, world, cases, timeout_s=600)
    for index, case in enumerate(cases):
        where = f"{case['model']} {case['algo']} {case.get('grid', '')} {case['dataset']}"
        out, reference = per_rank[0][index], references[index % len(MODELS)]
        np.testing.assert_allclose(out["loss"], [loss for loss, _ in reference], rtol=1e-4, atol=1e-6,
                                   err_msg=where)
        assert out["acc"] == [acc for _, acc in reference], where
        for other in per_rank[1:]:  # replicated parameters stay bit-identical on every rank
            for mine, theirs in zip(out["weights"], other[index]["weights"], strict=True):
                np.testing.assert_array_equal(mine, theirs, err_msg=where)
        for epoch in out["comm"]:  # measured = modelled, every rank and phase, every epoch
            for phase in PHASES:
                assert epoch["by_phase"][phase] == out["predicted"]["bytes"][phase].tolist(), (where, phase)
                assert epoch["calls_by_phase"][phase] == out["predicted"]["calls"][phase].tolist(), (where, phase)
