"""Grid shapes for each algorithm: pure validation, no process group.

=========  ==========================  ===========================================
algorithm  axes (DeviceMesh dim names)  shape
=========  ==========================  ===========================================
``1d``     ``row``                      ``(P,)``
``1.5d``   ``row``, ``rep``             ``(P / c, c)``, ``c`` the replication factor
``2d``     ``row``, ``col``             ``(pr, pc)`` with ``pr * pc = P``
``3d``     ``row``, ``col``, ``depth``  ``(q, q, d)`` with ``q * q * d = P``
=========  ==========================  ===========================================

A collective "on axis ``a``" runs among the processes whose coordinates differ only along ``a``: on a 2D grid
the ``col`` axis group of process (i, j) is its grid row {(i, *)}, the ``row`` axis group its grid column.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gridgnn.errors import ConfigError
from gridgnn.partition import parse_shape

ALGORITHMS = ("1d", "1.5d", "2d", "3d")
AXES = {"1d": ("row",), "1.5d": ("row", "rep"), "2d": ("row", "col"), "3d": ("row", "col", "depth")}


@dataclass(frozen=True)
class GridShape:
    """A validated grid: the algorithm, its axis names and sizes (row-major rank order)."""

    algo: str
    axes: tuple[str, ...]
    sizes: tuple[int, ...]

    @property
    def world_size(self) -> int:
        return math.prod(self.sizes)

    def size(self, axis: str) -> int:
        return self.sizes[self.axes.index(axis)]

    def coords(self, rank: int) -> dict[str, int]:
        """Coordinates of global ``rank`` (row-major: the last axis varies fastest)."""
        out = {}
        for axis, size in zip(reversed(self.axes), reversed(self.sizes), strict=True):
            rank, out[axis] = divmod(rank, size)
        return {axis: out[axis] for axis in self.axes}

    def rank_of(self, **coords: int) -> int:
        rank = 0
        for axis, size in zip(self.axes, self.sizes, strict=True):
            rank = rank * size + coords[axis]
        return rank

    def label(self) -> str:
        """The shape as the user writes it, e.g. ``"2x3"``."""
        return "x".join(str(s) for s in self.sizes)

    def _size_or_one(self, axis: str) -> int:
        return self.size(axis) if axis in self.axes else 1

    @property
    def replication(self) -> int:
        """Replicas of every block row: the ``rep`` axis (1.5D's c), 1 on grids without one."""
        return self._size_or_one("rep")

    @property
    def col_blocks(self) -> int:
        """Blocks of the feature columns: the ``col`` axis (2D's pc, 3D's q), 1 on grids without one."""
        return self._size_or_one("col")

    @property
    def depth(self) -> int:
        """Depth slices of every block: the ``depth`` axis (3D's d), 1 on grids without one."""
        return self._size_or_one("depth")

    @property
    def splits_features(self) -> bool:
        """Whether feature columns are split (a ``col`` axis: 2D, 3D), so Â panels move along ``col``."""
        return "col" in self.axes

    def config_fields(self) -> dict:
        """The `TrainConfig` fields that select this shape for its algorithm: ``grid`` (the label, where the
        shape has a ``col`` axis and the user gives ``--grid``) and ``replication``."""
        return {"grid": self.label() if self.splits_features else None, "replication": self.replication}

    def grid_flags(self) -> list[str]:
        """The ``gridgnn train`` flags that select this shape for its algorithm: ``--replication`` where the
        shape has a ``rep`` axis, ``--grid`` where it has a ``col`` axis."""
        flags = ["--replication", str(self.replication)] if "rep" in self.axes else []
        return flags + (["--grid", self.label()] if self.splits_features else [])


def _factors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _most_square_2d(world_size: int) -> tuple[int, int]:
    pr = max(d for d in _factors(world_size) if d * d <= world_size)
    return pr, world_size // pr


def resolve_grid(
    algo: str, world_size: int, *, replication: int | None = None, grid: str | None = None
) -> GridShape:
    """Validate (algorithm, P, replication or shape) and return the grid; raise `ConfigError` otherwise.

    Defaults: 1.5D ``c = 1``; 2D the most square factorization (``pr <= pc``); 3D ``q x q x q``
    (P must be a cube unless ``grid`` gives ``q x q x d``). Not collective.
    """
    if algo not in ALGORITHMS:
        raise ConfigError(f"unknown algorithm '{algo}'; choose one of {', '.join(ALGORITHMS)}")
    if world_size < 1:
        raise ConfigError(f"the number of processes must be positive, got {world_size}")
    dims = parse_shape(grid) if grid else None
    if dims is not None and math.prod(dims) != world_size:
        raise ConfigError(f"{algo} grid {grid} needs {math.prod(dims)} processes, got {world_size}")
    if algo == "1d":
        return _shape_1d(world_size, dims)
    if algo == "1.5d":
        return _shape_15d(world_size, replication, dims)
    if algo == "2d":
        return _shape_2d(world_size, dims)
    return _shape_3d(world_size, dims)


def _shape_1d(p: int, dims: tuple[int, ...] | None) -> GridShape:
    if dims is not None and len(dims) != 1:
        raise ConfigError(f"1d grid takes one dimension (e.g. {p}), got {'x'.join(map(str, dims))}")
    return GridShape("1d", AXES["1d"], (p,))


def _shape_15d(p: int, replication: int | None, dims: tuple[int, ...] | None) -> GridShape:
    if dims is not None:
        if len(dims) != 2:
            raise ConfigError("1.5d grid takes two dimensions (rows x replication), e.g. 2x2")
        if replication is not None and replication != dims[1]:
            raise ConfigError(f"--replication {replication} contradicts 1.5d grid {dims[0]}x{dims[1]}")
        replication = dims[1]
    c = 1 if replication is None else replication
    if c < 1 or p % c:
        raise ConfigError(
            f"replication {c} does not divide {p} processes; choose one of {_factors(p)}"
        )
    return GridShape("1.5d", AXES["1.5d"], (p // c, c))


def _shape_2d(p: int, dims: tuple[int, ...] | None) -> GridShape:
    if dims is None:
        dims = _most_square_2d(p)
    if len(dims) != 2:
        raise ConfigError(f"2d grid takes two dimensions, e.g. {'x'.join(map(str, _most_square_2d(p)))}")
    return GridShape("2d", AXES["2d"], dims)


def _shape_3d(p: int, dims: tuple[int, ...] | None) -> GridShape:
    if dims is None:
        q = round(p ** (1 / 3))
        if q**3 != p:
            cubes = [k**3 for k in range(1, 9)]
            raise ConfigError(
                f"3d needs a cube number of processes ({', '.join(map(str, cubes))}, ...) or --grid qxqxd, "
                f"got {p}"
            )
        dims = (q, q, q)
    if len(dims) != 3 or dims[0] != dims[1]:
        raise ConfigError(
            f"3d grid must be q x q x d (equal first two dimensions), got {'x'.join(map(str, dims))}"
        )
    return GridShape("3d", AXES["3d"], dims)
