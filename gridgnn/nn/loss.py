"""Masked loss and accuracy over the vertices a mask selects (single-device math)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def masked_cross_entropy(log_probs: Tensor, labels: Tensor, mask: Tensor, *,
                         num_selected: int | None = None) -> Tensor:
    """Mean negative log-likelihood over the selected vertices.

    log_probs: (m, C) log-softmax output; labels: (m,) int64; mask: (m,) bool. ``num_selected`` is the
    divisor (the global number of selected vertices when m rows are one process's block); None uses
    ``mask.sum()``. Returns a scalar.
    """
    total = F.nll_loss(log_probs[mask], labels[mask], reduction="sum")
    count = int(mask.sum()) if num_selected is None else num_selected
    return total / max(count, 1)


@torch.no_grad()
def masked_correct(log_probs: Tensor, labels: Tensor, mask: Tensor) -> tuple[int, int]:
    """(correct, selected) counts of argmax predictions over the selected vertices; shapes as above."""
    predictions = log_probs[mask].argmax(dim=1)
    return int((predictions == labels[mask]).sum()), int(mask.sum())


def masked_accuracy(log_probs: Tensor, labels: Tensor, mask: Tensor) -> float:
    """Fraction of selected vertices whose argmax prediction equals the label (0.0 when none selected)."""
    correct, selected = masked_correct(log_probs, labels, mask)
    return correct / selected if selected else 0.0


def masked_task_loss(output: Tensor, targets: Tensor, mask: Tensor, task: str, *,
                     num_selected: int | None = None, scale: Tensor | None = None) -> Tensor:
    """The training loss of ``task`` over the selected rows, summed over their present entries and divided
    by ``num_selected`` (the global count of those entries; None: this block's count).

    output: (m, C) model output (log-probabilities for ``multiclass``, logits for ``multilabel``, values for
    ``regression``); targets: canonical (`gridgnn.data.targets`): (m,) int64 or (m, T) float with NaN
    missing; mask: (m,) bool. ``multiclass``: negative log-likelihood; ``multilabel``: binary cross-entropy
    on the logits; ``regression``: squared error. Returns a scalar (a mean when ``num_selected`` counts every
    process's entries). ``scale`` (T,): a regression's errors are divided by it, column by column (standardized
    targets: each target's training standard deviation)."""
    if task == "multiclass":
        return masked_cross_entropy(output, targets, mask, num_selected=num_selected)
    rows, wanted = output[mask], targets[mask]
    present = ~torch.isnan(wanted)
    if task == "multilabel":
        total = F.binary_cross_entropy_with_logits(rows[present], wanted[present], reduction="sum")
    else:
        error = rows - wanted  # NaN where a target is missing: those entries are left out below
        if scale is not None:
            error = error / scale.to(error.dtype)  # broadcast over the rows, no per-step copy of the scale
        total = (error[present] ** 2).sum()
    count = int(present.sum()) if num_selected is None else num_selected
    return total / max(count, 1)
