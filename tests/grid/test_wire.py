"""The wire encodings of ``--comm-precision`` (`gridgnn.grid.wire`): sizes, error bounds, rounding, and the
byte rule the cost model shares (`gridgnn.cost.spmm_cost.wire_row_bytes`)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gridgnn.cost.spmm_cost import SizeInfo, wire_row_bytes
from gridgnn.grid.wire import FP16_MAX, decode, encode, int8_exponents, round_trip

LOW = ("bf16", "fp16", "int8")


def _rows(n: int = 400, width: int = 16, seed: int = 0) -> torch.Tensor:
    """Rows of very different magnitudes (1e-6 to 1e3), as activations and gradients have."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, width, generator=gen) * torch.logspace(-6, 3, n)[:, None]


@pytest.mark.parametrize("precision", LOW)
@pytest.mark.parametrize("width", [0, 1, 7, 16, 33])
def test_an_encoded_block_has_the_cost_models_bytes_per_row(precision, width):
    x = _rows(width=width) if width else torch.empty((5, 0))
    data = encode(x, precision, torch.Generator().manual_seed(1))
    assert data.dtype == torch.uint8
    assert data.shape == (x.shape[0], wire_row_bytes(precision, width))
    assert decode(data, precision, width).shape == x.shape
    arr = np.array([0, 1, 7, 16])
    np.testing.assert_array_equal(SizeInfo(precision=precision).row_bytes(arr),
                                  [wire_row_bytes(precision, int(w)) for w in arr])


def test_bytes_per_row_are_half_or_about_a_quarter_of_float32():
    assert [wire_row_bytes(p, 16) for p in ("fp32", "bf16", "fp16", "int8")] == [64, 32, 32, 17]
    assert wire_row_bytes("int8", 0) == 0  # an empty row carries no scale
    with pytest.raises(ValueError, match="comm precision"):
        wire_row_bytes("fp8", 4)


@pytest.mark.parametrize(("precision", "bound"), [("bf16", 2 ** -8), ("fp16", 2 ** -11), ("int8", 2 / 127)])
def test_every_value_is_within_its_formats_error_of_its_rows_scale(precision, bound):
    """bf16/fp16 round to nearest: relative error at most half an ulp (fp16: rows above its subnormal range);
    int8: at most one step of the row's scale (2 * max / 127 with a power-of-two scale)."""
    x = _rows()
    y = round_trip(x, precision, torch.Generator().manual_seed(2))
    if precision == "int8":
        assert ((y - x).abs() <= bound * x.abs().amax(dim=1, keepdim=True)).all()
    else:
        normal = x.abs() > 1e-4
        assert ((y - x).abs()[normal] <= bound * x.abs()[normal]).all()


def test_int8_scales_are_the_smallest_power_of_two_that_fits():
    x = torch.tensor([[127.0, -3.0], [0.5, 0.25], [0.0, 0.0], [-254.0, 1.0]])
    e = int8_exponents(x)
    assert e.tolist() == [0, -7, 0, 1]  # 127 = 127*2^0 exactly; 0.5 > 127*2^-8 = 0.496; 254 = 127*2^1
    assert (x.abs().amax(dim=1) <= 127 * torch.ldexp(torch.ones(4), e.float())).all()
    assert (x.abs().amax(dim=1)[[0, 1, 3]] > 127 * torch.ldexp(torch.ones(3), e[[0, 1, 3]].float() - 1)).all()


def test_int8_rounding_is_stochastic_unbiased_and_seeded():
    x = torch.full((4, 20000), 0.3)
    x[:, 0] = 1.0  # scale 2**-6: 0.3 lies between two steps (19 and 20 of 1/64)
    draws = [round_trip(x, "int8", torch.Generator().manual_seed(s)) for s in range(8)]
    values = torch.stack(draws)[:, :, 1:]
    assert set(values.unique().tolist()) == {19 / 64, 20 / 64}  # never further than one step
    assert abs(values.mean().item() - 0.3) < 2e-4  # unbiased
    again = round_trip(x, "int8", torch.Generator().manual_seed(3))
    assert torch.equal(again, draws[3])  # the same seed rounds the same way
    assert not torch.equal(draws[0], draws[1])


def test_zero_rows_and_fp16_overflow():
    x = torch.zeros(3, 5)
    assert torch.equal(round_trip(x, "int8", torch.Generator()), x)
    big = torch.tensor([[1e6, -1e6, 1.0]])
    y = round_trip(big, "fp16")
    assert torch.isfinite(y).all() and y[0, 0] == FP16_MAX and y[0, 1] == -FP16_MAX  # saturates, no inf
    assert torch.equal(round_trip(big, "fp32"), big)
