"""Normalization layers over a `gridgnn.nn.layout.Layout`: what ``--gin-norm`` puts inside a GIN's MLP.

``layer`` is torch's ``nn.LayerNorm(width)`` on every vertex's row (each row centred and scaled by its own mean
and variance over its ``width`` columns, then a trained per-column gain and shift):
``LN(z)_i = (z_i - μ_i) / sqrt(σ²_i + 1e-5) · g + b``, μ_i and σ²_i the mean and biased variance of row i.
A row's statistics need all of its columns: on 1D and 1.5D a process holds whole rows and nothing moves; on
2D and 3D its columns are a block, and each statistic is one `Layout.row_sum`, an all-reduce of (m, 1) partial
sums on ``col`` (forward, and again in backward), which the cost model prices from the trace like any other
row sum. g and b are read in column blocks (`Layout.scale_columns`, `Layout.add_bias`), so their gradients are
reduced as a bias's.

A per-vertex norm, not a batch norm over the vertices: it keeps no running statistics (training and inference
compute the same thing) and needs no communication across the vertex split. On the Amazon graphs it is what
lets GIN's sum aggregation train at all (``results/comm_precision/gin_amazon.md``).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from gridgnn.nn.layout import Layout

LAYER_NORM_EPS = 1e-5
"""Added to each row's variance (``torch.nn.LayerNorm``'s default)."""


def add_layer_norm(module: nn.Module, width: int) -> None:
    """Give ``module`` a layer norm's parameters, in this order: ``norm_weight`` (width,) ones and ``norm_bias``
    (width,) zeros (``nn.LayerNorm``'s ``weight`` and ``bias`` at initialization)."""
    module.norm_weight = nn.Parameter(torch.ones(width))
    module.norm_bias = nn.Parameter(torch.zeros(width))


def layer_norm(z: Tensor, weight: Tensor, bias: Tensor, layout: Layout) -> Tensor:
    """``nn.LayerNorm`` of every row of the ``width``-wide z (m, width block), width = ``weight.numel()``; gain
    ``weight`` and shift ``bias`` (width,). Collective as `Layout.row_sum` (twice: ``col`` on 2D/3D)."""
    width = int(weight.numel())
    centred = z - layout.row_sum(z) / width
    variance = layout.row_sum(centred * centred) / width
    normalized = centred * torch.rsqrt(variance + LAYER_NORM_EPS)
    return layout.add_bias(layout.scale_columns(normalized, weight), bias)
