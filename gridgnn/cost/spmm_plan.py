"""The plan of one distributed SpMM: the collectives one rank runs, as pure data (no process group).

From the sizes, the grid shape and the nnz of Â's panels, `spmm_steps` lists one rank's collectives of the
forward (``Â X``) or backward (``Âᵀ G``) half of a dense SpMM, stage by stage in issue order, each a `Step`
with the bytes the rank receives (the byte convention of `gridgnn.grid.comm`). The stages come from
`gridgnn.cost.stages`, the same `StageLayout` the SpMM modules loop over; a measured run records exactly
these steps (``tests/spmm/test_spmm_distributed.py`` compares them record by record on every algorithm at world
sizes 1-9), and the vectorized cost model `gridgnn.cost.rank_cost` must agree with their sums rank by rank
(``tests/cost/test_spmm_plan.py``).

What each algorithm's stage s does (rows ``[a, b)`` of the segment; n_i this rank's block of Â rows; f_j its
feature columns; a collective on a group of one process is skipped):

=====  ============================================  ==================================================
algo   forward                                       backward
=====  ============================================  ==================================================
1.5d   broadcast X[a:b] on row; then one all-reduce  reduce Â[i, s]ᵀ G on row; then one broadcast of
       of Y[i] on rep                                dX[i] on rep from replica i mod c
2d     broadcast the packed Â[i, s] (n_i rows) on    broadcast the packed Â[i, s]ᵀ (b - a rows) on col;
       col; broadcast X[a:b, j] on row               reduce Â[i, s]ᵀ G[i, j] on row
3d     as 2d for the q stages of depth slice l;      all-gather G[i, j] on depth; then as 2d
       then a reduce-scatter of Y[i, j] on depth
=====  ============================================  ==================================================

An Â panel without entries is not sent (every process knows its nnz); dense steps of an empty feature
block (f_j = 0) are not run.
"""

from __future__ import annotations

import numpy as np

from gridgnn.cost.algorithms import costs_of
from gridgnn.cost.spmm_cost import FLOAT32, SizeInfo
from gridgnn.cost.stages import stage_layout
from gridgnn.cost.terms import Step
from gridgnn.grid.shape import GridShape

__all__ = ["Step", "price", "spmm_steps"]


def spmm_steps(shape: GridShape, rank: int, n: int, width: int, panel_nnz: np.ndarray | None = None, *,
               backward: bool, sizes: SizeInfo = FLOAT32, parts: tuple[int, ...] | None = None) -> list[Step]:
    """The collectives of ``rank`` for one SpMM half of width ``width`` on ``shape`` (n vertices), in issue
    order.

    ``panel_nnz``: nnz of Â per (row block, segment of `stage_layout`), shape (row blocks, segments); used by
    2D and 3D, whose panels move (1D/1.5D never send Â). ``parts``: a vertex partition the row blocks
    follow (`gridgnn.cost.stages`).
    """
    layout = stage_layout(shape.algo, shape.sizes, n, parts)
    return costs_of(shape.algo).plan_steps(shape, layout, shape.coords(rank), width, panel_nnz, backward, sizes)


def price(steps: list[Step]) -> tuple[int, int]:
    """(bytes received, collective calls) of ``steps``."""
    return sum(step.bytes for step in steps), len(steps)
