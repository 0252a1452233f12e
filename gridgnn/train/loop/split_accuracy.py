"""The score of a model's predictions on each split (train, val, test) of a graph with targets, for
``gridgnn predict``: what it prints and records in its ``--metrics-out`` file (accuracy for a classifier, the
task's default metric otherwise).

A split is measured when the graph has targets of the model's task (not the placeholders of a graph read
without labels, ``meta["labels"] == "none"``), as many outputs as the model, and the split holds vertices;
otherwise its value is null and ``reason`` says why. The sums are global (`gridgnn.train.loop.task_metrics`), so any
grid reports the number one process does.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

SPLITS = ("train", "val", "test")


def unmeasurable(graph, num_outputs: int, model_task: str = "multiclass") -> str | None:
    """Why no split of ``graph`` can be measured for a ``model_task`` model of ``num_outputs`` outputs, or None."""
    if getattr(graph, "meta", {}).get("labels") == "none":
        return "the graph has no labels"
    graph_task = graph.task
    if graph_task != model_task:
        return f"the graph holds {graph_task} targets, the model predicts {model_task} ones"
    if graph.num_classes != num_outputs:
        return f"the graph has {graph.num_classes} classes, the model predicts {num_outputs}"
    return None


def split_accuracies(output: Tensor, graph, rows: tuple[int, int], layout,
                     model_task: str = "multiclass") -> dict[str, dict]:
    """Each split's score of the model's ``output`` (m, C) on this process's ``rows`` of ``graph``, by the
    default metric of ``model_task`` (`gridgnn.train.loop.task_metrics.split_metrics`, the training run's own
    code). A classifier's entry is ``{"accuracy": float | None, "correct": int, "vertices": int[, "reason":
    str]}``; another task's ``{"metric": name, "value": float | None, "vertices": int[, "reason": str]}``.
    Collective on ``layout``'s world when measurable; whether it is depends on the graph and model alone, so
    every rank takes the same path."""
    from gridgnn.config import METRICS
    from gridgnn.data.targets import target_block
    from gridgnn.train.loop.task_metrics import SplitRows, split_metrics

    metric, (r0, r1) = METRICS[model_task][0], rows
    why = unmeasurable(graph, output.shape[1], model_task)
    masks = [np.array(getattr(graph, f"{split}_mask"), dtype=bool) for split in SPLITS]
    sizes = [int(mask.sum()) for mask in masks]
    if why is None:
        targets = torch.from_numpy(target_block(graph.labels[r0:r1])).to(output.device)
        mine = [torch.from_numpy(mask[r0:r1].copy()).to(output.device) for mask in masks]
        split_rows = (SplitRows.of(np.asarray(graph.labels), masks, rows, output.device) if metric == "rocauc"
                      else None)
        values = split_metrics(output.detach(), targets, mine, model_task, metric, layout, split_rows)
    out = {}
    for index, split in enumerate(SPLITS):
        reason = why or (None if sizes[index] else "the split is empty")
        value = None if reason else values[index]
        if model_task == "multiclass":
            correct = 0 if value is None else round(value * sizes[index])
            out[split] = {"accuracy": value, "correct": correct, "vertices": sizes[index]}
        else:
            out[split] = {"metric": metric, "value": value, "vertices": sizes[index]}
        if reason:
            out[split]["reason"] = reason
    return out


def accuracy_line(accuracies: dict[str, dict]) -> str:
    """``accuracy   train 0.9900 (100 vertices)  val ...`` of the splits in ``accuracies`` (those not measured
    named with their reason)."""
    name = next(iter(accuracies.values())).get("metric", "accuracy")
    head = f"{name:<10} "
    reasons = {entry.get("reason") for entry in accuracies.values()}
    if len(reasons) == 1 and None not in reasons:
        return f"{head}not measured: {reasons.pop()}"
    parts = []
    for split, entry in accuracies.items():
        value = entry.get("accuracy", entry.get("value"))
        if value is None:
            parts.append(f"{split} not measured ({entry['reason']})")
        else:
            parts.append(f"{split} {value:.4f} ({entry['vertices']} vertices)")
    return head + "  ".join(parts)
