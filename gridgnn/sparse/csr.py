"""`SparseBlock`: one tile of Â as a torch CSR tensor, with its transpose built once.

A block is multiplied by dense matrices in both directions: ``A @ X`` in the forward pass and ``Aᵀ @ G`` in
the backward pass. Both use a CSR tensor (the transpose is materialized once at construction, never per
epoch). Blocks that travel between processes are packed into one byte buffer (`pack` / `SparseBlock.unpack`)
whose sections keep the indices as integers: CSR row pointers, column indices and values.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch


def index_dtype_for(n: int, nnz: int = 0) -> torch.dtype:
    """int32 indices while every index and row pointer fits, int64 beyond."""
    return torch.int32 if max(n, nnz) < 2**31 - 1 else torch.int64


def _to_torch_csr(matrix: sp.csr_matrix, index_dtype: torch.dtype, dtype: torch.dtype,
                  device: torch.device | str) -> torch.Tensor:
    np_index = np.int32 if index_dtype == torch.int32 else np.int64
    crow = torch.from_numpy(np.ascontiguousarray(matrix.indptr, dtype=np_index))
    col = torch.from_numpy(np.ascontiguousarray(matrix.indices, dtype=np_index))
    val = torch.from_numpy(np.ascontiguousarray(matrix.data)).to(dtype)
    return csr_tensor(crow, col, val, matrix.shape, device)


def csr_tensor(crow: torch.Tensor, col: torch.Tensor, val: torch.Tensor, shape: tuple[int, int],
               device: torch.device | str) -> torch.Tensor:
    """A torch CSR tensor from its arrays (torch's "beta" warning silenced; invariants hold by construction)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(crow.to(device), col.to(device), val.to(device), size=shape,
                                       check_invariants=False)


def _writes_in_place(csr: torch.Tensor, dense: torch.Tensor) -> bool:
    """Whether `spmm`/`spmm_add` may call ``addmm(..., out=...)``: on CPU (CUDA keeps ``torch.sparse.mm``), and
    not when autograd must record the product (``out=`` variants are not differentiable)."""
    needs_grad = torch.is_grad_enabled() and (dense.requires_grad or csr.requires_grad)
    return dense.device.type == "cpu" and not needs_grad


def spmm(csr: torch.Tensor, dense: torch.Tensor) -> torch.Tensor:
    """``csr @ dense`` for a torch CSR (rows x cols) and a dense (cols x f): the one sparse kernel of gridgnn.

    torch's CSR product (MKL on x86 CPUs) with the configured threads. On CPU it writes into a fresh
    uninitialised (rows x f) tensor through ``addmm(..., beta=0, out=...)``: the same bits as
    ``torch.sparse.mm``, whose extra passes over a zero-filled result cost up to 2x on wide outputs
    (``benchmarks/local_kernel.py``, ``results/perf/``). Called this way, two threads match or beat one down
    to the smallest blocks measured (24 K multiply-adds: 1.00-1.28x), so small products are not sent to one
    thread. Not collective.
    """
    if not _writes_in_place(csr, dense):
        return torch.sparse.mm(csr, dense)
    out = dense.new_empty((csr.shape[0], dense.shape[1]))
    return torch.addmm(out, csr, dense, beta=0, out=out)


