"""``X W`` for a constant sparse X (input features): the first transform of a bag-of-words graph."""

from __future__ import annotations

import torch
from torch import Tensor

from gridgnn.sparse.csr import SparseBlock


class _SparseLinear(torch.autograd.Function):
    """``Y = X W`` for a constant sparse X; backward ``dW = Xᵀ dY``."""

    @staticmethod
    def forward(ctx, weight: Tensor, x: SparseBlock) -> Tensor:
        ctx.x = x
        return x.matmul(weight)

    @staticmethod
    def backward(ctx, grad_y: Tensor):
        return ctx.x.t_matmul(grad_y.contiguous()), None


def sparse_linear(x: SparseBlock, weight: Tensor) -> Tensor:
    """``X W``: X sparse (m, f_in), W dense (f_in, f_out) -> (m, f_out); differentiable in W only."""
    return _SparseLinear.apply(weight, x)
