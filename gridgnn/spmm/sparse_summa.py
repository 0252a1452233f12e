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
Overlap works as in dense SUMMA: stage s + 1's panel broadcast and row exchange are in flight while stage s
multiplies; a stage's backward exchange runs behind the next stage's product.
"""

from __future__ import annotations

import torch

from gridgnn.cost.sparse_stages import touched_columns
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

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """X[i, j] (n_i x f_j) -> Y[i, j]. Collective on ``col`` (Â) and ``row`` (touched X rows)."""
        out, r0, width = x.new_zeros(x.shape), self.row_range[0], x.shape[1]

        def issue(s: int):
            a, b = self.stages[s]
            panel = self._panel(s, transpose=False)
            if width == 0:
                return panel, None
            own = x[a - r0:b - r0] if self.rows.roots[s] == self.i else None
            return panel, self.rows.gather_async(s, own, width, x)

        for _, (panel, held) in self.comm.pipeline(range(len(self.stages)), issue):
            if panel is not None and held is not None:
                panel.matmul_add(held, out)
        return out

    def backward(self, grad_y: torch.Tensor) -> torch.Tensor:
        """G[i, j] -> dX[i, j]. Collective on ``col`` (Âᵀ) and ``row`` (touched rows back to the root)."""
        grad_x, r0, mine = grad_y.new_zeros(grad_y.shape), self.row_range[0], []
        with self.comm.in_flight() as flight:
            for s, (panel,) in self.comm.pipeline(range(len(self.stages)),
                                                  lambda s: (self._panel(s, transpose=True),)):
                if grad_y.shape[1] == 0:
                    continue
                a, b = self.stages[s]
                part = panel.matmul(grad_y) if panel is not None else grad_y.new_zeros((b - a, grad_y.shape[1]))
                flight.add(self.rows.reduce_async(s, part))
                if self.rows.roots[s] == self.i:
                    mine.append((a - r0, b - r0, part))  # summed in place once the exchange is waited for
        for lo, hi, part in mine:
            grad_x[lo:hi] = part
        return grad_x


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

    def _sum_depth(self, partial: torch.Tensor) -> torch.Tensor:
        """Block i's partial product -> rows S[i][l], summed over the slices. Collective on ``depth``."""
        if self.depth is None:
            return partial
        return self.depth.sum_partials(partial)

    def _gather_depth(self, grad: torch.Tensor) -> torch.Tensor:
        """G[S_il, j] -> the rows of G[i, j] this slice reads. Collective on ``depth``."""
        if self.depth is None:
            return grad
        return self.depth.gather_rows(grad)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """X[S_il, j] -> Y[S_il, j]. Collective on ``col`` (Â), ``row`` (touched rows), ``depth`` (the rows
        each slice's partial makes non-zero)."""
        width = x.shape[1]
        partial = x.new_zeros((self.bounds[self.i + 1] - self.bounds[self.i], width))

        def issue(k: int):
            panel = self._panel(k, transpose=False)
            if width == 0:
                return panel, None
            return panel, self.rows.gather_async(k, x if self._root(k) == self.i else None, width, x)

        for _, (panel, held) in self.comm.pipeline(range(self.grid.size("row")), issue):
            if panel is not None and held is not None:
                panel.matmul_add(held, partial)
        if width == 0:
            return x.new_zeros(x.shape)
        return self._sum_depth(partial)

    def backward(self, grad_y: torch.Tensor) -> torch.Tensor:
        """G[S_il, j] -> dX[S_il, j]. Collective on ``depth`` (the rows each slice reads), ``col`` (Âᵀ),
        ``row``."""
        width = grad_y.shape[1]
        full = self._gather_depth(grad_y) if width else None
        grad_x = None
        with self.comm.in_flight() as flight:
            for k, (panel,) in self.comm.pipeline(range(self.grid.size("row")),
                                                  lambda k: (self._panel(k, transpose=True),)):
                if width == 0:
                    continue
                a, b = self._slice(k)
                part = panel.matmul(full) if panel is not None else grad_y.new_zeros((b - a, width))
                flight.add(self.rows.reduce_async(k, part))
                if self._root(k) == self.i:
                    grad_x = part  # summed in place once the exchange is waited for
        return grad_y.new_zeros(grad_y.shape) if grad_x is None else grad_x