def spmm_add(csr: torch.Tensor, dense: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``out += csr @ dense`` in place, shapes as in `spmm` with ``out`` (rows x f); returns ``out``.

    On CPU one ``addmm(..., beta=1, out=out)``: no product-sized temporary, one pass over ``out``. The bits
    equal ``out + csr @ dense`` (tested: MKL completes each row's sum before adding it), so a distributed
    sum over stages is unchanged. Not collective.
    """
    if not _writes_in_place(csr, dense):
        return out.add_(torch.sparse.mm(csr, dense))
    return torch.addmm(out, csr, dense, beta=1, out=out)


@dataclass(frozen=True)
class PackedLayout:
    """Where the sections of a packed (rows x cols, nnz) CSR block lie in its byte buffer.

    Sections are ordered by decreasing element size so each starts aligned to its own element size.
    """

    rows: int
    cols: int
    nnz: int
    index_dtype: torch.dtype
    dtype: torch.dtype

    def sections(self) -> list[tuple[str, torch.dtype, int]]:
        parts = [("crow", self.index_dtype, self.rows + 1), ("col", self.index_dtype, self.nnz),
                 ("val", self.dtype, self.nnz)]
        return sorted(parts, key=lambda s: -s[1].itemsize)

    @property
    def nbytes(self) -> int:
        return sum(dt.itemsize * count for _, dt, count in self.sections())


class SparseBlock:
    """A sparse tile ``A`` (rows x cols) with ``A @ X`` and ``Aᵀ @ G`` kernels. Not collective."""

    def __init__(self, csr: torch.Tensor, csr_t: torch.Tensor | None):
        self.csr = csr
        self.csr_t = csr_t

    @classmethod
    def from_scipy(cls, matrix: sp.spmatrix, *, index_dtype: torch.dtype, dtype: torch.dtype = torch.float32,
                   device: torch.device | str = "cpu", transpose: bool = True) -> SparseBlock:
        """Build from a scipy matrix; ``transpose`` also builds the CSR of ``Aᵀ`` (for backward)."""
        matrix = sp.csr_matrix(matrix)
        matrix.sort_indices()
        csr = _to_torch_csr(matrix, index_dtype, dtype, device)
        csr_t = _to_torch_csr(matrix.T.tocsr(), index_dtype, dtype, device) if transpose else None
        return cls(csr, csr_t)

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.csr.shape)

    @property
    def nnz(self) -> int:
        return int(self.csr._nnz())

    def matmul(self, dense: torch.Tensor) -> torch.Tensor:
        """``A @ dense``: (rows x cols) @ (cols x f) -> (rows x f), f = dense.shape[1]."""
        return spmm(self.csr, dense)

    def matmul_add(self, dense: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """``out += A @ dense`` in place: (rows x cols) @ (cols x f) added to out (rows x f)."""
        return spmm_add(self.csr, dense, out)

    def t_matmul(self, dense: torch.Tensor) -> torch.Tensor:
        """``Aᵀ @ dense``: (cols x rows) @ (rows x f) -> (cols x f)."""
        if self.csr_t is None:
            raise RuntimeError("this block was built without its transpose")
        return spmm(self.csr_t, dense)

    def transposed(self) -> SparseBlock:
        """The block ``Aᵀ`` (sharing storage), e.g. to broadcast it for the backward pass."""
        return SparseBlock(self.csr_t, self.csr)

    def layout(self) -> PackedLayout:
        rows, cols = self.shape
        return PackedLayout(rows, cols, self.nnz, self.csr.crow_indices().dtype, self.csr.dtype)

    def pack(self) -> torch.Tensor:
        """This block's CSR arrays in one uint8 buffer laid out by `PackedLayout` (no transpose)."""
        arrays = {"crow": self.csr.crow_indices(), "col": self.csr.col_indices(), "val": self.csr.values()}
        # an empty section may come with stride 0, which view() refuses: give it an empty byte piece
        pieces = [arrays[name].contiguous().view(torch.uint8) if arrays[name].numel()
                  else torch.empty(0, dtype=torch.uint8, device=arrays[name].device)
                  for name, _, _ in self.layout().sections()]
        return torch.cat(pieces)

    @staticmethod
    def unpack(buffer: torch.Tensor, layout: PackedLayout) -> SparseBlock:
        """Rebuild a block (without transpose) from a buffer made by `pack`; views, no copies."""
        arrays, offset = {}, 0
        for name, dt, count in layout.sections():
            size = dt.itemsize * count
            arrays[name] = buffer[offset: offset + size].view(dt)
            offset += size
        csr = csr_tensor(arrays["crow"], arrays["col"], arrays["val"], (layout.rows, layout.cols),
                         buffer.device)
        return SparseBlock(csr, None)
