"""Whole-graph transforms, applied once before sharding. Each returns a new object; inputs are not modified.

Orientation (as in `Graph`): ``adj[dst, src] != 0`` for an edge src -> dst, so row i lists the
in-neighbours of node i. Self-loops and the GCN normalization Â are `gridgnn.sparse.adjacency` (pure, shared
with the cost model).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from gridgnn.sparse.adjacency import row_ids


def _csr(adj: sp.spmatrix, dtype: type = np.float32) -> sp.csr_matrix:
    """A canonical CSR copy (summed duplicates, sorted column ids) of a square matrix."""
    out = sp.csr_matrix(adj, dtype=dtype, copy=True)
    out.sum_duplicates()
    return out


def symmetrize(adj: sp.spmatrix) -> sp.csr_matrix:
    """Undirected version of `adj` (n, n): entry-wise ``max(A, Aᵀ)`` as CSR float32.

    For a 0/1 adjacency this is the union of both directions; weights are assumed non-negative.
    """
    a = _csr(adj)
    out = a.maximum(a.T.tocsr()).tocsr()
    out.sort_indices()
    return out.astype(np.float32)


def drop_duplicate_edges(adj: sp.spmatrix) -> sp.csr_matrix:
    """Binary CSR float32 (n, n): every stored non-zero becomes one 1.0; explicit zeros are dropped."""
    out = sp.csr_matrix(adj, dtype=np.float32, copy=True)
    out.eliminate_zeros()
    out.sum_duplicates()
    out.data[:] = 1.0
    return out


def remove_self_loops(adj: sp.spmatrix) -> sp.csr_matrix:
    """CSR copy of `adj` (n, n) without diagonal entries."""
    a = _csr(adj, dtype=adj.dtype)
    rows = row_ids(a)
    keep = a.indices != rows
    counts = np.bincount(rows[keep], minlength=a.shape[0])
    indptr = np.zeros(a.shape[0] + 1, dtype=a.indptr.dtype)
    np.cumsum(counts, out=indptr[1:])
    return sp.csr_matrix((a.data[keep], a.indices[keep], indptr), shape=a.shape)


def row_normalize_features(features: np.ndarray | sp.spmatrix, norm: str = "l1") -> np.ndarray | sp.csr_matrix:
    """Divide each row of `features` (n, f) by its L1 (or L2) norm; all-zero rows stay zero.

    L1 is Kipf & Welling's preprocessing (and PyG's ``NormalizeFeatures`` for rows summing to >= 1) for the
    non-negative bag-of-words features it is meant for; L2 is what the gnn-benchmark datasets need (see
    `gridgnn.data.registry`). Sparse input stays sparse (CSR float32); dense input gives dense float32.
    """
    if norm not in ("l1", "l2"):
        raise ValueError(f"norm must be 'l1' or 'l2', got {norm!r}")
    if sp.issparse(features):
        x = sp.csr_matrix(features, dtype=np.float32, copy=True)
        squared = x.multiply(x) if norm == "l2" else abs(x)
        norms = np.asarray(squared.sum(axis=1), dtype=np.float64).ravel()
        norms = np.sqrt(norms) if norm == "l2" else norms
        scale = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
        x.data = (x.data * scale[row_ids(x)]).astype(np.float32)
        return x
    x = np.asarray(features, dtype=np.float64)
    norms = np.linalg.norm(x, ord=1 if norm == "l1" else 2, axis=1, keepdims=True)
    scale = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    return (x * scale).astype(np.float32)
