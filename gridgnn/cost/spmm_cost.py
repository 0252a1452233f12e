"""What the cost model prices an SpMM with: element sizes (`SizeInfo`) and the vertex partitions of each
algorithm (`partition_stats`). Pure code, no process group.

The per-rank closed form of one SpMM that the tests price measured runs against is a test oracle
(``tests/cost_oracles.py``); the model itself is `gridgnn.cost.rank_cost` (all ranks at once).
"""

from __future__ import annotations

from dataclasses import dataclass

from gridgnn.grid.shape import GridShape
from gridgnn.partition import block_bounds, refine, sub_bounds


@dataclass(frozen=True)
class SizeInfo:
    """Element sizes in bytes: dense values, sparse values, sparse indices."""

    value: int = 4
    sparse_value: int = 4
    index: int = 4


FLOAT32 = SizeInfo()
"""float32 values with int32 indices: what gridgnn sends for graphs below 2^31 vertices and non-zeros."""


def partition_stats(algo: str, shape: GridShape, n: int) -> dict:
    """The vertex partitions an algorithm uses: ``row_bounds``, and the Â panels it moves (2D ``stages``, 3D
    ``sub_bounds``) to count nnz over (pure)."""
    if algo in ("1d", "1.5d"):
        return {"row_bounds": block_bounds(n, shape.sizes[0])}
    if algo == "2d":
        rows, cols = block_bounds(n, shape.sizes[0]), block_bounds(n, shape.sizes[1])
        return {"row_bounds": rows, "col_bounds": cols, "stages": refine(rows, cols)}
    q, d = shape.sizes[0], shape.sizes[2]
    rows = block_bounds(n, q)
    fine = sorted({b for k in range(q) for b in sub_bounds(rows[k], rows[k + 1], d)})
    return {"row_bounds": rows, "sub_bounds": fine}
