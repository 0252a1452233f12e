"""Self-loops and the GCN normalization of the adjacency: the only place Â = D^-1/2 (A + I) D^-1/2 (and its
pattern, A + I) is computed. Pure scipy, no torch (the cost model counts Â's entries with the same
`add_self_loops`). Not collective.

Orientation (as in `gridgnn.data.graph.Graph`): ``adj[dst, src] != 0`` for an edge src -> dst, so row i lists
the in-neighbours of node i. Every model's operator is built from these by `gridgnn.data.operators`.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def row_ids(adj: sp.csr_matrix) -> np.ndarray:
    """Row id of every stored entry of CSR ``adj``, shape (nnz,)."""
    return np.repeat(np.arange(adj.shape[0], dtype=adj.indices.dtype), np.diff(adj.indptr))


def add_self_loops(adj: sp.spmatrix, fill_value: float = 1.0, dtype: type | None = None) -> sp.csr_matrix:
    """CSR copy of `adj` (n, n) in which every node without a self-loop gets one of weight `fill_value`.

    Existing self-loops keep their weight (PyG's ``add_remaining_self_loops``, which ``gcn_norm`` uses); for
    a loop-free adjacency the result is exactly ``A + fill_value * I``. The values have ``dtype``, by
    default that of `adj` promoted to at least float32 (the cost model passes int8 for a pattern).
    """
    out_dtype = np.result_type(adj.dtype, np.float32) if dtype is None else dtype
    a = sp.csr_matrix(adj, dtype=out_dtype, copy=True)
    a.sum_duplicates()
    missing = a.diagonal() == 0
    out = (a + sp.diags(np.where(missing, fill_value, 0.0).astype(a.dtype), format="csr", dtype=a.dtype)).tocsr()
    out.eliminate_zeros()
    out.sort_indices()
    return out


def gcn_normalize(adj: sp.spmatrix) -> sp.csr_matrix:
    """Â = D^-1/2 (A + I) D^-1/2 as CSR float32 of shape (n, n), D = diag of the row sums of A + I.

    Rows are targets, so D is the in-degree + 1: for directed graphs this equals PyG's ``gcn_norm``
    (which normalizes at the target with flow source_to_target). Self-loops already present keep their
    weight instead of gaining one more (see `add_self_loops`). Computed in float64, stored as float32.
    """
    a = add_self_loops(sp.csr_matrix(adj, dtype=np.float64))
    degree = np.asarray(a.sum(axis=1)).ravel()
    inv_sqrt = np.zeros_like(degree)
    positive = degree > 0
    inv_sqrt[positive] = 1.0 / np.sqrt(degree[positive])
    data = a.data * inv_sqrt[row_ids(a)] * inv_sqrt[a.indices]
    return sp.csr_matrix((data.astype(np.float32), a.indices.copy(), a.indptr.copy()), shape=a.shape)
