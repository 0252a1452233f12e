"""Sparse 2D and 3D SpMM (``--comm sparse``): each stage's X panel travels as the rows each receiver touches.

Same grids, layouts, Â panels and stages as `gridgnn.spmm.spmm_2d` and `gridgnn.spmm.spmm_3d` (read their
tables); the Â panels still travel along process rows as packed broadcasts (they are sparse already; or once,
with ``cache_panels``). 3D's depth collectives move only the rows each slice's partial product makes
non-zero (`gridgnn.spmm.depth_rows`). In a stage only the X half changes: instead of a broadcast of the
whole panel X[a:b, j] down process column j, the root sends each process (i, j) the rows of
X[a:b, j] that Â[i, a:b] has a stored entry in (`gridgnn.spmm.stage_rows`), and in backward those rows of
Â[i, a:b]ᵀ G[i, j] come back to the root, summed there. The stages come from `gridgnn.cost.stages`, the
index sets from `gridgnn.cost.sparse_stages` (the same the cost model prices); the index sets are exchanged
once, at set-up, on ``row``.
Both run the dense algorithm's plan (`gridgnn.spmm.staged`), carrying its row moves as these exchanges (and
3D's depth moves as `DepthRows`), so overlap works as in dense SUMMA: stage s + 1's panel broadcast and row
exchange are in flight while stage s multiplies; a stage's backward exchange runs behind the next stage's
product. Their bytes are priced by `gridgnn.cost.sparse_cost`.
"""

from __future__ import annotations

import numpy as np
import torch

from gridgnn.cost.sparse_stages import touched_columns
from gridgnn.cost.spmm_plan import carried_by_depth, carried_by_rows
from gridgnn.cost.terms import Move, PlannedStage, SpMMPlan
from gridgnn.grid.overlap import Pending
from gridgnn.spmm.depth_rows import DepthRows
from gridgnn.spmm.spmm_2d import SpMM2D
from gridgnn.spmm.spmm_3d import SpMM3D
from gridgnn.spmm.stage_rows import StageRows


class SparseSpMM2D(SpMM2D):
    """SUMMA SpMM moving only touched X rows. Built once from the global Â (collective on ``row``; and on
    ``col`` with ``cache_panels``)."""

    def _before_cut(self, adj) -> None:
        """The index exchange (collective on ``row``), before any rank cuts its panels."""
        remote = [s for s in range(len(self.stages)) if self.stage_root[s] != self.i]
        wanted = touched_columns(adj, self.row_range, self.layout.segments, remote)
        with self.comm.phase("other"):
            self.rows = StageRows(self.comm, self.stages, self.stage_root, wanted)

    def plan(self, width: int, backward: bool) -> SpMMPlan:
        """SUMMA's plan with each stage's row move carried as the exchange of its touched rows
        (`gridgnn.cost.spmm_plan.carried_by_rows`, with this process's counts). Not collective."""
        return carried_by_rows(super().plan(width, backward), self.i, self.rows.row_counts(), backward)

    def _send_rows(self, stage: PlannedStage, x: torch.Tensor) -> Pending:
        """Forward: the rows of X[a:b, j] this process's panel touches, from the root (collective on ``row``)."""
        s, r0 = stage.segment, self.row_range[0]
        own = x[stage.start - r0:stage.stop - r0] if self.rows.roots[s] == self.i else None
        return self.rows.gather_async(s, own, x.shape[1], x)

    def _return_rows(self, stage: PlannedStage, part: torch.Tensor) -> Pending:
        """Backward: the touched rows of the partial product, summed at the root (collective on ``row``)."""
        return self.rows.reduce_async(stage.segment, part)


class SparseSpMM3D(SpMM3D):
    """Split-3D SpMM moving only touched X rows. Built once from the global Â (collective on ``row``; and on
    ``col`` with ``cache_panels``)."""

    def _before_cut(self, adj) -> None:
        """The index exchange (collective on ``row``), before any rank cuts its panel."""
        stages = range(self.grid.size("row"))
        remote = [k for k in stages if self._root(k) != self.i]
        rows = (self.bounds[self.i], self.bounds[self.i + 1])
        touched = touched_columns(adj, rows, self.layout.segments, [self.my_segments[k] for k in remote])
        wanted = {k: touched[self.my_segments[k]] for k in remote}
        with self.comm.phase("other"):
            self.rows = StageRows(self.comm, [self._slice(k) for k in stages], [self._root(k) for k in stages],
                                  wanted)
        self.depth = (DepthRows(self.comm, adj, rows, self.sub[self.i], self.layout.segments)
                      if self.grid.size("depth") > 1 else None)  # computed from Â: nothing exchanged

    def plan(self, width: int, backward: bool) -> SpMMPlan:
        """Split-3D's plan with each stage's row move carried as the exchange of its touched rows and the depth
        moves as the exchange of the rows each slice makes non-zero (`gridgnn.cost.spmm_plan`, with this
        process's counts). Not collective."""
        plan = super().plan(width, backward)
        counts = np.zeros((self.grid.size("row"), len(self.layout.segments) - 1), dtype=np.int64)
        counts[:, self.my_segments] = self.rows.row_counts()  # StageRows counts stage k of this depth slice
        plan = carried_by_rows(plan, self.i, counts, backward)
        if self.depth is None or not plan.before + plan.after:
            return plan
        d = self.grid.size("depth")
        slices = np.zeros((len(self.layout.segments) - 1, d), dtype=np.int64)
        slices[self.i * d:(self.i + 1) * d] = self.depth.slice_counts()
        return carried_by_depth(plan, self.grid.coords, slices)

    def _stage(self, stage: PlannedStage) -> int:
        """The stage index k (this depth slice's k-th segment) of a planned stage."""
        return int(self.layout.root[stage.segment])

    def _send_rows(self, stage: PlannedStage, x: torch.Tensor) -> Pending:
        """Forward: the rows of X[S_kl, j] this process's panel touches, from the root (collective on ``row``)."""
        k = self._stage(stage)
        return self.rows.gather_async(k, x if self._root(k) == self.i else None, x.shape[1], x)

    def _return_rows(self, stage: PlannedStage, part: torch.Tensor) -> Pending:
        """Backward: the touched rows of the partial product, summed at the root (collective on ``row``)."""
        return self.rows.reduce_async(self._stage(stage), part)

    def _run_whole(self, move: Move, tensor: torch.Tensor) -> torch.Tensor:
        """The depth moves carry only the rows each slice's partial makes non-zero (collective on ``depth``):
        the reduce-scatter sums block i's partial product into rows S[i][l]; the all-gather gives each slice
        the rows of G[i, j] it reads."""
        if move.op != "all_to_all" or move.axis != "depth" or self.depth is None:
            return super()._run_whole(move, tensor)  # a move this variant does not carry (attention's score terms)
        if move.carries == "reduce_scatter":
            return self.depth.sum_partials(tensor)
        if move.carries == "all_gather":
            return self.depth.gather_rows(tensor)
        raise ValueError(f"no depth exchange carries {move.carries}")
