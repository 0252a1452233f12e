"""Each algorithm's cost model in one module, and the one table that maps an algorithm's name to it.

Adding an algorithm to the cost model is one module here and one line in `COSTS`; its stages come from
`gridgnn.cost.stages` and its collectives are tied to its SpMM module by the tests (measured = modelled).
Every module provides what `AlgorithmCosts` lists; callers ask `costs_of(shape.algo)`, never test the name:

==========  ==============================  ================================================================
algorithm   module                          what moves
==========  ==============================  ================================================================
1d, 1.5d    `rows`                          X's row blocks on ``row``; the replica sum on ``rep``
2d          `summa`                         packed Â panels on ``col``, X panels on ``row``
3d          `split3d`                       SUMMA in each depth slice; reduce-scatter / all-gather on ``depth``
==========  ==============================  ================================================================
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from gridgnn.cost.algorithms import rows, split3d, summa
from gridgnn.cost.graph_stats import GraphStats
from gridgnn.cost.spmm_cost import SizeInfo
from gridgnn.cost.stages import StageLayout
from gridgnn.cost.terms import ShapeBlocks, SpMMPlan, Term
from gridgnn.grid.shape import GridShape


class AlgorithmCosts(Protocol):
    """What the cost model asks of an algorithm (a module satisfies it). All pure; "every rank" means
    arrays of shape (P,) in `GridShape` rank order."""

    DENSE_BUFFERS: int
    """Dense (rows x width) receive buffers of a stage beside the X panel (`gridgnn.cost.memory_model`)."""

    def count_bounds(self, shape: GridShape, layout: StageLayout) -> tuple[list[int], list[int]]:
        """The (row, column) vertex bounds on which Â's entries are counted for ``shape``."""

    def blocks(self, shape: GridShape, stats: GraphStats, layout: StageLayout, coords: dict) -> ShapeBlocks:
        """The shape's `ShapeBlocks`: every rank's rows and nnz of Â (``coords``: axis -> (P,) coordinates)."""

    def spmm_terms(self, blocks: ShapeBlocks, f: int, backward: bool, sz: SizeInfo,
                   cached: bool = False) -> list[Term]:
        """Every rank's collectives of one dense SpMM half of width ``f``, grouped into terms; ``cached``
        (``--cache-panels``): without the Â panels, which were received at set-up."""

    def panel_terms(self, blocks: ShapeBlocks, backward: bool, sz: SizeInfo) -> list[Term]:
        """The Â panels one SpMM half moves (forward ``Â``, backward ``Âᵀ``); what ``--cache-panels`` moves
        once, at set-up; empty where Â never moves."""

    def schedule(self, shape: GridShape, layout: StageLayout, coords: dict, width: int,
                 panel_nnz: np.ndarray | None, backward: bool, cached: bool = False) -> SpMMPlan:
        """One rank's plan of one SpMM half (``width``: the rank's own feature columns; ``panel_nnz``: (segments,)
        entries of its block row of Â; ``cached``: the panels were received at set-up), which its SpMM module
        runs and `gridgnn.cost.spmm_plan` prices."""

    def attention_terms(self, blocks: ShapeBlocks, width: int, heads: int, sizes: SizeInfo,
                        cached: bool = False) -> list[Term]:
        """Every rank's collectives of one GAT layer's attention and aggregation (``cached``: the forward
        panels were received at set-up)."""

    def graph_bytes(self, blocks: ShapeBlocks, sz: SizeInfo) -> np.ndarray:
        """(P,) bytes of the Â blocks each rank keeps, with their transposes."""


COSTS: dict[str, AlgorithmCosts] = {"1d": rows, "1.5d": rows, "2d": summa, "3d": split3d}


def costs_of(algo: str) -> AlgorithmCosts:
    """The cost module of ``algo`` (a grid algorithm of `gridgnn.grid.shape.ALGORITHMS`)."""
    return COSTS[algo]
