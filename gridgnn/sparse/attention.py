"""`EdgeBlock`: the per-edge kernels of graph attention on one tile of the ``gat`` operator's pattern.

A tile is ``m`` rows (destination vertices) by ``n`` columns (source vertices); K heads of C channels each.
Per stored entry (i, j) and head h the attention layer needs the score ``e = LeakyReLU(s_dst[i] + s_src[j])``,
row reductions (maximum, sum) for the edge softmax, the weighted aggregation ``out[i] += α_ij x[j]`` per
head, its transpose ``dx[j] += α_ij g[i]`` and the SDDMM ``dα_ij = <g[i], x[j]>`` (per head). Every kernel
here works on one tile and is not collective; `gridgnn.spmm.attention` combines tiles across processes.
Edge values are (nnz, K) tensors in the tile's CSR (row-major) order.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor

from gridgnn.sparse.csr import csr_tensor, spmm, spmm_add


def heads_first(x: Tensor, heads: int) -> Tensor:
    """(n, K*C) -> contiguous (K, n, C): head h's channels as one matrix."""
    return x.view(x.shape[0], heads, x.shape[1] // heads).transpose(0, 1).contiguous()


def heads_last(x: Tensor) -> Tensor:
    """(K, n, C) -> (n, K*C), the inverse of `heads_first`."""
    return x.transpose(0, 1).reshape(x.shape[1], x.shape[0] * x.shape[2])


class EdgeBlock:
    """The pattern of one (m x n) tile: CSR arrays, each entry's local row and column, and the transpose's
    CSR arrays with the permutation that reorders entry values into it. Not collective."""

    def __init__(self, matrix: sp.spmatrix, *, device: torch.device | str = "cpu"):
        matrix = sp.csr_matrix(matrix)
        matrix.sort_indices()
        self.shape = tuple(int(s) for s in matrix.shape)
        self.device = torch.device(device)
        counts = np.diff(matrix.indptr)
        self.crow = torch.from_numpy(matrix.indptr.astype(np.int64)).to(device)
        self.cols = torch.from_numpy(matrix.indices.astype(np.int64)).to(device)
        self.rows = torch.from_numpy(np.repeat(np.arange(self.shape[0], dtype=np.int64), counts)).to(device)
        order = np.argsort(matrix.indices, kind="stable")  # entries grouped by column, rows ascending inside
        t_counts = np.bincount(matrix.indices, minlength=self.shape[1])
        self.t_crow = torch.from_numpy(np.concatenate([[0], np.cumsum(t_counts)]).astype(np.int64)).to(device)
        self.t_cols = self.rows[torch.from_numpy(order).to(device)]
        self.t_perm = torch.from_numpy(order.astype(np.int64)).to(device)

    @classmethod
    def from_csr(cls, csr: Tensor) -> EdgeBlock:
        """The pattern of a torch CSR tensor."""
        crow, col = csr.crow_indices().cpu().numpy(), csr.col_indices().cpu().numpy()
        values = np.ones(col.shape[0], dtype=np.float32)
        return cls(sp.csr_matrix((values, col, crow), shape=tuple(csr.shape)), device=csr.device)

    @property
    def nnz(self) -> int:
        return int(self.cols.numel())

    def scores(self, s_dst: Tensor, s_src: Tensor) -> Tensor:
        """(nnz, K) raw scores ``s_dst[i] + s_src[j]``; s_dst (m, K) of the tile's rows, s_src (n, K)."""
        return s_dst[self.rows] + s_src[self.cols]

    def row_max(self, values: Tensor) -> Tensor:
        """(m, K): each row's maximum of ``values`` (nnz, K); -inf for a row without entries."""
        out = values.new_full((self.shape[0], values.shape[1]), float("-inf"))
        return out.scatter_reduce_(0, self.rows[:, None].expand(-1, values.shape[1]), values, "amax")

    def row_sum(self, values: Tensor) -> Tensor:
        """(m, K): each row's sum of ``values`` (nnz, K)."""
        return values.new_zeros((self.shape[0], values.shape[1])).index_add_(0, self.rows, values)

    def col_sum(self, values: Tensor) -> Tensor:
        """(n, K): each column's sum of ``values`` (nnz, K)."""
        return values.new_zeros((self.shape[1], values.shape[1])).index_add_(0, self.cols, values)

    def _csr(self, values: Tensor, transpose: bool) -> Tensor:
        if transpose:
            return csr_tensor(self.t_crow, self.t_cols, values[self.t_perm].contiguous(),
                              (self.shape[1], self.shape[0]), self.device)
        return csr_tensor(self.crow, self.cols, values.contiguous(), self.shape, self.device)

    def aggregate_add(self, alpha: Tensor, x: Tensor, out: Tensor) -> Tensor:
        """``out[h] += α_h x[h]`` for each head h: alpha (nnz, K), x (K, n, C) and out (K, m, C) head-major
        (`heads_first`). Returns out."""
        for h in range(alpha.shape[1]):
            spmm_add(self._csr(alpha[:, h], False), x[h], out[h])
        return out

    def aggregate_t(self, alpha: Tensor, grad: Tensor) -> Tensor:
        """(n, K*C): ``α_hᵀ grad[:, head h]`` for each head; alpha (nnz, K), grad (m, K*C)."""
        heads = alpha.shape[1]
        width = grad.shape[1] // heads
        parts = [spmm(self._csr(alpha[:, h], True), grad[:, h * width:(h + 1) * width].contiguous())
                 for h in range(heads)]
        return torch.cat(parts, dim=1) if parts else grad.new_zeros((self.shape[1], 0))

    def sddmm(self, grad: Tensor, x: Tensor, heads: int) -> Tensor:
        """(nnz, K): ``<grad[i, head h], x[j, head h]>`` at every stored (i, j); grad (m, K*C), x (n, K*C)."""
        width = x.shape[1] // heads
        g = grad.view(grad.shape[0], heads, width)
        v = x.view(x.shape[0], heads, width)
        out = grad.new_empty((self.nnz, heads))
        step = max(1, (1 << 22) // max(1, heads * width))  # bounded temporaries: about 4M values per chunk
        for lo in range(0, self.nnz, step):
            hi = min(self.nnz, lo + step)
            out[lo:hi] = (g[self.rows[lo:hi]] * v[self.cols[lo:hi]]).sum(dim=2)
        return out
