"""Plexus's double random permutation on 2D and 3D (``--reorder double-random``): Â's columns in a second order.

``--reorder random`` renumbers the vertices with one seeded bijection, so rows and columns of Â move alike: the
self-loops and the symmetric pairs of every vertex stay on the diagonal blocks, which a 2D or 3D grid then holds
on its diagonal processes (`benchmarks/double_permutation.py`: the most loaded 4 x 4 block of Coauthor Physics
holds 1.23 x the mean after one permutation). Plexus (Ranjan et al., 2024) permutes Â's columns by a second,
independent permutation σ, which spreads them evenly (1.02 x there). gridgnn keeps every activation in the vertex
order of ``random`` (the model's own rows, outputs, losses: all unchanged) and multiplies
``Â Pσᵀ`` (column c of it is vertex σ⁻¹(c)) by ``Pσ X``: each SpMM's input is first moved into the column order,
and its backward's result back into the vertex order (`gridgnn.spmm.column_exchange`).

σ keeps each process's rows on its own ``row`` axis group, so the move is one all-to-all on ``row``:

==  =====================================================  ===================================================
    the processes of one ``row`` group hold                 σ permutes at random, with its own key
2d  the row blocks of every vertex                          all n vertices (one class)
3d  the sub-blocks S[k][l] of depth slice l, every k        the vertices of slice l (class l), into themselves
==  =====================================================  ===================================================

σ and its inverse are computed vertex by vertex (`ColumnOrder`: `gridgnn.data.bijection.random_bijection` and its
inverse, stream `COLUMN_STREAM` and the class), so every process maps the ids it needs alone, with no table of n
entries held or shared. Pure numpy, no process group.
"""

from __future__ import annotations

import numpy as np

from gridgnn.cost.stages import StageLayout, stage_layout
from gridgnn.data.bijection import random_bijection, random_bijection_inverse

COLUMN_STREAM = 4
"""The generator stream of σ's keys (``--reorder random`` uses 3, R-MAT's scramble 2)."""

CHUNK_IDS = 1 << 22
"""Ids mapped at a time where many are (a block row's entries, a row block's vertices)."""


def num_classes(layout: StageLayout) -> int:
    """The classes σ permutes within: 3D's depth slices, one elsewhere."""
    return int(layout.group.max()) + 1 if layout.group_axis == "depth" else 1


def peer_ranges(layout: StageLayout, group: int) -> list[tuple[int, int]]:
    """The dense rows ``[a, b)`` of each process of a ``row`` group, by its ``row`` coordinate: 2D's row blocks;
    on 3D the sub-blocks S[k][l] of depth slice ``group``."""
    if layout.group_axis == "depth":
        return [layout.segment(s) for s in layout.handled_by(group)]
    bounds = layout.row_bounds
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def row_group(layout: StageLayout, coords: dict) -> int:
    """The ``row`` group (σ's class) of the process at ``coords``: its depth slice on 3D, 0 elsewhere."""
    return int(coords.get("depth", 0)) if layout.group_axis == "depth" else 0


