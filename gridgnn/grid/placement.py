"""Ranks to hosts: which process of a multi-host run takes which grid coordinates. Pure, no process group.

torchrun gives each host a contiguous block of ranks. A collective whose group stays inside one host runs on
the fast local links (shared memory, NVLink); one whose group spans hosts crosses the network. The grid's
default order is row-major over its axes (the last axis varies fastest, so the last axis's groups are
consecutive ranks). `host_axis_order` instead makes the axis that moves the most bytes vary fastest, then the
next heaviest, and so on: when its size divides the ranks per host, its groups never leave a host.

`Placement` maps a rank to coordinates for a given axis order (slowest to fastest) and back; its
``position`` of a rank is the rank of the same coordinates in the grid's own row-major order, which is the
order the cost model (`gridgnn.cost`) lists ranks in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gridgnn.grid.shape import GridShape


def host_axis_order(shape: GridShape, axis_bytes: dict[str, float], ranks_per_host: int | None) -> tuple[str, ...]:
    """The axes from slowest- to fastest-varying: the grid's own order on one host (or without a host size),
    else by bytes, the heaviest last (ties keep the grid's order)."""
    if ranks_per_host is None or ranks_per_host >= shape.world_size:
        return shape.axes
    index = {axis: i for i, axis in enumerate(shape.axes)}
    return tuple(sorted(shape.axes, key=lambda axis: (axis_bytes.get(axis, 0), -index[axis])))


@dataclass(frozen=True)
class Placement:
    """Rank ``r`` takes the coordinates of ``r`` in row-major order over ``order`` (the last fastest)."""

    shape: GridShape
    order: tuple[str, ...]

    @classmethod
    def default(cls, shape: GridShape) -> Placement:
        return cls(shape, shape.axes)

    @property
    def is_default(self) -> bool:
        return self.order == self.shape.axes

    def coords(self, rank: int) -> dict[str, int]:
        out = {}
        for axis in reversed(self.order):
            rank, out[axis] = divmod(rank, self.shape.size(axis))
        return {axis: out[axis] for axis in self.shape.axes}

    def rank_of(self, **coords: int) -> int:
        rank = 0
        for axis in self.order:
            rank = rank * self.shape.size(axis) + coords[axis]
        return rank

    def position(self, rank: int) -> int:
        """``rank``'s index in the grid's own row-major order (the cost model's rank order)."""
        return self.shape.rank_of(**self.coords(rank))

    def mesh_ranks(self) -> np.ndarray:
        """int64 array of the grid's sizes (axes in the grid's order): the rank at each coordinate."""
        mesh = np.empty(self.shape.world_size, dtype=np.int64)
        for rank in range(self.shape.world_size):
            mesh[self.position(rank)] = rank
        return mesh.reshape(self.shape.sizes)

    def to_rank_order(self, per_position: list) -> list:
        """A per-rank list in the grid's row-major order, re-listed by rank."""
        return [per_position[self.position(rank)] for rank in range(self.shape.world_size)]

    def group(self, rank: int, axis: str) -> list[int]:
        """The ranks of ``rank``'s group on ``axis`` (``"world"``: every rank)."""
        if axis == "world":
            return list(range(self.shape.world_size))
        coords = self.coords(rank)
        return [self.rank_of(**{**coords, axis: k}) for k in range(self.shape.size(axis))]

    def within_host(self, host_of_rank: list[int], axis: str) -> list[bool]:
        """Per rank: whether its ``axis`` group lies on one host."""
        return [len({host_of_rank[m] for m in self.group(r, axis)}) == 1 for r in range(self.shape.world_size)]


def axis_bytes(terms) -> dict[str, float]:
    """Bytes per axis summed over ranks, from cost-model terms (anything with ``axis`` and ``bytes``)."""
    out: dict[str, float] = {}
    for term in terms:
        out[term.axis] = out.get(term.axis, 0) + float(np.sum(term.bytes))
    return out


def within_node_by_position(shape: GridShape, order: tuple[str, ...], per_node: int, axis: str) -> np.ndarray:
    """(P,) bool in the grid's row-major order: the rank at that position has its ``axis`` group on one node
    when ranks fill nodes ``per_node`` at a time and take coordinates in ``order`` (vectorized)."""
    p = shape.world_size
    if axis == "world":
        return np.full(p, per_node >= p)
    ranks = np.arange(p)
    sizes = [shape.size(a) for a in order]
    stride = math.prod(sizes[order.index(axis) + 1:])
    coord = (ranks // stride) % shape.size(axis)
    first = ranks - coord * stride
    last = first + (shape.size(axis) - 1) * stride
    coords = dict(zip(order, np.unravel_index(ranks, sizes), strict=True))
    positions = np.ravel_multi_index([coords[a] for a in shape.axes], shape.sizes)
    out = np.empty(p, dtype=bool)
    out[positions] = first // per_node == last // per_node
    return out
