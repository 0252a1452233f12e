"""Pure index math: block boundaries and global <-> local positions.

A *partition* of ``range(n)`` into ``parts`` blocks is given by its boundaries, a list ``bounds`` of length
``parts + 1`` with ``bounds[0] == 0`` and ``bounds[-1] == n``; block ``k`` is ``range(bounds[k],
bounds[k+1])``. Blocks follow ``numpy.array_split``: sizes differ by at most one and the first ``n % parts``
blocks are the larger ones, so no vertex block is empty while ``n >= parts``. Not collective.
"""

from __future__ import annotations

from bisect import bisect_right

from gridgnn.errors import ConfigError


def block_bounds(n: int, parts: int, *, allow_empty: bool = False, what: str = "vertices") -> list[int]:
    """Boundaries of ``parts`` balanced blocks of ``range(n)``.

    ``allow_empty`` admits ``parts > n`` (used for feature columns, where a width-1 matrix on a grid with
    three process columns leaves two empty column blocks); for vertices it is an error.
    """
    if parts < 1:
        raise ConfigError(f"cannot split {what} into {parts} blocks")
    if n < parts and not allow_empty:
        raise ConfigError(f"{parts} blocks of {what} need at least {parts} {what}, got {n}")
    base, extra = divmod(n, parts)
    bounds = [0]
    for k in range(parts):
        bounds.append(bounds[-1] + base + (1 if k < extra else 0))
    return bounds


def is_partition(bounds, n: int) -> bool:
    """Whether ``bounds`` cut ``range(n)`` into non-empty blocks: 0 first, strictly increasing, n last."""
    bounds = [int(b) for b in bounds]
    return len(bounds) >= 2 and bounds[0] == 0 and bounds[-1] == n and all(
        b > a for a, b in zip(bounds[:-1], bounds[1:], strict=True))


def block_sizes(bounds: list[int]) -> list[int]:
    """Sizes of the blocks described by ``bounds``."""
    return [bounds[k + 1] - bounds[k] for k in range(len(bounds) - 1)]


def owner(bounds: list[int], index: int) -> int:
    """The block that holds global position ``index`` (``0 <= index < bounds[-1]``)."""
    return bisect_right(bounds, index) - 1


def refine(*partitions: list[int]) -> list[int]:
    """The common refinement of several partitions of the same range (sorted union of boundaries).

    Each segment of the result lies inside exactly one block of every input partition: these are the
    stages of SUMMA on a non-square grid.
    """
    ends = {p[-1] for p in partitions}
    if len(ends) != 1:
        raise ValueError(f"partitions cover different ranges: {sorted(ends)}")
    return sorted(set().union(*partitions))


def sub_bounds(start: int, stop: int, parts: int, *, what: str = "vertices") -> list[int]:
    """Global boundaries of ``parts`` balanced sub-blocks of ``range(start, stop)``."""
    return [start + b for b in block_bounds(stop - start, parts, what=what)]


def parse_shape(text: str) -> tuple[int, ...]:
    """Parse a grid shape such as ``"2x3"`` or ``"2x2x2"`` into a tuple of positive ints."""
    try:
        dims = tuple(int(part) for part in text.lower().split("x"))
    except ValueError:
        raise ConfigError(f"grid shape '{text}' is not of the form AxB or AxBxC") from None
    if not dims or any(d < 1 for d in dims):
        raise ConfigError(f"grid shape '{text}' must have positive dimensions")
    return dims
