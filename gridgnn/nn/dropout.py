"""Layout-invariant dropout (docs/architecture.md §2, last paragraph).

Whether element (global row r, global column c) is kept is a pure function of (seed, epoch, layer, r, c)
(see `gridgnn.nn.hashing`). A process that holds any block of a matrix, given the block's global row and
column ids, draws exactly the matching slice of the single-process mask, so every grid and every
algorithm trains the same run.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor

from gridgnn.nn.hashing import id_hashes, keep_mask, keep_pairs, masked_scale, stream_keys


def _ids(ids: Tensor | None, count: int, device: torch.device) -> Tensor:
    return torch.arange(count, device=device) if ids is None else ids.to(device)


def dropout(
    x: Tensor,
    p: float,
    *,
    seed: int,
    epoch: int,
    layer: int,
    row_ids: Tensor | None = None,
    col_ids: Tensor | None = None,
    training: bool = True,
) -> Tensor:
    """Inverted dropout of a dense block x (shape (m, f)) with a layout-invariant mask.

    ``row_ids`` (shape (m,)) and ``col_ids`` (shape (f,)) are the global ids of x's rows and columns;
    None means ``arange``. Kept elements are scaled by 1 / (1 - p). Differentiable in x.
    """
    if not training or p == 0.0:
        return x
    m, f = x.shape
    rows, cols = _ids(row_ids, m, x.device), _ids(col_ids, f, x.device)
    if x.device.type == "cpu" and not (x.requires_grad and torch.is_grad_enabled()):
        return masked_scale(x, rows, cols, p, seed=seed, epoch=epoch, layer=layer)[0]
    mask = keep_mask(rows, cols, p, seed=seed, epoch=epoch, layer=layer, scale=1.0 / (1.0 - p), dtype=x.dtype)
    return x * mask


class _ReluDropout(torch.autograd.Function):
    """``dropout(relu(x))`` on CPU in one numpy pass; backward multiplies by the saved pass mask and scale."""

    @staticmethod
    def forward(ctx, x: Tensor, rows: Tensor, cols: Tensor, p: float, stream: dict) -> Tensor:
        out, passed = masked_scale(x, rows, cols, p, relu=True, **stream)
        ctx.save_for_backward(passed)
        ctx.scale = 1.0 / (1.0 - p)
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        (passed,) = ctx.saved_tensors
        g = np.multiply(np.ascontiguousarray(grad.numpy()), passed.numpy())
        g *= g.dtype.type(ctx.scale)
        return torch.from_numpy(g), None, None, None, None


def relu_dropout(
    x: Tensor,
    p: float,
    *,
    seed: int,
    epoch: int,
    layer: int,
    row_ids: Tensor | None = None,
    col_ids: Tensor | None = None,
    training: bool = True,
) -> Tensor:
    """``dropout(relu(x), ...)`` (same arguments and masks as `dropout`), fused on CPU.

    One pass of numpy over x instead of three torch operations (ReLU, mask, product) and two in the backward
    pass: on CPU each torch operation on a large tensor is a parallel region of the thread pool, and on a
    loaded machine a parallel region can wait milliseconds for a descheduled worker. Same values as the
    unfused form (zeros may differ in sign). Differentiable in x.
    """
    if not training or p == 0.0 or x.device.type != "cpu":
        return dropout(torch.relu(x), p, seed=seed, epoch=epoch, layer=layer, row_ids=row_ids, col_ids=col_ids,
                       training=training)
    m, f = x.shape
    rows, cols = _ids(row_ids, m, x.device), _ids(col_ids, f, x.device)
    return _ReluDropout.apply(x, rows, cols, p, {"seed": seed, "epoch": epoch, "layer": layer})


def stored_keep(
    rows: Tensor, cols: Tensor, shape: tuple[int, int], p: float, *, seed: int, epoch: int, layer: int,
    row_ids: Tensor | None = None, col_ids: Tensor | None = None,
) -> Tensor:
    """Keep decisions (bool, shape (nnz,)) for stored values at local positions (rows[k], cols[k]) of a
    block of shape ``shape`` whose global ids are ``row_ids``/``col_ids`` (None: ``arange``)."""
    row_key, col_key = stream_keys(seed, epoch, layer)
    row_table = id_hashes(_ids(row_ids, shape[0], rows.device), row_key)
    col_table = id_hashes(_ids(col_ids, shape[1], cols.device), col_key)
    if rows.device.type == "cpu":  # numpy's take: no thread-pool round trip for a gather
        row_hashes = torch.from_numpy(np.take(row_table.numpy(), rows.numpy()))
        return keep_pairs(row_hashes, torch.from_numpy(np.take(col_table.numpy(), cols.numpy())), p)
    return keep_pairs(row_table[rows.long()], col_table[cols.long()], p)


def sparse_dropout(
    x: Tensor | sp.spmatrix,
    p: float,
    *,
    seed: int,
    epoch: int,
    layer: int,
    row_ids: Tensor | None = None,
    col_ids: Tensor | None = None,
    training: bool = True,
) -> Tensor | sp.csr_matrix:
    """Dropout of a sparse block that drops stored values only (zeros stay zeros).

    ``x`` is a torch sparse CSR/COO tensor or a scipy sparse matrix of shape (m, f); ``row_ids`` (shape
    (m,)) and ``col_ids`` (shape (f,)) map local to global ids (None: identity). The result has x's kind
    (torch CSR/COO or scipy CSR) and, on stored values, the mask `dropout` draws for the dense block.
    """
    if not training or p == 0.0:
        return x
    stream = {"seed": seed, "epoch": epoch, "layer": layer, "row_ids": row_ids, "col_ids": col_ids}
    scale = 1.0 / (1.0 - p)
    if sp.issparse(x):
        x = x.tocsr()
        rows = torch.from_numpy(np.repeat(np.arange(x.shape[0], dtype=np.int64), np.diff(x.indptr)))
        keep = stored_keep(rows, torch.from_numpy(x.indices), x.shape, p, **stream).numpy()
        data = (x.data * keep * scale).astype(x.dtype, copy=False)
        return sp.csr_matrix((data, x.indices.copy(), x.indptr.copy()), shape=x.shape)
    if x.layout == torch.sparse_csr:
        crow, col = x.crow_indices(), x.col_indices()
        rows = torch.repeat_interleave(torch.arange(x.shape[0], device=x.device), crow.diff())
        values = x.values() * stored_keep(rows, col, tuple(x.shape), p, **stream) * scale
        return torch.sparse_csr_tensor(crow, col, values, x.shape, check_invariants=False)
    x = x.coalesce()
    rows, col = x.indices()
    values = x.values() * stored_keep(rows, col, tuple(x.shape), p, **stream) * scale
    return torch.sparse_coo_tensor(x.indices(), values, x.shape, is_coalesced=True, check_invariants=False)
