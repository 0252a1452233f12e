"""GAT on every algorithm equals the local run: P = 6 on 1d, 1.5d 3x2, 1.5d 2x3 (a replica without column blocks), 2d
2x3 and 3x2, 3d 1x1x6, and P = 8 on 3d 2x2x2 (split rows: maxima and sums all-reduced on col and depth,
coefficients travelling with the panels; K·C = 16 columns cut heads across the grid row; uneven vertex blocks of
157 and 131 vertices), and P = 4 on 2d 1x4 (3 output columns on 4 column blocks: one rank holds no column of any
head, and its score sums must still take part in backward), a directed graph with K = 8 heads of 2 channels, 2
averaged output heads and both dropouts, and an undirected one with K = 1; losses within 1e-4, identical
accuracies, replicated weights identical on every rank, and every rank's measured communication equal to the cost
model's per phase and epoch (one process group per world size trains every case)."""

from __future__ import annotations

import model_workers as mw
import numpy as np
import pytest

from gridgnn.config import TrainConfig
from gridgnn.cost.epoch_model import PHASES
from gridgnn.launch.spawn import run_workers
from gridgnn.train.run import build_aggregation, load_graph
from gridgnn.train.trainer import Trainer

MODELS = [
    dict(dataset="csbm:nodes=157,classes=5,features=13", directed=True, model="gat", heads=8, hidden=2,
         output_heads=2, attn_dropout=0.3),
    dict(dataset="csbm:nodes=131,classes=3,features=40", model="gat", hidden=5, attn_dropout=0.5),
]
GRIDS = {4: [dict(algo="2d", grid="1x4")],  # 3 classes on 4 column blocks: a rank without a column of the output
         6: [dict(algo="1d"), dict(algo="1.5d", replication=2), dict(algo="1.5d", replication=3),
             dict(algo="2d", grid="2x3"), dict(algo="2d", grid="3x2"), dict(algo="3d", grid="1x1x6")],
         8: [dict(algo="3d", grid="2x2x2")]}
COMMON = dict(epochs=2, dropout=0.5)


def _local(kwargs: dict) -> list[tuple[float, tuple]]:
    config = TrainConfig(**kwargs)
    graph = load_graph(config)
    result = Trainer(config, graph, build_aggregation(config, graph)).fit()
    return [(r.loss, (r.train_acc, r.val_acc, r.test_acc)) for r in result.epochs]


@pytest.mark.parametrize("world", sorted(GRIDS))
def test_gat_matches_local_and_the_cost_model_on_every_algorithm(world):
    cases = [dict(COMMON, **model, **grid, nprocs=world) for grid in GRIDS[world] for model in MODELS]
    references = [_local(dict(COMMON, **model)) for model in MODELS]
    per_rank = run_workers(mw.models_worker, world, cases, timeout_s=600)
    for index, case in enumerate(cases):
        where = f"{case['algo']} {case.get('grid', '')} c={case.get('replication', 1)} heads={case.get('heads', 1)}"
        out, reference = per_rank[0][index], references[index % len(MODELS)]
        np.testing.assert_allclose(out["loss"], [loss for loss, _ in reference], rtol=1e-4, atol=1e-6,
                                   err_msg=where)
        assert out["acc"] == [acc for _, acc in reference], where
        for other in per_rank[1:]:
            for mine, theirs in zip(out["weights"], other[index]["weights"], strict=True):
                np.testing.assert_array_equal(mine, theirs, err_msg=where)
        assert sum(out["comm"][0]["by_phase"]["spmm_forward"]) > 0, where
        for epoch in out["comm"]:
            for phase in PHASES:
                assert epoch["by_phase"][phase] == out["predicted"]["bytes"][phase].tolist(), (where, phase)
                assert epoch["calls_by_phase"][phase] == out["predicted"]["calls"][phase].tolist(), (where, phase)

