"""The local sparse kernel `gridgnn.sparse.csr.spmm`: same bits as torch's CSR product, right shapes, grads."""

import os

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from gridgnn.sparse.csr import SparseBlock, spmm
from gridgnn.train.loop.distributed import peak_memory_bytes, reset_peak_memory


def _block(rows: int, cols: int, nnz: int, seed: int = 0) -> tuple[sp.csr_matrix, SparseBlock]:
    a = sp.random(rows, cols, density=nnz / (rows * cols), format="csr", random_state=seed, dtype=np.float32)
    return a, SparseBlock.from_scipy(a, index_dtype=torch.int32)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("rows,cols,nnz,width", [
    (300, 200, 40, 3),        # a tiny product
    (3000, 2000, 20000, 64),  # a mid-sized one
    (500, 500, 0, 8),         # an empty block still gives a (rows x width) zero result
    (200, 300, 5000, 700),    # wide dense input (aggregate-first)
])
def test_spmm_gives_the_bits_of_torch_sparse_mm(threads, rows, cols, nnz, width):
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a, block = _block(rows, cols, nnz)
        dense = torch.randn(cols, width, generator=torch.Generator().manual_seed(1))
        got = block.matmul(dense)
        assert got.shape == (rows, width) and got.dtype == torch.float32
        assert torch.equal(got, torch.sparse.mm(block.csr, dense))
        np.testing.assert_allclose(got.numpy(), a @ dense.numpy(), rtol=1e-5, atol=1e-5)
        start = torch.randn(rows, width, generator=torch.Generator().manual_seed(3))
        expected = start + got
        assert block.matmul_add(dense, start) is start  # in place
        assert torch.equal(start, expected)  # the same bits as adding the product: distributed sums unchanged
        grad = torch.randn(rows, width, generator=torch.Generator().manual_seed(2))
        np.testing.assert_allclose(block.t_matmul(grad).numpy(), a.T @ grad.numpy(), rtol=1e-5, atol=1e-5)
    finally:
        torch.set_num_threads(previous)
    assert torch.get_num_threads() == previous


def test_spmm_never_reads_the_memory_it_writes_into():
    # The CPU path writes into uninitialised memory; fill freed blocks with NaN first so a kernel that read
    # its output buffer (beta != 0) would show it.
    a, block = _block(400, 400, 3000)
    dense = torch.randn(400, 50)
    for _ in range(5):
        junk = torch.full((400, 50), float("nan"))
        del junk
        out = block.matmul(dense)
        assert torch.isfinite(out).all()
        np.testing.assert_allclose(out.numpy(), a @ dense.numpy(), rtol=1e-5, atol=1e-5)


def test_spmm_keeps_autograd_when_the_dense_input_needs_it():
    a, block = _block(50, 40, 300)
    dense = torch.randn(40, 6, requires_grad=True)
    spmm(block.csr, dense).sum().backward()
    np.testing.assert_allclose(dense.grad.numpy(), a.T @ np.ones((50, 6), np.float32), rtol=1e-5)



@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="needs Linux's VmHWM reset")
@pytest.mark.slow  # a peak-memory measurement, machine-dependent
def test_spmm_holds_one_result_sized_buffer_at_its_peak():
    # torch.sparse.mm holds two (a zero-filled matrix and the result); the memory model counts one.
    rows, width = 8192, 2048
    _, block = _block(rows, rows, 20_000)
    dense = torch.rand(rows, width)
    result_bytes = rows * width * 4
    reset_peak_memory(torch.device("cpu"))
    before = peak_memory_bytes(torch.device("cpu"))
    out = block.matmul(dense)
    grown = peak_memory_bytes(torch.device("cpu")) - before
    assert out.shape == (rows, width)
    assert 0.9 * result_bytes <= grown <= 1.25 * result_bytes, grown / result_bytes
