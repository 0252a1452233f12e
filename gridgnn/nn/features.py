"""Input features as the model consumes them: a dense tensor, or sparse (bag-of-words) features.

Sparse features stay sparse through dropout and the first transform ``X W`` (a sparse-dense product), so
Cora's 2708 x 1433 input costs ~49k stored values per epoch instead of 3.9M. The CSR of X and of Xᵀ are
built once; each epoch only their values change (dropout), through a fixed permutation.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor

from gridgnn.nn.dropout import stored_keep
from gridgnn.sparse.csr import SparseBlock, csr_tensor, index_dtype_for
from gridgnn.sparse.linear import sparse_linear  # noqa: F401 - re-exported for the model

SPARSE_DENSITY_LIMIT = 0.25
"""Sparse input features denser than this are converted to a dense tensor."""


class SparseFeatures:
    """A fixed sparse feature block X (shape (m, f)) whose stored values dropout rescales each epoch.

    ``row_ids``/``col_ids`` are the global ids of X's rows/columns (None: ``arange``), used by dropout.
    """

    def __init__(self, x: sp.spmatrix, *, row_ids: Tensor | None = None, col_ids: Tensor | None = None):
        csr = sp.csr_matrix(x, dtype=np.float32)
        csr.sum_duplicates()
        csr.sort_indices()
        self.matrix = csr
        self.row_ids, self.col_ids = row_ids, col_ids
        index_dtype = index_dtype_for(max(csr.shape), csr.nnz)
        # Transpose of a CSR whose data are 0..nnz-1 tells where each stored value lands in Xᵀ.
        order = sp.csr_matrix((np.arange(csr.nnz, dtype=np.float64), csr.indices, csr.indptr), csr.shape)
        order_t = order.T.tocsr()
        order_t.sort_indices()
        self._perm_t = order_t.data.astype(np.int64)
        # Local row and column of every stored value (int32), fixed: dropout only hashes them each epoch.
        self._rows = torch.from_numpy(np.repeat(np.arange(csr.shape[0], dtype=np.int32), np.diff(csr.indptr)))
        self._cols = torch.from_numpy(csr.indices.astype(np.int32))
        self._block = SparseBlock.from_scipy(csr, index_dtype=index_dtype, transpose=True)
        self.shape = tuple(csr.shape)

    def block(self, p: float, *, seed: int, epoch: int, layer: int, training: bool) -> SparseBlock:
        """The (dropped-out when training) features as a `SparseBlock` with its transpose.

        Equal to `sparse_dropout` of X (same masks, same float32 rounding), without rebuilding any index.
        """
        if not training or p == 0.0:
            return self._block
        keep = stored_keep(self._rows, self._cols, self.shape, p, seed=seed, epoch=epoch, layer=layer,
                           row_ids=self.row_ids, col_ids=self.col_ids)
        values = np.multiply(self.matrix.data, keep.numpy())
        values *= np.float32(1.0 / (1.0 - p))
        return _with_values(self._block, values, self._perm_t)

    def to_dense(self) -> Tensor:
        """X as a dense float32 tensor of shape (m, f)."""
        return torch.from_numpy(self.matrix.toarray())


def _with_values(block: SparseBlock, values: np.ndarray, perm_t: np.ndarray) -> SparseBlock:
    """``block`` (CPU) with new stored values (float32, CSR order of X); Xᵀ's values are ``values[perm_t]``."""
    csr, csr_t = block.csr, block.csr_t
    new = csr_tensor(csr.crow_indices(), csr.col_indices(), torch.from_numpy(values), tuple(csr.shape), "cpu")
    new_t = csr_tensor(csr_t.crow_indices(), csr_t.col_indices(), torch.from_numpy(np.take(values, perm_t)),
                       tuple(csr_t.shape), "cpu")
    return SparseBlock(new, new_t)



def stays_sparse(features) -> bool:
    """Whether a graph's whole features (scipy sparse, or a prepared folder's memory-mapped CSR: anything with
    ``nnz`` and ``shape``) stay sparse in training: no denser than `SPARSE_DENSITY_LIMIT`. Decided on the whole
    matrix, so that every rank of a grid decides alike (a rank's block may be denser or sparser than the whole),
    and as the cost model decides (`gridgnn.cost.memory_model.sparse_features`). Dense arrays: False."""
    nnz = getattr(features, "nnz", None)
    if nnz is None or isinstance(features, (np.ndarray, Tensor)):
        return False
    n, f = features.shape
    return int(nnz) <= SPARSE_DENSITY_LIMIT * n * f


def as_model_input(features: np.ndarray | sp.spmatrix, *, row_ids: Tensor | None = None,
                   col_ids: Tensor | None = None, sparse: bool | None = None) -> Tensor | SparseFeatures:
    """Graph features (shape (m, f)) as model input: `SparseFeatures` when sparse enough, else dense.

    ``row_ids``/``col_ids``: global ids of the block's rows/columns when it is one rank's block (dropout).
    ``sparse``: the decision for a rank's block, taken on the whole graph (`stays_sparse`); None: from the
    block's own density (the whole graph on one process).
    """
    if sp.issparse(features):
        n, f = features.shape
        if features.nnz <= SPARSE_DENSITY_LIMIT * n * f if sparse is None else sparse:
            return SparseFeatures(features, row_ids=row_ids, col_ids=col_ids)
        features = features.toarray()
    return torch.from_numpy(np.ascontiguousarray(features, dtype=np.float32))
