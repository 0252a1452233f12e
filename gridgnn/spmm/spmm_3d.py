"""3D SpMM: Split-3D on a ``q x q x d`` grid (docs/architecture.md §2; ``d = q`` gives the paper's q³).

Axes ``row`` (i), ``col`` (j), both of size q, and ``depth`` (l) of size d. Vertex blocks follow
``block_bounds(n, q)`` (or a METIS reordering's q parts); block k is cut again into d sub-blocks S[k][l]
(``sub_bounds``); feature columns follow ``block_bounds(f, q)``.

Layout of X, Y, dX, dY: rows S[i][l], feature columns of block j on process (i, j, l) — ``Shard(0)`` on
``row`` then again on ``depth``, ``Shard(1)`` on ``col``. Process (i, j, l) keeps the panel Â[rows of block i,
columns S[j][l]] (and its transpose): layer l holds the l-th slice of every inner block.

Forward: layer l runs SUMMA over its inner slices: at stage k, (i, k, l) broadcasts Â[i, S[k][l]] on ``col``
and (k, j, l) broadcasts X[S[k][l], j] on ``row``; each process accumulates a partial C[i, j] (n_i x f_j) over
its layer's slices; a reduce-scatter on ``depth`` sums the d partials and leaves rows S[i][l] on (i, j, l).
Backward: an all-gather on ``depth`` rebuilds G[i, j]; at stage k, Â[i, S[k][l]]ᵀ is broadcast on ``col``,
each process forms Â[i, S[k][l]]ᵀ G[i, j], and the sum over i is reduced on ``row`` to (k, j, l). Those
collectives are the plan of `gridgnn.cost.algorithms.summa.schedule`, run by `gridgnn.spmm.staged`.
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
from gridgnn.spmm.attention_3d import Stages3D
from gridgnn.spmm.panels import PanelCache, send_panel
from gridgnn.spmm.staged import PanelMovingSpMM


class SpMM3D(PanelMovingSpMM):
    """Split-3D SpMM on a ``q x q x d`` grid. Built once from the global Â."""

    num_col_blocks_axis = "col"

    def __init__(self, grid: ProcessGrid, comm: Communicator, adj: sp.csr_matrix, *,
                 dtype: torch.dtype = torch.float32, parts: Sequence[int] | None = None,
                 cache_panels: tuple[bool, ...] = ()):
        super().__init__(grid, comm, adj.shape[0], parts)
        q, d = grid.size("row"), grid.size("depth")
        self.i, self.j, self.l = grid.index("row"), grid.index("col"), grid.index("depth")
        self.layout = self.stage_layout()
        self.bounds = self.layout.row_bounds
        self.sub = [self.layout.segments[k * d:(k + 1) * d + 1] for k in range(q)]  # S[k][·], k's sub-blocks
        self.my_segments = self.layout.handled_by(self.l)  # stage k runs segment k*d + l
        self.index_dtype, self.dtype = index_dtype_for(self.num_nodes, adj.nnz), dtype
        self._before_cut(adj)
        rows = (self.bounds[self.i], self.bounds[self.i + 1])
        self.panel_nnz, kept = cut_panels(adj, rows, [self._slice(k) for k in range(q)], [self.j])
        self.own = PackedPanel(kept.pop(self.j), index_dtype=self.index_dtype, dtype=dtype, device=grid.device)
        self._attention = None
        # --cache-panels: the orientations received once (`PanelCache`); (): every panel moves in every SpMM
        self.cache = PanelCache(comm, range(q), self._broadcast_panel, cache_panels)

    def _slice(self, k: int) -> tuple[int, int]:
        """Global rows S[k][l] of this process's layer l (the segment of stage k)."""
        return self.layout.segment(self.my_segments[k])

    def _root(self, k: int) -> int:
        """Coordinate of stage k's X rows on ``row`` and of its Â panel on ``col`` (both k)."""
        return int(self.layout.root[self.my_segments[k]])

    def _before_cut(self, adj) -> None:
        """Set-up that needs the stages but not the panels (the sparse variant's index exchange); none here."""

    @property
    def stored_nnz(self) -> int:
        """Non-zeros of Â this rank keeps (each stored value is kept by exactly one rank)."""
        return self.own.block(False).nnz

    @property
    def row_range(self) -> tuple[int, int]:
        return self._slice(self.i)

    def _broadcast_panel(self, k: int, transpose: bool):
        """Stage k's panel broadcast on ``col`` from its owner (`gridgnn.cost.algorithms.summa.panel_move`)."""
        move = panel_move(self.layout, self.i, self.my_segments[k], self.panel_nnz[k], transpose)
        return send_panel(self.comm, move, self.own, self.index_dtype, self.dtype, transpose)

    def _row_nnz(self) -> np.ndarray:
        """(segments,) entries of the panels of this rank's block row in its depth slice (0 elsewhere)."""
        nnz = np.zeros(len(self.layout.segments) - 1, dtype=np.int64)
        nnz[self.my_segments] = self.panel_nnz
        return nnz

    def _panel_key(self, stage: PlannedStage) -> int:
        return int(self.layout.root[stage.segment])  # the stage k of this depth slice

    def _own_panel(self, stage: PlannedStage):
        return self.own

    def attention_stages(self):
        """The `gridgnn.spmm.attention.AttentionStages` of this rank (its tile's pattern built once)."""
        if self._attention is None:
            self._attention = Stages3D(self)
        return self._attention
