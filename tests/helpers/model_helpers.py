"""Shared helpers of the model, trainer, CLI and cost-model tests: small graphs and their statistics, and the
shared dataset folder."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp

from gridgnn.cost.graph_stats import GraphStats
from gridgnn.data.graph import Graph

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_DATASETS = REPO_ROOT.parent / "shared" / "datasets"


def shared_datasets() -> Path:
    """The read-only real datasets (../shared/datasets from the project root); skips when absent."""
    if not (SHARED_DATASETS / "cora").is_dir():
        pytest.skip(f"shared datasets not found at {SHARED_DATASETS}")
    return SHARED_DATASETS


def random_graph(n: int = 60, f: int = 12, classes: int = 3, *, directed: bool = False, density: float = 0.08,
                 sparse_features: bool = False, seed: int = 0) -> Graph:
    """A small random `Graph` (no self-loops) with random features, labels and a 1/3 split."""
    rng = np.random.default_rng(seed)
    adj = sp.random(n, n, density=density, format="csr", random_state=seed, dtype=np.float32)
    adj.data[:] = 1.0
    adj.setdiag(0)
    adj.eliminate_zeros()
    if not directed:
        adj = ((adj + adj.T) > 0).astype(np.float32).tocsr()
    if sparse_features:
        features = sp.random(n, f, density=0.2, format="csr", random_state=seed + 1, dtype=np.float32)
    else:
        features = rng.standard_normal((n, f)).astype(np.float32)
    part = rng.integers(0, 3, n)
    return Graph(adj=sp.csr_matrix(adj), features=features, labels=rng.integers(0, classes, n),
                 train_mask=part == 0, val_mask=part == 1, test_mask=part == 2, num_classes=classes,
                 name="random", directed=directed)


def random_stats(n: int, *, density: float, seed: int, features: int,
                 classes: int) -> tuple[sp.csr_matrix, GraphStats]:
    """A random pattern of Â (with every self-loop) and its exact `GraphStats`, for cost-model tests."""
    adj = sp.csr_matrix(sp.random(n, n, density=density, random_state=seed, format="csr") + sp.identity(n))
    graph = SimpleNamespace(name="random", features=np.zeros((n, features)), num_features=features,
                            num_classes=classes)
    return adj, GraphStats.from_graph(graph, normalized_adj=adj)
