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
