"""Vectorized per-rank communication of one distributed SpMM: every rank of the grid at once.

The same closed forms as the per-rank test oracle ``tests/helpers/cost_oracles.py`` (`spmm_cost`, which prices
one rank; the tests check they agree rank by rank), restated with numpy over all P ranks and split into
*terms*: one (operation, axis) pair each, with per-rank calls and bytes, so a machine profile can price each
collective by its own α and β.
This is what makes `gridgnn plan` answer for P = 4096 in well under a second per configuration. Each
algorithm's closed forms live in its module of `gridgnn.cost.algorithms`; this module is the entry point.

Rank order is row-major over the grid axes (`GridShape.coords`): ``rank = i*c + k`` on 1.5D,
``i*pc + j`` on 2D, ``(i*q + j)*d + l`` on 3D. Pure code, no process group.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gridgnn.cost.algorithms import costs_of
from gridgnn.cost.column_order import ColumnOrder, exchanged_rows
from gridgnn.cost.graph_stats import GraphStats
from gridgnn.cost.spmm_cost import FLOAT32, SizeInfo
from gridgnn.cost.stages import stage_layout
from gridgnn.cost.terms import ShapeBlocks, Term, feature_widths
from gridgnn.grid.shape import GridShape

__all__ = ["ShapeBlocks", "Term", "feature_widths", "nnz_bounds", "shape_blocks", "spmm_terms"]


def nnz_bounds(shape: GridShape, n: int, parts: tuple[int, ...] | None = None) -> tuple[list[int], list[int]]:
    """The (row bounds, column bounds) on which `shape_blocks` counts Â's entries for ``shape`` (n vertices,
    ``parts`` as `GraphStats.parts`): the row blocks and the stage segments of `gridgnn.cost.stages`."""
    return costs_of(shape.algo).count_bounds(shape, stage_layout(shape.algo, shape.sizes, n, parts))


def shape_blocks(shape: GridShape, stats: GraphStats) -> ShapeBlocks:
    """Partition and block nnz of ``stats``'s Â on ``shape`` (exact or uniform, as ``stats`` is); with Â's
    columns in σ's order (``stats.column_seed``, 2D and 3D), the rows each rank moves into that order."""
    coords = {a: c.astype(np.int64) for a, c in zip(shape.axes, np.unravel_index(np.arange(shape.world_size),
                                                                                   shape.sizes), strict=True)}
    layout = stage_layout(shape.algo, shape.sizes, stats.num_nodes, stats.parts)
    if stats.column_seed is None or not shape.splits_features:  # 1D and 1.5D hold whole rows: no column order
        return costs_of(shape.algo).blocks(shape, stats, layout, coords)
    counted = stats.in_column_order(shape.sizes[0], shape.depth)  # its σ is this layout's (no parts: random)
    blocks = costs_of(shape.algo).blocks(shape, counted, layout, coords)
    per_process = exchanged_rows(layout, counted.column_order or ColumnOrder(layout, stats.column_seed))
    blocks.column_rows = per_process[coords["row"], blocks.groups]  # each process's σ class: its depth slice
    return blocks


def spmm_terms(blocks: ShapeBlocks, width: int, *, backward: bool, sizes: SizeInfo = FLOAT32,
               cached: bool = False) -> list[Term]:
    """Terms of one dense SpMM of width ``width``: its forward (``Â X``) or its backward (``Âᵀ G``) half (the
    sparse variants: `gridgnn.cost.sparse_cost.comm_spmm_terms`); ``cached``: with ``--cache-panels``. With
    Â's columns in σ's order (``blocks.column_rows``), the move into that order (forward, before the SUMMA) or
    out of it (backward, after): one all-to-all on ``row`` (`gridgnn.spmm.column_exchange`)."""
    terms = costs_of(blocks.shape.algo).spmm_terms(blocks, width, backward, sizes, cached)
    if blocks.column_rows is not None and blocks.shape.sizes[0] > 1:
        fw = feature_widths(width, blocks.shape.col_blocks)[blocks.coords["col"]]
        phase = "spmm_backward" if backward else "spmm_forward"
        terms.append(Term(phase, "all_to_all", "row", blocks.shape.sizes[0], (fw > 0).astype(np.int64),
                          np.where(fw > 0, blocks.column_rows * sizes.row_bytes(fw), 0).astype(np.int64)))
    return terms


def cached_orientations(operator: str) -> tuple[bool, ...]:
    """The orientations of the Â panels ``--cache-panels`` keeps (``True``: Âᵀ) for an aggregation operator
    (`gridgnn.data.operators`): attention's pattern (``gat``) is read only forward (its backward forms αᵀG
    from the same panels), every other operator Â in forward and Âᵀ in backward."""
    return (False,) if operator == "gat" else (False, True)


def panel_cache_terms(blocks: ShapeBlocks, sizes: SizeInfo = FLOAT32,
                      orientations: tuple[bool, ...] = (False, True)) -> list[Term]:
    """The set-up of ``--cache-panels`` (phase ``other``): every Â panel a rank receives once, in each of
    ``orientations`` (`gridgnn.spmm.panels.PanelCache`); none where Â never moves."""
    algorithm = costs_of(blocks.shape.algo)
    return [replace(t, phase="other") for backward in orientations
            for t in algorithm.panel_terms(blocks, backward, sizes)]
