"""Local work of a SpMM's set-up on the host CPU, in seconds per rank (pure).

Only ``--comm cover`` has set-up work worth pricing beside its collectives: each receiver reads its row block
of Â once, cuts it by column blocks, and for every pair of its share runs a maximum bipartite matching and the
alternating-path search of its cover (`gridgnn.spmm.cover_15d`). The time is fitted as

    seconds = ROW_ENTRY_S · (entries of its row block) + CUT_ENTRY_S · (entries of its pairs' cuts)
              + PAIR_S · (pairs)

from the set-up of every rank alone on one core of this 2-core machine (``python benchmarks/cover_setup.py
--calibrate``: results/sparse_comm/cover_setup/calibration.md; each rank of Coauthor Physics and Amazon
Computers at P = 2 to 32 within 0.6-1.9 of the fit, the medians of each grid within 0.70-1.16). A run's
measured ``setup.spmm_setup_s`` is larger: it also holds the set-up's collectives, the first touch of a
prepared folder's rows, and, with more processes than cores, the waits for a core. It is host work (numpy and
scipy) whatever device trains, so every machine profile uses the same constants; the planner reports it in
``predicted_setup_s`` and does not rank by it (a run repeats its steps, not its set-up).
"""

from __future__ import annotations

import numpy as np

from gridgnn.cost.terms import ShapeBlocks

ROW_ENTRY_S = 2.0e-8
"""Seconds per stored entry of the rank's row block (read, converted to CSC, cut by column blocks)."""
CUT_ENTRY_S = 1.6e-7
"""Seconds per entry of a pair's cut (matching, cover, the two sides' matrices)."""
PAIR_S = 3.6e-4
"""Seconds per pair (the fixed cost of its scipy calls)."""


def cover_setup_seconds(blocks: ShapeBlocks) -> np.ndarray:
    """(P,) predicted seconds of local work in one ``--comm cover`` SpMM's set-up (1D, 1.5D; the module
    formula): rank (i, k) reads block row i and covers the cut with each column block j != i of replica k's
    share. Zero for statistics from counts (no blocks to count)."""
    p = blocks.shape.world_size
    stats, layout = blocks.stats, blocks.layout
    if stats is None or not stats.exact or blocks.shape.sizes[0] == 1:
        return np.zeros(p)
    bounds = list(layout.row_bounds)
    pairs_nnz = stats.grouped_nnz(bounds, bounds)  # (R, R) entries of block i in column block j
    i = blocks.coords["row"]
    group = blocks.groups
    share = layout.group[None, :] == group[:, None]  # (P, R): the column blocks each rank's replica covers
    share[np.arange(p), i] = False  # its own block is no pair
    cut = np.where(share, pairs_nnz[i], 0).sum(axis=1)
    return ROW_ENTRY_S * pairs_nnz[i].sum(axis=1) + CUT_ENTRY_S * cut + PAIR_S * share.sum(axis=1)
