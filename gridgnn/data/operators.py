"""The aggregation operator each model multiplies by, built once from the global adjacency (before sharding).

=========  ===============================  ===================================================
operator   matrix (n x n, CSR float32)       used by
=========  ===============================  ===================================================
``gcn``    Â = D^-1/2 (A + I) D^-1/2         GCN (`gridgnn.sparse.adjacency.gcn_normalize`)
``mean``   D_in⁻¹ A (row i: 1/deg_in(i))      GraphSAGE-mean; an isolated row stays empty (zeros)
``sum``    A (0/1)                           GIN (sum over in-neighbours)
``gat``    pattern of A + I (0/1)            GAT: the edges attention runs on (PyG's GATConv adds self-loops)
=========  ===============================  ===================================================

Orientation as in `gridgnn.data.graph.Graph`: row i lists the in-neighbours of node i, so ``M @ X`` aggregates
over in-neighbours and the backward pass multiplies by ``Mᵀ`` (not M: directed graphs are not symmetric).
``mean`` and ``sum`` use the pattern of A (every stored non-zero counts once, weights ignored, as PyG's
``SAGEConv`` and ``GINConv`` ignore edge weights); they add no self-loops.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from gridgnn.sparse.adjacency import add_self_loops, gcn_normalize

OPERATORS = ("gcn", "mean", "sum", "gat")
"""Operator names, in the order of the table above."""

SELF_LOOPS = {"gcn": True, "mean": False, "sum": False, "gat": True}
"""Operator -> whether its pattern is A + I's (the diagonal added) rather than A's."""


def has_self_loops(operator: str) -> bool:
    """Whether ``operator``'s matrix has A + I's pattern (`SELF_LOOPS`): the graph statistics the cost model
    prices must then count the diagonal."""
    return SELF_LOOPS[operator]


def pattern(adj: sp.spmatrix) -> sp.csr_matrix:
    """The 0/1 pattern of ``adj`` (n, n) as canonical CSR float32 (explicit zeros dropped)."""
    out = sp.csr_matrix(adj, dtype=np.float32, copy=True)
    out.eliminate_zeros()
    out.sum_duplicates()
    out.sort_indices()
    out.data[:] = 1.0
    return out


def mean_operator(adj: sp.spmatrix) -> sp.csr_matrix:
    """D_in⁻¹ A: each stored entry of row i is 1 / (stored entries of row i); float32 (n, n)."""
    out = pattern(adj)
    counts = np.diff(out.indptr)
    out.data = np.repeat((1.0 / np.maximum(counts, 1)).astype(np.float32), counts)
    return out


def operator_matrix(operator: str, adj: sp.spmatrix) -> sp.csr_matrix:
    """The matrix of ``operator`` (one of `OPERATORS`) for the adjacency ``adj``."""
    if operator == "gcn":
        return gcn_normalize(adj)
    if operator == "mean":
        return mean_operator(adj)
    if operator == "sum":
        return pattern(adj)
    if operator == "gat":
        return pattern(add_self_loops(pattern(adj)))
    raise ValueError(f"operator must be one of {', '.join(OPERATORS)}; got {operator!r}")

