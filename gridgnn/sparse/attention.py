"""`EdgeBlock`: the per-edge kernels of graph attention on one tile of the ``gat`` operator's pattern.

A tile is ``m`` rows (destination vertices) by ``n`` columns (source vertices); K heads of C channels each.
Per stored entry (i, j) and head h the attention layer needs the score ``e = LeakyReLU(s_dst[i] + s_src[j])``,
row reductions (maximum, sum) for the edge softmax, the weighted aggregation ``out[i] += α_ij x[j]`` per
head, its transpose ``dx[j] += α_ij g[i]`` and the SDDMM ``dα_ij = <g[i], x[j]>`` (per head). Every kernel
here works on one tile and is not collective; `gridgnn.spmm.attention` combines tiles across processes.
Edge values are (nnz, K) tensors in the tile's CSR (row-major) order.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor

from gridgnn.sparse.csr import csr_tensor, spmm

Segments = list[tuple[int, int, int]]
"""(head, first local column, end local column) of each piece of a head among a block's columns."""


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

    def aggregate(self, alpha: Tensor, x: Tensor, segments: Segments) -> Tensor:
        """(m, w): ``α_h x[:, lo:hi]`` for each segment (h, lo, hi) of x's w local columns; alpha (nnz, K)."""
        parts = [spmm(self._csr(alpha[:, h], False), x[:, lo:hi].contiguous()) for h, lo, hi in segments]
        return torch.cat(parts, dim=1) if parts else x.new_zeros((self.shape[0], 0))

    def aggregate_t(self, alpha: Tensor, grad: Tensor, segments: Segments) -> Tensor:
        """(n, w): ``α_hᵀ grad[:, lo:hi]`` for each segment of grad's w local columns; alpha (nnz, K)."""
        parts = [spmm(self._csr(alpha[:, h], True), grad[:, lo:hi].contiguous()) for h, lo, hi in segments]
        return torch.cat(parts, dim=1) if parts else grad.new_zeros((self.shape[1], 0))

    def sddmm(self, grad: Tensor, x: Tensor, segments: Segments, heads: int) -> Tensor:
        """(nnz, K): ``<grad[i, lo:hi], x[j, lo:hi]>`` added into head h for each segment (h, lo, hi), at every
        stored (i, j); grad (m, w), x (n, w). Heads without a segment get zeros. One sampled product
        (``torch.sparse.sampled_addmm``) per segment: no (nnz, w) temporaries."""
        out = grad.new_zeros((self.nnz, heads))
        if self.nnz == 0:
            return out
        pattern = self._csr(grad.new_zeros(self.nnz), False)
        for h, lo, hi in segments:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                product = torch.sparse.sampled_addmm(pattern, grad[:, lo:hi].contiguous(),
                                                     x[:, lo:hi].t().contiguous(), beta=0.0)
            out[:, h] += product.values()
        return out


def head_segments(heads: int, width: int, cols: tuple[int, int]) -> Segments:
    """The local column ranges of each head that global columns ``cols`` of a K·C-wide matrix cut: (h, lo,
    hi) with lo, hi local (relative to ``cols[0]``), heads in order, empty pieces left out."""
    channels = width // heads
    c0, c1 = cols
    out = []
    for h in range(heads):
        lo, hi = max(c0, h * channels), min(c1, (h + 1) * channels)
        if hi > lo:
            out.append((h, lo - c0, hi - c0))
    return out


def head_partial_sums(x: Tensor, heads: int, width: int, cols: tuple[int, int]) -> Tensor:
    """(rows, K): each row's sum over the columns ``cols`` (global, of a K·C-wide matrix; ``x`` holds them) of
    each of the K heads; a head without columns there sums to 0. The result stays in ``x``'s autograd graph even
    where ``cols`` holds no column (so that every process of a group takes a following collective's backward
    alike). Not collective."""
    partial = x[:, :0].sum(dim=1, keepdim=True).repeat(1, heads)
    for h, lo, hi in head_segments(heads, width, cols):
        partial[:, h] = x[:, lo:hi].sum(dim=1)
    return partial
