"""Stand-ins for what structure-only graphs (Matrix Market, edge lists, OGB without features) lack.

Choice, used by every reader of such formats:
- features: float32 of shape (n, 16): column 0 is 1.0, column 1 is ``log(1 + degree)`` with degree the
  number of distinct neighbours ignoring edge direction and self-loops, columns 2..15 are standard
  normal draws from ``numpy.random.default_rng(seed)``. Deterministic for a given graph and seed.
- labels: all 0, ``num_classes = 1`` (unless the format supplies labels).
- masks: a seeded random 60/20/20 split (`gridgnn.data.splits.random_split`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp

from gridgnn.data.graph import Graph
from gridgnn.data.readers._common import build_graph
from gridgnn.data.splits import random_split
from gridgnn.data.transforms import drop_duplicate_edges, remove_self_loops, symmetrize

PLACEHOLDER_WIDTH = 16


def undirected_degree(adj: sp.spmatrix) -> np.ndarray:
    """Distinct neighbours of each node, ignoring direction and self-loops; int64 of shape (n,)."""
    union = remove_self_loops(symmetrize(drop_duplicate_edges(adj)))
    return np.diff(union.indptr).astype(np.int64)


def placeholder_features(adj: sp.spmatrix, width: int = PLACEHOLDER_WIDTH, seed: int = 0) -> np.ndarray:
    """Deterministic features for a graph without any: float32 of shape (n, width), width >= 2.

    Column 0 is constant 1, column 1 is ``log1p(undirected degree)``, the rest are seeded N(0, 1).
    """
    num_nodes = adj.shape[0]
    features = np.empty((num_nodes, width), dtype=np.float32)
    features[:, 0] = 1.0
    features[:, 1] = np.log1p(undirected_degree(adj))
    rng = np.random.default_rng(seed)
    features[:, 2:] = rng.standard_normal((num_nodes, width - 2), dtype=np.float32)
    return features


def structure_only_graph(
    adj: sp.csr_matrix,
    where: Path | str,
    name: str,
    seed: int = 0,
    meta: dict | None = None,
    directed: bool = True,
) -> Graph:
    """Wrap an adjacency (n, n) into a `Graph` with placeholder features, one class and a 60/20/20 split."""
    train, val, test = random_split(adj.shape[0], seed=seed)
    return build_graph(
        where,
        adj=adj,
        features=placeholder_features(adj, seed=seed),
        labels=np.zeros(adj.shape[0], dtype=np.int64),
        train_mask=train,
        val_mask=val,
        test_mask=test,
        num_classes=1,
        name=name,
        directed=directed,
        meta={**(meta or {}), "features": "placeholder", "labels": "none", "split": "random-60-20-20"},
    )
