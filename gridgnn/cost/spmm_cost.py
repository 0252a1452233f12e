"""What the cost model prices an SpMM with: element sizes (`SizeInfo`). The vertex partitions and stages of
each algorithm are `gridgnn.cost.stages`; the collectives of one rank, `gridgnn.cost.spmm_plan`. Pure code,
no process group.

The per-rank closed form of one SpMM that the tests price measured runs against is a test oracle
(``tests/helpers/cost_oracles.py``); the model itself is `gridgnn.cost.rank_cost` (all ranks at once).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SizeInfo:
    """Element sizes in bytes: dense values, sparse values, sparse indices."""

    value: int = 4
    sparse_value: int = 4
    index: int = 4


FLOAT32 = SizeInfo()
"""float32 values with int32 indices: what gridgnn sends for graphs below 2^31 vertices and non-zeros."""
