"""2D SpMM: SUMMA on a ``pr x pc`` grid, square or not (docs/architecture.md §2).

Axes ``row`` (size pr, coordinate i) and ``col`` (size pc, coordinate j). Vertex rows follow
``block_bounds(n, pr)`` (or a METIS reordering's pr parts); Â's columns follow ``block_bounds(n, pc)`` (the
same parts on a square grid); feature columns follow ``block_bounds(f, pc)``. The stages
(`gridgnn.cost.stages`, shared with the cost model and the plan of collectives `gridgnn.cost.spmm_plan`) are
the segments of the common refinement of the two vertex partitions (``refine``), so every stage's Â panel lies
in one process column (its ``panel_root``) and its X panel in one process row (its ``root``); on a square grid
the stages are the blocks.

Layout of X, Y, dX, dY: ``Shard(0)`` on ``row``, ``Shard(1)`` on ``col``: process (i, j) holds rows of block i
and feature columns of block j. Process (i, j) keeps Â[rows i, cols in column block j], one packed panel per
stage segment inside that block (and each panel's transpose). For a 2 x 3 grid on n = 12:
row blocks [0, 6, 12], Â column blocks [0, 4, 8, 12], stages [0, 4, 6, 8, 12].

Forward, stage s = [a, b): the owner (i, panel_root[s]) broadcasts Â[i, a:b] on ``col`` (its grid row), the
owner (root[s], j) broadcasts X[a:b, j] on ``row`` (its grid column), and Y[i, j] += Â[i, a:b] X[a:b, j].
Backward, stage s: the owner broadcasts Â[i, a:b]ᵀ on ``col``; each process forms Â[i, a:b]ᵀ G[i, j] and
the sum over i is reduced on ``row`` to (root[s], j), which writes rows a:b of dX[·, j]. Those collectives are
the plan of `gridgnn.cost.algorithms.summa.schedule`, run by `gridgnn.spmm.staged`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
import torch

from gridgnn.cost.algorithms.summa import panel_move
from gridgnn.cost.terms import PlannedStage
from gridgnn.grid.comm import Communicator
from gridgnn.grid.process_grid import ProcessGrid
from gridgnn.sparse.csr import index_dtype_for
from gridgnn.sparse.cut import cut_panels
from gridgnn.sparse.packed import PackedPanel
from gridgnn.spmm.attention_2d import Stages2D
from gridgnn.spmm.panels import PanelCache, send_panel
from gridgnn.spmm.staged import PanelMovingSpMM


class SpMM2D(PanelMovingSpMM):
    """SUMMA SpMM on a ``pr x pc`` grid. Built once from the global Â."""

    num_col_blocks_axis = "col"

    def __init__(self, grid: ProcessGrid, comm: Communicator, adj: sp.csr_matrix, *,
                 dtype: torch.dtype = torch.float32, parts: Sequence[int] | None = None,
                 cache_panels: tuple[bool, ...] = ()):
        super().__init__(grid, comm, adj.shape[0], parts)
        n = self.num_nodes
        self.layout = layout = self.stage_layout()
        self.row_bounds = layout.row_bounds
        self.stages = [layout.segment(s) for s in range(len(layout.root))]
        self.stage_root, self.panel_root = layout.root.tolist(), layout.panel_root.tolist()
        self.i, self.j = grid.index("row"), grid.index("col")
        self.index_dtype, self.dtype = index_dtype_for(n, adj.nnz), dtype
        self._before_cut(adj)
        mine = [s for s in range(len(self.stages)) if self.panel_root[s] == self.j]
        self.panel_nnz, kept = cut_panels(adj, self.row_range, self.stages, mine)
        self.own = {
            s: PackedPanel(kept.pop(s), index_dtype=self.index_dtype, dtype=dtype, device=grid.device)
            for s in mine
        }
        self._attention = None
        # --cache-panels: the orientations received once (`PanelCache`); (): every panel moves in every SpMM
        stages = range(len(self.stages))
        self.cache = PanelCache(comm, stages, self._broadcast_panel, cache_panels)

    def _before_cut(self, adj) -> None:
        """Set-up that needs the stages but not the panels (the sparse variant's index exchange); none here."""

    @property
    def stored_nnz(self) -> int:
        """Non-zeros of Â this rank keeps (each stored value is kept by exactly one rank)."""
        return sum(panel.block(False).nnz for panel in self.own.values())

    @property
    def row_range(self) -> tuple[int, int]:
        return self.row_bounds[self.i], self.row_bounds[self.i + 1]

    def _broadcast_panel(self, s: int, transpose: bool):
        """Stage s's panel broadcast on ``col`` from its owner (`gridgnn.cost.algorithms.summa.panel_move`)."""
        move = panel_move(self.layout, self.i, s, self.panel_nnz[s], transpose)
        return send_panel(self.comm, move, self.own.get(s), self.index_dtype, self.dtype, transpose)

    def _row_nnz(self) -> np.ndarray:
        """(segments,) entries of every panel of this rank's block row."""
        return np.asarray(self.panel_nnz, dtype=np.int64)

    def _panel_key(self, stage: PlannedStage) -> int:
        return stage.segment

    def _own_panel(self, stage: PlannedStage):
        return self.own.get(stage.segment)

    def attention_stages(self):
        """The `gridgnn.spmm.attention.AttentionStages` of this rank (its tiles' patterns built once)."""
        if self._attention is None:
            self._attention = Stages2D(self)
        return self._attention
