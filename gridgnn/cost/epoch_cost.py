"""Communication of the SpMMs of one training step of a GCN (pure; no process group).

Which SpMMs run depends on the order of each layer: aggregate-first ``(Â H) W`` multiplies Â by the input
width, transform-first ``Â (H W)`` by the output width. In the backward pass every layer multiplies by Âᵀ at
the same width, except a first layer that aggregates first: its input features need no gradient, and the
weight gradient reuses the ``Â X`` kept from the forward pass (CAGNET computes that product anyway).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gridgnn.config import resolve_order
from gridgnn.cost.spmm_cost import FLOAT32, SizeInfo, spmm_cost
from gridgnn.grid.shape import GridShape


def spmm_widths(widths: list[int], order: str) -> tuple[list[int], list[int]]:
    """Widths of the forward and backward SpMMs of one training step, layer by layer.

    ``widths`` = [f0, f1, ..., fL] (input features, hidden widths, classes).
    """
    forward, backward = [], []
    for index, (w_in, w_out) in enumerate(zip(widths[:-1], widths[1:], strict=True)):
        layer_order = resolve_order(order, w_in, w_out)
        width = w_in if layer_order == "aggregate-first" else w_out
        forward.append(width)
        if not (index == 0 and layer_order == "aggregate-first"):
            backward.append(width)
    return forward, backward


@dataclass(frozen=True)
class StepSpMMCost:
    forward_bytes: int
    forward_calls: int
    backward_bytes: int
    backward_calls: int


def training_step_spmm_cost(shape: GridShape, rank: int, n: int, widths: list[int], order: str,
                            panel_nnz: np.ndarray | None = None, sizes: SizeInfo = FLOAT32) -> StepSpMMCost:
    """SpMM bytes and calls of ``rank`` for one training step (phases spmm_forward / spmm_backward)."""
    forward, backward = spmm_widths(widths, order)
    fwd = [spmm_cost(shape, rank, n, f, panel_nnz, sizes) for f in forward]
    bwd = [spmm_cost(shape, rank, n, f, panel_nnz, sizes) for f in backward]
    return StepSpMMCost(sum(c.forward_bytes for c in fwd), sum(c.forward_calls for c in fwd),
                        sum(c.backward_bytes for c in bwd), sum(c.backward_calls for c in bwd))