class ColumnOrder:
    """σ of a grid's layout and a seed, evaluated pointwise: `position` maps vertices to their columns and `vertex`
    columns to their vertices, for any ids, in any order, in time and memory of the ids asked (no table of n;
    `looked_up` builds one, for callers that map more ids than there are vertices)."""

    def __init__(self, layout: StageLayout, seed: int):
        self.seed, self.n = seed, int(layout.row_bounds[-1])
        self._table: np.ndarray | None = None  # σ of every vertex, for `looked_up` (built on first use)
        self.depth_classes = layout.group_axis == "depth"
        self.segments, self.group = np.asarray(layout.segments, dtype=np.int64), np.asarray(layout.group)
        self.tables = []  # per class: its ranges' starts and their offsets in the class's index order (one more)
        for group in range(num_classes(layout)):
            ranges = peer_ranges(layout, group)
            starts = np.array([a for a, _ in ranges], dtype=np.int64)
            sizes = np.array([b - a for a, b in ranges], dtype=np.int64)
            self.tables.append((starts, np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)))

    def _classes(self, ids: np.ndarray) -> np.ndarray:
        """The class of every id: its sub-block's depth slice on 3D, 0 elsewhere."""
        if not self.depth_classes:
            return np.zeros(ids.size, dtype=np.int64)
        return self.group[np.searchsorted(self.segments, ids, side="right") - 1]

    def _map(self, ids, inverse: bool) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64)
        out = np.empty_like(ids)
        classes = self._classes(ids)
        for group, (starts, offsets) in enumerate(self.tables):
            chosen = np.flatnonzero(classes == group)
            if chosen.size == 0:
                continue
            member = ids[chosen]
            k = np.searchsorted(starts, member, side="right") - 1
            index = member - starts[k] + offsets[k]  # the id's place in its class
            walk = random_bijection_inverse if inverse else random_bijection
            index = walk(index, int(offsets[-1]), self.seed, stream=(COLUMN_STREAM, group))
            k = np.searchsorted(offsets, index, side="right") - 1
            out[chosen] = starts[k] + index - offsets[k]
        return out

    def position(self, vertices) -> np.ndarray:
        """σ(v): the column of Â each vertex takes (int64, the shape of ``vertices``)."""
        return self._map(vertices, inverse=False)

    def vertex(self, positions) -> np.ndarray:
        """σ⁻¹(c): the vertex at each column (int64)."""
        return self._map(positions, inverse=True)

    def looked_up(self, vertices: np.ndarray) -> np.ndarray:
        """`position` through a table of σ for every vertex, built on first use (n int64, `CHUNK_IDS` at a time):
        an order of magnitude faster per id, for a caller that maps more ids than there are vertices (the cost
        model's counts, once per pass over Â). The table is not pickled."""
        if self._table is None:
            self._table = np.empty(self.n, dtype=np.int64)
            for lo in range(0, self.n, CHUNK_IDS):
                self._table[lo:lo + CHUNK_IDS] = self.position(np.arange(lo, min(self.n, lo + CHUNK_IDS),
                                                                         dtype=np.int64))
        return self._table[vertices]

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_table": None}


def column_positions(layout: StageLayout, seed: int) -> np.ndarray:
    """σ of every vertex (int64, shape (n,)): a table, for the tests; the code maps what it needs (`ColumnOrder`)."""
    return ColumnOrder(layout, seed).position(np.arange(layout.row_bounds[-1], dtype=np.int64))


def order_for(n: int, rows: int, depth: int, seed: int) -> ColumnOrder:
    """The `ColumnOrder` of a 2D grid of ``rows`` row blocks (any column count: one class) or a 3D grid of
    ``rows`` x ``rows`` x ``depth`` (``depth`` 1: the same σ as 2D's), n vertices in balanced blocks (a random
    vertex order has no partition to follow)."""
    return ColumnOrder(stage_layout("3d", (rows, rows, depth), n), seed)


def exchanged_rows(layout: StageLayout, order: ColumnOrder) -> np.ndarray:
    """(row processes, classes) int64: the rows each process receives in one move into the column order, the same
    number as it receives moving back (its rows whose column lies in another process's rows of the group)."""
    counts = np.zeros((len(layout.row_bounds) - 1, num_classes(layout)), dtype=np.int64)
    for group in range(counts.shape[1]):
        for k, (a, b) in enumerate(peer_ranges(layout, group)):
            moved = order.looked_up(np.arange(a, b, dtype=np.int64))
            counts[k, group] = np.count_nonzero((moved < a) | (moved >= b))
    return counts


def exchange_counts(order: ColumnOrder, ranges: list[tuple[int, int]], i: int) -> tuple[np.ndarray, np.ndarray]:
    """The rows the process at ``row`` coordinate ``i`` of a ``row`` group (each process's rows ``ranges``,
    `peer_ranges`) receives from each of its peers: (moving into the column order, moving back), int64 arrays of
    one entry per process, 0 for itself. Into the order it receives, from each peer, its positions whose vertex
    the peer holds; back, the rows it sent that way. Pointwise (`ColumnOrder`); not collective."""
    a, b = ranges[i]
    starts = np.array([lo for lo, _ in ranges], dtype=np.int64)
    mine = np.arange(a, b, dtype=np.int64)
    into = np.bincount(np.searchsorted(starts, order.vertex(mine), side="right") - 1, minlength=len(ranges))
    back = np.bincount(np.searchsorted(starts, order.position(mine), side="right") - 1, minlength=len(ranges))
    into[i] = back[i] = 0
    return into.astype(np.int64), back.astype(np.int64)


def permuted_indices(indices: np.ndarray, order: ColumnOrder) -> np.ndarray:
    """Column ids of Â's stored entries in σ's order (int64), pointwise, `CHUNK_IDS` at a time."""
    out = np.empty(len(indices), dtype=np.int64)
    for lo in range(0, len(indices), CHUNK_IDS):
        out[lo:lo + CHUNK_IDS] = order.position(np.asarray(indices[lo:lo + CHUNK_IDS], dtype=np.int64))
    return out
