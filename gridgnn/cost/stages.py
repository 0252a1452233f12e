"""The stages of every algorithm's SpMM: the one place that knows them (pure, no process group).

Every distributed SpMM is a loop over *stages*. A stage multiplies one column *segment* of Â (the vertices
``[segments[s], segments[s + 1])``) with the matching rows of the dense operand; those rows are held by one
process of the ``row`` axis (``root[s]``), and on 2D/3D the Â columns of the segment are kept by one process
of the ``col`` axis (``panel_root[s]``). Dense algorithms (`gridgnn.spmm.spmm_15d`, `spmm_2d`, `spmm_3d`), their
sparse variants (`gridgnn.spmm.sparse_15d`, `sparse_summa`), the attention stages, the plan of collectives
(`gridgnn.cost.spmm_plan`) and the vectorized cost model (`gridgnn.cost.rank_cost`) all take their stages from
`stage_layout`.

=====  ==============================  ===============================  ============  ==========  ============
algo   dense rows (``row_bounds``)     segments                         root (row)    panel_root  handled by
=====  ==============================  ===============================  ============  ==========  ============
1.5d   ``block_bounds(n, R)``          the R row blocks                 j             none        replica j % c
2d     ``block_bounds(n, pr)``         ``refine(rows, cols)``           row block     col block   every process
3d     ``block_bounds(n, q)``          sub-blocks S[k][l] (k-major)     k             k           depth l
=====  ==============================  ===============================  ============  ==========  ============

Worked example, 2D on a 2 x 3 grid, n = 12: rows [0, 6, 12], Â column blocks [0, 4, 8, 12], segments
[0, 4, 6, 8, 12], roots [0, 0, 1, 1], panel roots [0, 1, 1, 2].

**Partition-following blocks.** A graph reordered by METIS (`gridgnn.data.reorder`) carries its parts'
boundaries (``meta["reorder_bounds"]``, contiguous after the reordering). When their count equals the
algorithm's row blocks (R, pr or q), ``parts`` replaces ``block_bounds`` as the dense row blocks, so the cut
METIS minimized is the cut the grid sees; a square 2D grid cuts Â's columns the same way, and 3D cuts each
uneven block into d balanced sub-blocks. When the parts are a multiple k of the row blocks (a folder prepared
with ``--parts 16`` trained on a 4 x 4 grid), every k consecutive parts make one block. With any other count
the blocks stay balanced. For example 1D on 2 processes with parts [0, 5, 12]: rows [0, 5, 12] instead of
[0, 6, 12]; with parts [0, 2, 5, 9, 12]: rows [0, 5, 12].
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gridgnn.errors import ConfigError
from gridgnn.partition import block_bounds, is_partition, refine, sub_bounds


@dataclass(frozen=True)
class StageLayout:
    """The dense row blocks, the column segments (S of them), and per segment: its root on ``row``, the Â
    panel's root on ``col`` (None where Â never moves: 1D/1.5D) and the group (replica on 1.5D, depth slice
    on 3D, 0 on 2D) whose processes run it; ``group_axis`` is the grid axis whose coordinate is that group
    (``rep``, ``depth``, or None where every process runs every segment)."""

    row_bounds: list[int]
    segments: list[int]
    root: np.ndarray
    group: np.ndarray
    panel_root: np.ndarray | None = None
    group_axis: str | None = None

    def handled_by(self, group: int) -> list[int]:
        """The segments a process of ``group`` (replica or depth index) runs, in stage order."""
        return np.flatnonzero(self.group == group).tolist()

    def segment(self, s: int) -> tuple[int, int]:
        """Global vertex rows ``[a, b)`` of segment ``s``."""
        return self.segments[s], self.segments[s + 1]

    def depth_counts(self, i: int) -> tuple[int, ...]:
        """3D: the rows of block i's sub-blocks S[i][0..d-1], the parts of its moves on ``depth``; elsewhere the
        rows of block i alone."""
        if self.group_axis != "depth":
            return (self.row_bounds[i + 1] - self.row_bounds[i],)
        d = int(self.group.max()) + 1
        return tuple(int(r) for r in np.diff(self.segments[i * d:(i + 1) * d + 1]))


def stage_layout(algo: str, sizes: tuple[int, ...], n: int, parts: Sequence[int] | None = None) -> StageLayout:
    """The `StageLayout` of ``algo`` on a grid of ``sizes`` (as `GridShape.sizes`) for n vertices; ``parts``:
    a vertex partition's boundaries (module docstring), which the row blocks follow (`row_blocks`)."""
    if algo in ("1d", "1.5d"):
        num_rows = sizes[0]
        c = sizes[1] if algo == "1.5d" else 1
        rows = row_blocks(n, num_rows, parts)
        blocks = np.arange(num_rows)
        return StageLayout(rows, rows, blocks, blocks % c, group_axis="rep" if algo == "1.5d" else None)
    if algo == "2d":
        rows = row_blocks(n, sizes[0], parts)
        cols = rows if sizes[1] == sizes[0] else block_bounds(n, sizes[1])
        segments = refine(rows, cols)
        starts = np.asarray(segments[:-1])
        return StageLayout(rows, segments, np.searchsorted(rows, starts, side="right") - 1,
                           np.zeros(len(segments) - 1, dtype=np.int64),
                           np.searchsorted(cols, starts, side="right") - 1)
    q, d = sizes[0], sizes[2]
    rows = row_blocks(n, q, parts)
    segments = [0] + [b for k in range(q) for b in sub_bounds(rows[k], rows[k + 1], d)[1:]]
    index = np.arange(q * d)
    return StageLayout(rows, segments, index // d, index % d, index // d, group_axis="depth")


def follows_parts(count: int, parts: Sequence[int] | None) -> bool:
    """Whether ``count`` row blocks follow the partition ``parts`` (one or k consecutive parts each)."""
    return parts is not None and (len(parts) - 1) % count == 0


def row_blocks(n: int, count: int, parts: Sequence[int] | None = None) -> list[int]:
    """The boundaries of ``count`` dense row blocks of n vertices: ``parts`` when it has ``count`` blocks
    (each non-empty, covering ``range(n)``: else `ConfigError`); when it has a multiple k·count of them, every
    k consecutive parts merged into one block (whole parts stay together); otherwise balanced (`block_bounds`)."""
    if not follows_parts(count, parts):
        return block_bounds(n, count)
    bounds = [int(b) for b in parts][::(len(parts) - 1) // count]
    if not is_partition(bounds, n):
        raise ConfigError(f"vertex partition {bounds[:4]}... does not cut {n} vertices into {count} non-empty "
                          f"blocks: reorder the graph again (gridgnn prepare --reorder metis --parts {count})")
    return bounds
