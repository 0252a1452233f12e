"""A graph's targets laid out for another task (``--task`` given where a reader inferred another one)."""

from __future__ import annotations

import dataclasses

import numpy as np

from gridgnn.data.graph import Graph
from gridgnn.data.targets import UNLABELLED, canonical_targets


def with_task(graph: Graph, task: str) -> Graph:
    """``graph`` with its targets for ``task`` (``auto``: as it is). Classes become one 0/1 or real column per
    vertex (unlabelled -> NaN) and back; raises `gridgnn.errors.DataError` (one line) when the targets cannot
    be read as that task (fractional values as classes, values other than 0/1 as multilabel...)."""
    if task in ("auto", graph.task):
        return graph
    raw = graph.labels
    if graph.task == "multiclass":
        raw = np.where(raw == UNLABELLED, np.nan, raw.astype(np.float64))
    targets = canonical_targets(raw, graph.num_nodes, task, where=f"graph '{graph.name}' as a {task} task")
    return dataclasses.replace(graph, labels=targets.values, task=targets.task, num_classes=targets.num_outputs)
