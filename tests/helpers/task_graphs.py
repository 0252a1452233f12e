"""Small graphs of every task for the tests (`gridgnn.data.targets`): a CSBM graph's structure and features
with targets that depend on neighbourhoods, some vertices or entries missing, saved as gridgnn graph files
so that forked workers load them by path."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from gridgnn.config import TrainConfig
from gridgnn.data.readers.native import save_graph
from gridgnn.data.splits import random_split
from gridgnn.data.targets import canonical_targets, labelled_vertices
from gridgnn.train.run.training import load_graph

BASE = "csbm:nodes=157,classes=5,features=13"


def task_graph(task: str, seed: int = 0, base: str = BASE, directed: bool = True):
    """The graph ``base`` with ``task`` targets: multiclass keeps its classes and hides 30 % of them (-1);
    multilabel has 3 targets (a neighbourhood mean of a feature above its median), 10 % of entries NaN;
    regression has 2 targets (neighbourhood means of features), 10 % NaN. Splits: 60/20/20 of the labelled."""
    graph = load_graph(TrainConfig(dataset=base, directed=directed, seed=seed))
    rng = np.random.default_rng(seed + 1)
    n = graph.num_nodes
    degree = np.maximum(np.asarray(graph.adj.sum(axis=1)).ravel(), 1)
    neighbourhood = np.asarray(graph.adj @ graph.dense_features()) / degree[:, None]
    if task == "multiclass":
        raw = graph.labels.copy()
        raw[rng.random(n) < 0.3] = -1
    elif task == "multilabel":
        raw = (neighbourhood[:, :3] > np.median(neighbourhood[:, :3], axis=0)).astype(np.float32)
        raw[rng.random(raw.shape) < 0.1] = np.nan
    else:
        raw = 3 * neighbourhood[:, 3:5] + 0.5
        raw[rng.random(raw.shape) < 0.1] = np.nan
    targets = canonical_targets(raw, n, task)
    masks = random_split(n, seed=seed, among=labelled_vertices(targets.values, task))
    return dataclasses.replace(graph, labels=targets.values, task=task, num_classes=targets.num_outputs,
                               train_mask=masks[0], val_mask=masks[1], test_mask=masks[2], name=f"{task}-graph")


def save_task_graphs(folder: Path, seed: int = 0) -> dict[str, str]:
    """Task -> path of its graph file in ``folder``."""
    return {task: str(save_graph(task_graph(task, seed), folder / f"{task}.npz"))
            for task in ("multiclass", "multilabel", "regression")}
