"""The CAGNET authors' way of counting 1D/1.5D broadcast volume, to check the model against their logs.

Their logs count the words (elements) broadcast to each rank per epoch *including the rank's own block*,
for aggregate-first order with forward SpMMs at widths f0 … f(L-1) and backward SpMMs at widths fL … f1
(they aggregate the output gradient before the transposed weight product, and also run the first layer's
backward product that gridgnn skips). With the rows of block row j broadcast once per SpMM to every rank
whose replica handles j (j ≡ k mod c), rank (i, k) receives ``Σ_{j ≡ k} n_j · S`` words,
``S = Σ forward widths + Σ backward widths``; for c = 1 that is ``n · S`` (docs/architecture.md §3).

gridgnn's own count (`gridgnn.cost.epoch_model`) differs on purpose: it excludes the own block, has no
first-layer backward product and moves the second layer's backward at the narrower width.
"""

from __future__ import annotations

import numpy as np

from gridgnn.partition import block_bounds


def cagnet_widths(widths: list[int]) -> tuple[list[int], list[int]]:
    """Forward and backward SpMM widths of CAGNET's aggregate-first GCN of widths [f0, ..., fL]."""
    return list(widths[:-1]), list(reversed(widths[1:]))


def cagnet_broadcast_words(n: int, widths: list[int], world_size: int, replication: int = 1) -> np.ndarray:
    """Words broadcast to every rank per epoch in CAGNET's 1D/1.5D (c = ``replication``), own block
    included; (P,) int64 in rank order (rank = i·c + k). Pure."""
    forward, backward = cagnet_widths(widths)
    total_width = sum(forward) + sum(backward)
    c = replication
    rows = world_size // c
    sizes = np.diff(block_bounds(n, rows)).astype(np.int64)
    share_rows = np.bincount(np.arange(rows) % c, weights=sizes, minlength=c).astype(np.int64)
    k = np.arange(world_size) % c
    return share_rows[k] * total_width
