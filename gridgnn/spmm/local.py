"""The single-process aggregation ``Â @ X``: the reference every distributed algorithm is checked against."""

from __future__ import annotations

import scipy.sparse as sp
import torch

from gridgnn.sparse.csr import SparseBlock, index_dtype_for


class _LocalSpMMFunction(torch.autograd.Function):
    """Forward ``Y = A X``; backward ``dX = Aᵀ dY`` (correct for directed graphs)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, block: SparseBlock) -> torch.Tensor:
        ctx.block = block
        return block.matmul(x)

    @staticmethod
    def backward(ctx, grad_y: torch.Tensor):
        return ctx.block.t_matmul(grad_y.contiguous()), None


class LocalSpMM:
    """``agg(x) = Â @ x`` on one process, with autograd.

    Args:
        adj: the normalized adjacency Â, scipy sparse, shape (n, n); converted once to CSR tensors
            (Â and Âᵀ) on ``device``.
    Call: ``x`` of shape (n, f) -> (n, f). Not collective.
    """

    def __init__(self, adj: sp.spmatrix, *, dtype: torch.dtype = torch.float32,
                 device: torch.device | str = "cpu"):
        n = adj.shape[0]
        self.block = SparseBlock.from_scipy(adj, index_dtype=index_dtype_for(n, adj.nnz), dtype=dtype,
                                            device=device)

    @property
    def num_nodes(self) -> int:
        return self.block.shape[0]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return _LocalSpMMFunction.apply(x, self.block)
