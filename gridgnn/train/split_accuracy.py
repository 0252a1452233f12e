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


def unmeasurable(graph, num_outputs: int) -> str | None:
    """Why no split of ``graph`` can be measured for a model of ``num_outputs`` classes, or None."""
    if getattr(graph, "meta", {}).get("labels") == "none":
        return "the graph has no labels"
    if graph.num_classes != num_outputs:
        return f"the graph has {graph.num_classes} classes, the model predicts {num_outputs}"
    return None


def split_accuracies(log_probs: Tensor, graph, rows: tuple[int, int], layout) -> dict[str, dict]:
    """``{split: {"accuracy": float | None, "correct": int, "vertices": int[, "reason": str]}}`` of the
    predictions ``log_probs`` (m, C) of this process's ``rows`` of ``graph``. Collective on ``layout``'s
    world (one `global_sum` of six numbers), on every rank alike, whether measured or not."""
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


def accuracy_line(accuracies: dict[str, dict]) -> str:
    """``accuracy   train 0.9900 (100 vertices)  val ...`` of the splits in ``accuracies`` (those not measured
    named with their reason)."""
    reasons = {entry.get("reason") for entry in accuracies.values()}
    if len(reasons) == 1 and None not in reasons:
        return f"accuracy   not measured: {reasons.pop()}"
    parts = []
    for split, entry in accuracies.items():
        if entry["accuracy"] is None:
            parts.append(f"{split} not measured ({entry['reason']})")
        else:
            parts.append(f"{split} {entry['accuracy']:.4f} ({entry['vertices']} vertices)")
    return "accuracy   " + "  ".join(parts)
