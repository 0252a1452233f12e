"""What the cost model prices an SpMM with: element sizes (`SizeInfo`). The vertex partitions and stages of
each algorithm are `gridgnn.cost.stages`; the collectives of one rank, `gridgnn.cost.spmm_plan`. Pure code,
no process group.

The per-rank closed form of one SpMM that the tests price measured runs against is a test oracle
(``tests/helpers/cost_oracles.py``); the model itself is `gridgnn.cost.rank_cost` (all ranks at once).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gridgnn.config.choices import COMM_PRECISIONS

WIRE_ROW_BYTES = {"fp32": (4, 0), "bf16": (2, 0), "fp16": (2, 0), "int8": (1, 1)}
"""Wire precision -> (bytes per value, bytes per non-empty row): how an activation row of ``w`` values travels
(`wire_row_bytes`). ``int8`` adds one byte per row, the row's power-of-two scale."""


def wire_row_bytes(precision: str, width):
    """Bytes of one activation row of ``width`` values (an int or an int64 array) on the wire in ``precision``
    (`gridgnn.grid.wire` encodes exactly this many): ``fp32`` 4 per value, ``bf16``/``fp16`` 2, ``int8`` 1 per
    value plus 1 per non-empty row (its scale exponent). The one byte rule the executor and the cost model share."""
    if precision not in WIRE_ROW_BYTES:
        raise ValueError(f"comm precision must be one of {', '.join(COMM_PRECISIONS)}; got {precision!r}")
    per_value, per_row = WIRE_ROW_BYTES[precision]
    if isinstance(width, np.ndarray):
        return width.astype(np.int64) * per_value + np.where(width > 0, per_row, 0)
    return int(width) * per_value + (per_row if width > 0 else 0)


@dataclass(frozen=True)
class SizeInfo:
    """Element sizes in bytes: dense values, sparse values, sparse indices, as held in memory (and as weight
    gradients, the loss and Â panels travel); ``precision`` is the wire precision of activation rows in the
    SpMM and dense phases (`row_bytes`, `gridgnn.grid.comm_records.WIRE_PHASES`)."""

    value: int = 4
    sparse_value: int = 4
    index: int = 4
    precision: str = "fp32"

    def row_bytes(self, width):
        """Bytes of one activation row of ``width`` values on the wire (`wire_row_bytes`)."""
        return wire_row_bytes(self.precision, width)

    @property
    def exact(self) -> bool:
        """Whether activations travel as float32 (every collective is the plain one)."""
        return self.precision == "fp32"


FLOAT32 = SizeInfo()
"""float32 values with int32 indices: what gridgnn sends for graphs below 2^31 vertices and non-zeros."""
