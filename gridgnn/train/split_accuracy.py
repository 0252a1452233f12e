"""The accuracy of a model's predictions on each split (train, val, test) of a graph with labels, for
``gridgnn predict``: what it prints and records in its ``--metrics-out`` file.

A split is measured when the graph has labels (not the placeholders of a graph read without them,
``meta["labels"] == "none"``), its classes are the model's outputs, and the split holds vertices; otherwise its
``accuracy`` is null and ``reason`` says why. The counts are global: each process counts its rows and the
layout sums them (`gridgnn.nn.layout.Layout.global_sum`), so any grid reports the number one process does.
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
    graph_task = getattr(graph, "task", "multiclass")
    if graph_task != model_task:
        return f"the graph holds {graph_task} targets, the model predicts {model_task} ones"
    if graph.num_classes != num_outputs:
        return f"the graph has {graph.num_classes} classes, the model predicts {num_outputs}"
    return None


def split_accuracies(log_probs: Tensor, graph, rows: tuple[int, int], layout,
                     model_task: str = "multiclass") -> dict[str, dict]:
    """``{split: {"accuracy": float | None, "correct": int, "vertices": int[, "reason": str]}}`` of the
    predictions ``log_probs`` (m, C) of this process's ``rows`` of ``graph``. Collective on ``layout``'s
    world (one `global_sum` of six numbers), on every rank alike, whether measured or not. A multilabel or
    regression model (``model_task``): `split_scores` instead."""
    if model_task != "multiclass":
        return split_scores(log_probs, graph, rows, layout, model_task)
    r0, r1 = rows
    labels = torch.from_numpy(np.array(graph.labels[r0:r1], dtype=np.int64))
    right = log_probs.detach().argmax(dim=1).cpu() == labels
    counts = []
    for split in SPLITS:
        mask = torch.from_numpy(np.array(getattr(graph, f"{split}_mask")[r0:r1], dtype=bool))
        counts += [int(right[mask].sum()), int(mask.sum())]
    totals = layout.global_sum(torch.tensor(counts, dtype=torch.float64, device=log_probs.device))
    totals = [round(float(v)) for v in totals.cpu()]
    why = unmeasurable(graph, log_probs.shape[1])
    out = {}
    for index, split in enumerate(SPLITS):
        correct, vertices = totals[2 * index], totals[2 * index + 1]
        reason = why or (None if vertices else "the split is empty")
        out[split] = {"accuracy": None if reason else correct / vertices, "correct": correct, "vertices": vertices}
        if reason:
            out[split]["reason"] = reason
    return out


def split_scores(output: Tensor, graph, rows: tuple[int, int], layout, model_task: str) -> dict[str, dict]:
    """``{split: {"metric": name, "value": float | None, "vertices": int[, "reason": str]}}``: the default
    metric of ``model_task`` (`gridgnn.train.task_metrics`) of the model's ``output`` (m, T) on this process's
    ``rows`` of ``graph``. Collective on ``layout``'s world, on every rank alike, whether measured or not."""
    from gridgnn.config import METRICS
    from gridgnn.data.targets import target_block
    from gridgnn.train.task_metrics import SplitRows, split_metrics

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
        out[split] = {"metric": metric, "value": None if reason else values[index], "vertices": sizes[index]}
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
