"""Whole training runs against published GCN accuracies (Kipf & Welling; Shchur et al.).

Kipf & Welling's setting throughout: 2 layers, hidden 16, dropout 0.5, weight decay 5e-4, Adam lr 0.01,
200 epochs (the `TrainConfig` defaults). The mean final test accuracy over the seeds must reach the bound.
"""

import statistics

import pytest
from model_helpers import shared_datasets

from gridgnn.config import TrainConfig
from gridgnn.train import load_graph, run_training


def mean_test_accuracy(dataset: str, seeds: range) -> float:
    accuracies = []
    for seed in seeds:
        config = TrainConfig(dataset=dataset, data_root=str(shared_datasets()), seed=seed)
        graph = load_graph(config)
        accuracies.append(run_training(config, graph=graph).metrics["final"]["test_acc"])
    return statistics.mean(accuracies)


@pytest.mark.slow  # Cora accuracy: the many-seed tests of this file; cora trains in test_first_contact
def test_cora_few_seeds():
    assert mean_test_accuracy("cora", range(3)) >= 0.805


@pytest.mark.slow
@pytest.mark.parametrize("dataset, bound", [("cora", 0.805), ("citeseer", 0.695), ("amazon-photo", 0.89)])
def test_ten_seeds(dataset, bound):
    assert mean_test_accuracy(dataset, range(10)) >= bound
