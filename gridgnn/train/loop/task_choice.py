"""Settling a run's task and metric on its graph, and the line that states them. Not collective."""

from __future__ import annotations

import dataclasses

import numpy as np

from gridgnn.config import TrainConfig, TrainingOptions
from gridgnn.data.graph import Graph
from gridgnn.data.prepared import PreparedGraph
from gridgnn.data.targets import labelled_vertices
from gridgnn.errors import ConfigError
from gridgnn.train.loop.task_metrics import resolve_metric


def task_of(training: TrainingOptions, graph: Graph | PreparedGraph) -> str:
    """The task a run trains: the graph's (its targets are laid out for it, `gridgnn.data.targets`); a
    ``training.task`` (a run's training section, or its whole `TrainConfig`) other than ``auto`` must be that
    one (`gridgnn.data.retarget.with_task` lays a graph's targets out for another task when it is loaded).
    Raises `ConfigError` otherwise."""
    task = graph.task
    if training.task not in ("auto", task):
        again = " (prepare it again with --task)" if isinstance(graph, PreparedGraph) else ""
        raise ConfigError(f"the run asks for --task {training.task} but graph '{graph.name}' holds {task} "
                          f"targets{again}")
    return task


def settle_task(config: TrainConfig, graph: Graph | PreparedGraph) -> TrainConfig:
    """``config`` with its task and metric settled on ``graph`` (`task_of`, the task's default metric for
    ``auto``: `gridgnn.train.loop.task_metrics.resolve_metric`) and `task_line` in ``task_reason`` (printed once
    every check has passed, just before training: the run's first line); ``config`` itself when settled."""
    task = task_of(config, graph)
    metric = resolve_metric(config.metric, task)
    if (config.task, config.metric) == (task, metric) and config.task_reason is not None:
        return config
    return dataclasses.replace(config, task=task, metric=metric,
                               task_reason=task_line(config, graph, task, metric))


def task_line(config: TrainConfig, graph: Graph | PreparedGraph, task: str, metric: str) -> str:
    """E.g. ``task       multilabel (inferred from the targets): 112 targets, 86,619 of 132,534 vertices
    labelled; metric rocauc``."""
    how = "inferred from the targets" if config.task == "auto" else "--task"
    outputs = f"{graph.num_classes} {'classes' if task == 'multiclass' else 'targets'}"
    labelled = int(np.count_nonzero(labelled_vertices(graph.labels, task)))
    metric_how = " (its default)" if config.metric == "auto" else ""
    standardized = "; targets standardized" if config.standardize_targets else ""
    return (f"task       {task} ({how}): {outputs}, {labelled:,} of {graph.num_nodes:,} vertices labelled; "
            f"metric {metric}{metric_how}{standardized}")
