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

σ is computed vertex by vertex (`gridgnn.data.bijection.random_bijection`, stream `COLUMN_STREAM` and the class),
so every process computes it alone, with no table shared. Pure numpy, no process group.
"""

from __future__ import annotations

import numpy as np

from gridgnn.cost.stages import StageLayout, stage_layout
from gridgnn.data.bijection import random_bijection

COLUMN_STREAM = 4
"""The generator stream of σ's keys (``--reorder random`` uses 3, R-MAT's scramble 2)."""


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


def class_members(ranges: list[tuple[int, int]]) -> np.ndarray:
    """The vertices of ``ranges`` one range after another (int64): a class in its index order."""
    return np.concatenate([np.arange(a, b, dtype=np.int64) for a, b in ranges] or [np.zeros(0, dtype=np.int64)])


def column_positions(layout: StageLayout, seed: int) -> np.ndarray:
    """σ: the column of Â each vertex takes (int64, shape (n,)); a bijection of every class onto itself."""
    n = layout.row_bounds[-1]
    sigma = np.empty(n, dtype=np.int64)
    for group in range(num_classes(layout)):
        members = class_members(peer_ranges(layout, group))
        sigma[members] = members[random_bijection(np.arange(members.size), members.size, seed,
                                                  stream=(COLUMN_STREAM, group))]
    return sigma


def sigma_for(n: int, rows: int, depth: int, seed: int) -> np.ndarray:
    """`column_positions` of a 2D grid of ``rows`` row blocks (any column count: one class) or a 3D grid of
    ``rows`` x ``rows`` x ``depth`` (``depth`` 1: the same σ as 2D's), n vertices in balanced blocks (a random
    vertex order has no partition to follow)."""
    return column_positions(stage_layout("3d", (rows, rows, depth), n), seed)


def exchanged_rows(layout: StageLayout, sigma: np.ndarray) -> np.ndarray:
    """(row processes, classes) int64: the rows each process receives in one move into the column order, the same
    number as it receives moving back (its rows whose column lies in another process's rows of the group)."""
    counts = np.zeros((len(layout.row_bounds) - 1, num_classes(layout)), dtype=np.int64)
    for group in range(counts.shape[1]):
        for k, (a, b) in enumerate(peer_ranges(layout, group)):
            moved = sigma[a:b]
            counts[k, group] = np.count_nonzero((moved < a) | (moved >= b))
    return counts


def permuted_indices(indices: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """Column ids of Â's stored entries in σ's column order (``sigma[indices]``, int64)."""
    return sigma[np.asarray(indices, dtype=np.int64)]
