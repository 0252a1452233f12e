"""The product order of a layer, which decides the width of its SpMMs (pure; no process group).

Aggregate-first ``(Â H) W`` multiplies Â by the input width, transform-first ``Â (H W)`` by the output width.
In the backward pass every layer multiplies by Âᵀ at the same width, except a first layer that aggregates
first: its input features need no gradient, and the weight gradient reuses the ``Â X`` kept from the forward
pass (CAGNET computes that product anyway). The cost model prices the orders (`gridgnn.cost.epoch_model`);
the per-rank sum over one training step that the tests use is ``tests/cost_oracles.py``.
"""

from __future__ import annotations

ORDERS = ("auto", "aggregate-first", "transform-first")


def resolve_order(order: str, in_channels: int, out_channels: int) -> str:
    """``aggregate-first`` or ``transform-first`` for one layer; ``auto`` sends the narrower width
    through the SpMM (transform first when ``out_channels < in_channels``)."""
    if order == "auto":
        return "transform-first" if out_channels < in_channels else "aggregate-first"
    if order not in ORDERS:
        raise ValueError(f"order must be one of {', '.join(ORDERS)}; got {order!r}")
    return order
