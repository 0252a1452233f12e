"""The single-process trainer: determinism, best-validation tracking, configuration checks."""

import pytest
import torch
from model_helpers import random_graph

from gridgnn.config import TrainConfig
from gridgnn.data.generators import csbm
from gridgnn.errors import ConfigError
from gridgnn.train import deterministic, run_training


def _losses(config, graph):
    return [record.loss for record in run_training(config, graph=graph).result.epochs]


def test_same_seed_gives_identical_runs_and_other_seeds_differ():
    graph = csbm(nodes=400, seed=1)
    config = TrainConfig(epochs=15, seed=4)
    first, second = _losses(config, graph), _losses(config, graph)
    assert first == second
    assert _losses(TrainConfig(epochs=15, seed=5), graph) != first


def test_sparse_features_and_aggregate_first_train_identically_up_to_rounding():
    graph = random_graph(n=80, sparse_features=True, directed=True)
    auto = _losses(TrainConfig(epochs=10), graph)
    aggregate_first = _losses(TrainConfig(epochs=10, order="aggregate-first"), graph)
    assert aggregate_first == pytest.approx(auto, rel=1e-4)


def test_records_and_best_validation():
    run = run_training(TrainConfig(epochs=30, seed=2), graph=csbm(nodes=300, seed=2))
    records = run.result.epochs
    assert [r.epoch for r in records] == list(range(1, 31))
    assert all(0.0 <= r.val_acc <= 1.0 and r.time_s > 0 for r in records)
    final = run.metrics["final"]
    best = max(r.val_acc for r in records)
    first_best = next(r for r in records if r.val_acc == best)
    assert final["best_val_acc"] == best and final["best_epoch"] == first_best.epoch
    assert final["test_acc_at_best_val"] == first_best.test_acc
    assert final["test_acc"] == records[-1].test_acc and records[-1].loss < records[0].loss


def test_deterministic_context_restores_the_global_setting():
    before = torch.are_deterministic_algorithms_enabled()
    with deterministic(0):
        assert torch.are_deterministic_algorithms_enabled()
    assert torch.are_deterministic_algorithms_enabled() == before


@pytest.mark.parametrize("changes, word", [
    ({"epochs": 0}, "epochs"), ({"hidden": -1}, "hidden"), ({"layers": 1.5}, "layers"),
    ({"dropout": 1.0}, "dropout"), ({"lr": 0.0}, "lr"), ({"weight_decay": float("nan")}, "weight_decay"),
    ({"order": "sideways"}, "order"), ({"algo": "4d"}, "algo"), ({"grid": "2x"}, "grid"),
    ({"quiet": True, "progress": True}, "quiet"), ({"dataset": " "}, "dataset"), ({"seed": -1}, "seed"),
    ({"algo": "2d", "replication": 2}, "replication applies to --algo 1.5d only, not 2d"),
])
def test_config_validation_names_the_field(changes, word):
    with pytest.raises(ConfigError, match=word) as info:
        TrainConfig(**changes)
    assert "\n" not in str(info.value)


def test_config_to_dict_and_grid_shape():
    config = TrainConfig(grid="2x3", nprocs=6)
    assert config.to_dict()["grid"] == "2x3" and config.grid_shape() == (2, 3)
    assert TrainConfig().grid_shape() is None and set(config.to_dict()) >= {"dataset", "order", "seed"}


def test_distributed_algorithms_on_one_process_equal_local():
    graph = random_graph()
    local = run_training(TrainConfig(epochs=3), graph=graph)
    for algo in ("1d", "1.5d", "2d", "3d"):
        run = run_training(TrainConfig(epochs=3, algo=algo), graph=graph)
        assert [r.loss for r in run.result.epochs] == pytest.approx([r.loss for r in local.result.epochs],
                                                                     rel=1e-5)
        assert run.metrics["config"]["grid_shape"] in ("1", "1x1", "1x1x1") and run.metrics["device"] == "cpu"
