"""Activation rows on the wire in a lower precision: `encode` a float32 row block into bytes, `decode` it back
(not collective; `gridgnn.grid.comm.Communicator` calls them around its collectives).

An encoded block of ``n`` rows of ``w`` values is a ``uint8`` tensor of shape ``(n, wire_row_bytes(precision,
w))``, row for row, so every row collective (all-gather of row blocks, all-to-all of row sets, broadcast)
moves it unchanged and its bytes are the cost model's (`gridgnn.cost.spmm_cost.wire_row_bytes`):

==========  ===============================================================================================
``bf16``    the values rounded to nearest bfloat16, 2 bytes each (the same exponent range as float32)
``fp16``    the values clamped to ±65504 and rounded to nearest float16, 2 bytes each (no overflow to inf;
            magnitudes under 6e-8 flush to zero)
``int8``    per row, one power-of-two scale ``2**e`` with ``e`` the smallest exponent that puts the row's
            largest magnitude within ±127: ``w`` int8 values ``q = floor(x / 2**e + u)``, ``u`` uniform in
            [0, 1) from the communicator's seeded generator (stochastic rounding: unbiased, reproducible for a
            given seed and call sequence), then ``e`` as one signed byte
==========  ===============================================================================================

Moving bytes (``uint8``) rather than the low-precision dtype keeps every backend's collectives valid: NCCL and
gloo never see bfloat16 or float16, and never reduce a low-precision value. Sums are formed by the receiver
in float32 (`decode`, then add).

The int8 scale is a single byte (an exponent, as in the OCP microscaling formats) rather than a float32
because GNN rows are narrow: at 16 values a float32 scale costs 4 of 20 bytes (0.31 of float32), one byte
costs 1 of 17 (0.27). A power-of-two scale loses under one bit of resolution against the exact ``max/127``.
"""

from __future__ import annotations

import torch

from gridgnn.cost.spmm_cost import wire_row_bytes

FP16_MAX = 65504.0
INT8_LEVELS = 127
_EXPONENT_RANGE = (-126, 126)  # 2**-e stays a normal float32 for every stored e


def encode(x: torch.Tensor, precision: str, generator: torch.Generator | None = None) -> torch.Tensor:
    """(n, w) float32 -> (n, ``wire_row_bytes(precision, w)``) uint8. ``int8`` needs ``generator`` (on
    ``x``'s device) for its stochastic rounding."""
    rows, width = x.shape
    if precision == "bf16":
        return x.to(torch.bfloat16).contiguous().view(torch.uint8)
    if precision == "fp16":
        return x.clamp(-FP16_MAX, FP16_MAX).to(torch.float16).contiguous().view(torch.uint8)
    if precision != "int8":
        raise ValueError(f"no wire encoding for precision {precision!r}")
    out = torch.empty((rows, wire_row_bytes("int8", width)), dtype=torch.uint8, device=x.device)
    if width == 0:
        return out
    exponent = int8_exponents(x)
    quantized = torch.ldexp(x, -exponent.to(x.dtype)[:, None])  # x / 2**e, exact (a power of two)
    quantized += torch.rand(quantized.shape, generator=generator, device=x.device, dtype=x.dtype)
    quantized.floor_().clamp_(-INT8_LEVELS, INT8_LEVELS)  # in place: two float32 temporaries of x's size
    out[:, :width] = quantized.to(torch.int8).view(torch.uint8)
    out[:, width] = exponent.to(torch.int8).view(torch.uint8)
    return out


def decode(data: torch.Tensor, precision: str, width: int) -> torch.Tensor:
    """(n, ``wire_row_bytes(precision, width)``) uint8 -> (n, width) float32: the values `encode` sent."""
    if precision == "bf16":
        return data.contiguous().view(torch.bfloat16).float()
    if precision == "fp16":
        return data.contiguous().view(torch.float16).float()
    if precision != "int8":
        raise ValueError(f"no wire encoding for precision {precision!r}")
    if width == 0:
        return torch.empty((data.shape[0], 0), dtype=torch.float32, device=data.device)
    values = data[:, :width].view(torch.int8).float()
    exponent = data[:, width].view(torch.int8).float()
    return torch.ldexp(values, exponent[:, None])


def int8_exponents(x: torch.Tensor) -> torch.Tensor:
    """(n,) int32: per row of ``x`` (n, w), the smallest ``e`` in the stored range with ``max|x| <= 127 * 2**e``
    (0 for an all-zero row)."""
    mantissa, exponent = torch.frexp(x.abs().amax(dim=1) / INT8_LEVELS)  # max/127 = m * 2**exponent, m in [0.5, 1)
    exponent -= (mantissa == 0.5).to(exponent.dtype)  # max/127 a power of two: it fits one exponent lower
    return exponent.clamp_(*_EXPONENT_RANGE)


def round_trip(x: torch.Tensor, precision: str, generator: torch.Generator | None = None) -> torch.Tensor:
    """What a receiver holds after ``x`` (n, w) float32 travelled in ``precision`` (``x`` itself for fp32)."""
    if precision == "fp32":
        return x
    return decode(encode(x, precision, generator), precision, x.shape[1])
