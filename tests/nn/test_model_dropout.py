"""Layout-invariant dropout: masks depend only on (seed, epoch, layer, global row, global column)."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from gridgnn.nn.dropout import dropout, relu_dropout, sparse_dropout
from gridgnn.nn.hashing import (
    _M64,
    _fmix32_int,
    _fmix32_numpy_,
    _fmix32_torch_,
    _keep_mask_torch,
    _mix,
    _mix_int,
    _signed,
    id_hashes,
    keep_mask,
    keep_pairs,
    stream_keys,
    threshold,
)

STREAM = {"seed": 7, "epoch": 3, "layer": 1}


def test_torch_hash_matches_the_python_reference():
    values = [0, 1, 2**32, 2**63 - 1, -1, -(2**63), 123456789123456789, -987654321]
    hashed = _mix(torch.tensor(values, dtype=torch.int64)).tolist()
    assert hashed == [_signed(_mix_int(v & _M64)) for v in values]


def test_fmix32_numpy_and_torch_match_the_python_reference():
    values = [0, 1, 2**16, 2**31 - 1, 2**31, 2**32 - 1, 0x9E3779B9, 123456789]
    expected = [_fmix32_int(v) for v in values]
    h = np.array(values, dtype=np.uint32)
    assert _fmix32_numpy_(h, np.empty_like(h)).tolist() == expected
    t = torch.tensor([_signed(v, 32) for v in values], dtype=torch.int32)
    assert [v & 0xFFFFFFFF for v in _fmix32_torch_(t, torch.empty_like(t)).tolist()] == expected


@pytest.mark.parametrize("scale", [None, 2.0])
def test_numpy_and_torch_mask_paths_give_the_same_bits(scale):
    """CPU runs the mask in numpy, other devices in torch int32: both must draw the same masks."""
    rows, cols = torch.arange(37, 300), torch.arange(5, 90)
    row_key, col_key = stream_keys(**STREAM)
    via_torch = _keep_mask_torch(id_hashes(rows, row_key), id_hashes(cols, col_key), threshold(0.3), scale,
                                 torch.float32)
    assert torch.equal(keep_mask(rows, cols, 0.3, scale=scale, **STREAM), via_torch)


def test_keep_pairs_equals_the_dense_mask_entries():
    rows, cols = torch.randint(0, 400, (5000,)), torch.randint(0, 300, (5000,))
    full = keep_mask(torch.arange(400), torch.arange(300), 0.4, **STREAM)
    row_key, col_key = stream_keys(**STREAM)
    pairs = keep_pairs(id_hashes(rows, row_key), id_hashes(cols, col_key), 0.4)
    assert torch.equal(pairs, full[rows, cols])


def test_threshold_extremes():
    assert threshold(0.0) == -(2**31) and threshold(0.5) == 0
    assert threshold(1.0 - 1e-12) == 2**31 - 1
    assert bool(keep_mask(torch.arange(50), torch.arange(50), 0.0, **STREAM).all())


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_keep_rate_is_one_minus_p(p):
    mask = keep_mask(torch.arange(1000), torch.arange(1000), p, **STREAM)
    assert abs(mask.float().mean().item() - (1 - p)) < 0.005


def test_sub_block_with_global_ids_equals_slice_of_full_mask():
    full = keep_mask(torch.arange(500), torch.arange(70), 0.5, **STREAM)
    rows, cols = torch.arange(123, 311), torch.arange(20, 61)
    assert torch.equal(keep_mask(rows, cols, 0.5, **STREAM), full[123:311, 20:61])
    scattered_rows, scattered_cols = torch.tensor([499, 3, 250, 3]), torch.tensor([69, 0, 31])
    block = keep_mask(scattered_rows, scattered_cols, 0.5, **STREAM)
    assert torch.equal(block, full[scattered_rows][:, scattered_cols])


def test_dropout_of_a_block_equals_the_slice_of_full_dropout():
    x = torch.randn(300, 40)
    full = dropout(x, 0.3, **STREAM)
    for r0, r1, c0, c1 in [(0, 100, 0, 40), (100, 300, 10, 25), (299, 300, 39, 40)]:
        block = dropout(x[r0:r1, c0:c1], 0.3, row_ids=torch.arange(r0, r1), col_ids=torch.arange(c0, c1),
                        **STREAM)
        assert torch.equal(block, full[r0:r1, c0:c1])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dropout_without_gradient_has_the_bits_of_the_masked_product(dtype):
    """A matrix that needs no gradient (the input) is dropped in one pass; same bits as x * scaled mask."""
    x = torch.randn(130, 45, dtype=dtype)
    rows, cols = torch.arange(10, 140), torch.arange(3, 48)
    fast = dropout(x, 0.3, row_ids=rows, col_ids=cols, **STREAM)
    slow = dropout(x.clone().requires_grad_(), 0.3, row_ids=rows, col_ids=cols, **STREAM).detach()
    assert fast.dtype == dtype and torch.equal(fast, slow)
    assert torch.equal(torch.signbit(fast), torch.signbit(slow))  # dropped negatives are -0 in both


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fused_relu_dropout_equals_dropout_of_relu_forward_and_backward(dtype):
    x = torch.randn(150, 40, dtype=dtype)
    rows, cols = torch.arange(7, 157), torch.arange(40)
    upstream = torch.randn(150, 40, dtype=dtype)
    results = []
    for fn in (relu_dropout, lambda h, *a, **k: dropout(torch.relu(h), *a, **k)):
        leaf = x.clone().requires_grad_()
        y = fn(leaf, 0.4, row_ids=rows, col_ids=cols, **STREAM)
        (y * upstream).sum().backward()
        results.append((y.detach(), leaf.grad))
    (fused, fused_grad), (plain, plain_grad) = results
    assert fused.dtype == dtype and torch.equal(fused, plain) and torch.equal(fused_grad, plain_grad)
    assert torch.equal(relu_dropout(x, 0.4, training=False, **STREAM), torch.relu(x))


def test_kept_values_are_scaled_and_gradient_follows_mask():
    x = torch.randn(200, 30, requires_grad=True)
    y = dropout(x, 0.25, **STREAM)
    kept = y != 0
    assert torch.allclose(y[kept], x[kept] / 0.75)
    y.sum().backward()
    assert torch.allclose(x.grad, kept.float() / 0.75)


def test_streams_differ_and_repeat():
    ids = torch.arange(200)
    base = keep_mask(ids, ids, 0.5, seed=0, epoch=0, layer=0)
    assert torch.equal(base, keep_mask(ids, ids, 0.5, seed=0, epoch=0, layer=0))
    for other in ({"seed": 1, "epoch": 0, "layer": 0}, {"seed": 0, "epoch": 1, "layer": 0},
                  {"seed": 0, "epoch": 0, "layer": 1}):
        agreement = (keep_mask(ids, ids, 0.5, **other) == base).float().mean().item()
        assert abs(agreement - 0.5) < 0.02  # independent masks agree half the time


def test_rows_and_columns_are_not_correlated():
    mask = keep_mask(torch.arange(400), torch.arange(400), 0.5, **STREAM)
    neighbour_rows = (mask[1:] == mask[:-1]).float().mean().item()
    neighbour_cols = (mask[:, 1:] == mask[:, :-1]).float().mean().item()
    assert abs(neighbour_rows - 0.5) < 0.01 and abs(neighbour_cols - 0.5) < 0.01


def test_ids_beyond_32_bits():
    rows = torch.tensor([5, 2**32 + 5, 2**40 + 5])
    mask = keep_mask(rows, torch.arange(4096), 0.5, **STREAM)
    assert not torch.equal(mask[0], mask[1]) and not torch.equal(mask[1], mask[2])


def test_eval_mode_and_zero_p_are_identity():
    x = torch.randn(10, 5)
    assert dropout(x, 0.5, training=False, **STREAM) is x
    assert dropout(x, 0.0, **STREAM) is x


def _sparse_features(seed=0):
    return sp.random(120, 50, density=0.15, format="csr", dtype=np.float32, random_state=seed)


def test_sparse_dropout_drops_only_stored_values_with_the_dense_mask():
    x = _sparse_features()
    dense = dropout(torch.from_numpy(x.toarray()), 0.4, **STREAM).numpy()
    out = sparse_dropout(x, 0.4, **STREAM)
    assert sp.isspmatrix_csr(out) and out.nnz == x.nnz
    np.testing.assert_allclose(out.toarray(), dense)
    coo = torch.from_numpy(x.toarray()).to_sparse()
    torch.testing.assert_close(sparse_dropout(coo, 0.4, **STREAM).to_dense(), torch.from_numpy(dense))


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
def test_sparse_dropout_on_torch_csr_block_with_global_ids():
    x = _sparse_features(1)
    full = sparse_dropout(x, 0.5, **STREAM).toarray()
    block = x[40:90, 10:30]
    rows, cols = torch.arange(40, 90), torch.arange(10, 30)
    out = sparse_dropout(block, 0.5, row_ids=rows, col_ids=cols, **STREAM)
    np.testing.assert_allclose(out.toarray(), full[40:90, 10:30])
    csr = torch.from_numpy(block.toarray()).to_sparse_csr()
    out = sparse_dropout(csr, 0.5, row_ids=rows, col_ids=cols, **STREAM)
    assert out.layout == torch.sparse_csr
    np.testing.assert_allclose(out.to_dense().numpy(), full[40:90, 10:30])
