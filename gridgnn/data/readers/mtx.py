"""Matrix Market graphs (``.mtx``, optionally ``.mtx.gz``): coordinate or array; pattern, real or integer
values; general, symmetric or skew-symmetric storage (``scipy.io.mmread``).

A stored entry (i, j) with a non-zero value is the edge i -> j (SuiteSparse/networkx orientation); values
are dropped (the adjacency is binary) and explicit zeros are not edges. The matrix must be square.
Features, labels and split are the structure-only defaults of `gridgnn.data.synthetic`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse as sp

from gridgnn.data.graph import Graph
from gridgnn.data.readers._common import is_symmetric, reading, require_file
from gridgnn.data.synthetic import structure_only_graph
from gridgnn.errors import DataError


def read_mtx_adjacency(path: Path | str) -> sp.csr_matrix:
    """Binary CSR float32 adjacency (n, n) with ``adj[j, i] = 1`` for each stored non-zero (i, j)."""
    path = require_file(Path(path))
    with reading(path, "Matrix Market file"):
        matrix = scipy.io.mmread(path)
    if not sp.issparse(matrix):
        matrix = sp.coo_matrix(np.asarray(matrix))
    if np.iscomplexobj(matrix.data):
        raise DataError(f"{path}: complex Matrix Market values are not supported")
    if matrix.shape[0] != matrix.shape[1]:
        raise DataError(f"{path}: adjacency must be square, got {matrix.shape[0]} x {matrix.shape[1]}")
    if matrix.shape[0] == 0:
        raise DataError(f"{path}: the graph is empty (0 nodes)")
    if not np.all(np.isfinite(matrix.data)):
        raise DataError(f"{path}: edge weights contain NaN or inf")
    matrix = sp.coo_matrix(matrix)
    matrix.data = (matrix.data != 0).astype(np.float32)  # the pattern only: a weight beyond float32 is fine
    with reading(path, "Matrix Market file"):  # a declared size too large for memory: MemoryError
        adj = sp.csr_matrix(matrix.T, dtype=np.float32)
    adj.eliminate_zeros()
    adj.sum_duplicates()
    adj.data[:] = 1.0
    return adj


def read_mtx(path: Path | str, seed: int = 0) -> Graph:
    """Read a Matrix Market graph into a `Graph` with placeholder features, one class, 60/20/20 split."""
    adj = read_mtx_adjacency(path)
    meta = {"source": str(path), "format": "matrix-market"}
    name = Path(path).name.split(".")[0]
    return structure_only_graph(adj, path, name, seed=seed, meta=meta, directed=not is_symmetric(adj))
