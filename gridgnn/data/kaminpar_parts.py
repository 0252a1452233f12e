"""KaMinPar (the ``kaminpar`` package), the partitioner ``--reorder metis|metis-nnz`` falls back on for graphs
METIS cannot fit in this machine's memory (`gridgnn.data.metis.membership` says the rule).

KaMinPar's Python bindings build a graph only from a file, so the pattern is written as a ParHIP binary file
(a header of three uint64: version 3, or 1 with vertex weights, n and the stored entries m; n + 1 byte offsets
of each vertex's neighbours; m uint64 neighbours; n uint64 weights) into a private temporary folder, read
back, and removed. Partitioned on one thread with KaMinPar's default context and a fixed seed, so the result
is deterministic, within its 3 % balance on the vertex weights. Measured against METIS on R-MAT
(`benchmarks/partitioner_memory.py`, `results/sharded_prepare/partitioners.md`). Not collective.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from gridgnn.errors import ConfigError

SEED = 0
"""KaMinPar's seed (reseeded before every partition)."""


def kaminpar_available() -> bool:
    """True when the ``kaminpar`` package imports."""
    try:
        import kaminpar  # noqa: F401
    except ImportError:
        return False
    return True


def write_parhip(path: Path, sym: sp.csr_matrix, weights: np.ndarray | None = None) -> None:
    """``sym`` (n x n CSR pattern, symmetric, no diagonal) and optional vertex weights (n,) as a ParHIP file."""
    n, m = sym.shape[0], int(sym.nnz)
    with open(path, "wb") as stream:
        np.array([3 if weights is None else 1, n, m], dtype=np.uint64).tofile(stream)
        ((3 + n + 1 + np.asarray(sym.indptr, dtype=np.uint64)) * 8).astype(np.uint64).tofile(stream)
        np.asarray(sym.indices, dtype=np.uint64).tofile(stream)
        if weights is not None:
            np.asarray(weights, dtype=np.uint64).tofile(stream)


def kaminpar_membership(sym: sp.csr_matrix, parts: int, weights: np.ndarray | None = None,
                        method: str = "metis") -> np.ndarray:
    """The part (int64 (n,), in ``[0, parts)``) of every vertex, by KaMinPar, balancing ``weights`` (positive
    ints (n,), or None: vertices). ``method`` names the reordering in error messages."""
    try:
        import kaminpar
    except ImportError:
        raise ConfigError(f"--reorder {method} on this graph needs more memory than METIS can have here, and "
                          "the low-memory partitioner is not installed: pip install kaminpar") from None
    with tempfile.TemporaryDirectory(prefix="gridgnn-parts-") as folder:
        path = Path(folder) / "pattern.parhip"
        write_parhip(path, sym, weights)
        graph = kaminpar.load_graph(str(path), kaminpar.GraphFileFormat.PARHIP)
        os.unlink(path)
        kaminpar.reseed(SEED)
        solver = kaminpar.KaMinPar(1, kaminpar.default_context())  # terapart_context() crashed (3.7.3)
        membership = np.asarray(solver.compute_partition(graph, parts, 0.03), dtype=np.int64)
    return membership
