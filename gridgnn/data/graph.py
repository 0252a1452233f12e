"""The `Graph` container every reader and generator returns."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from gridgnn.errors import DataError
from gridgnn.limits import MAX_CLASSES


@dataclass
class Graph:
    """A node-classification graph held in one process.

    Attributes:
        adj: CSR adjacency, shape (n, n). ``adj[dst, src] != 0`` means an edge src -> dst, so row i lists
            the in-neighbours that node i aggregates from (the orientation of Â in docs/architecture.md §1).
        features: node features, shape (n, f), float32; a dense ``np.ndarray`` or a ``scipy.sparse`` CSR
            matrix (bag-of-words features stay sparse).
        labels: int64 array, shape (n,), values in ``[0, num_classes)``.
        train_mask, val_mask, test_mask: bool arrays, shape (n,).
        num_classes: number of classes.
        name: a short name used in logs and metrics.
        directed: False when ``adj`` is known to be symmetric.
    """

    adj: sp.csr_matrix
    features: np.ndarray | sp.csr_matrix
    labels: np.ndarray
    train_mask: np.ndarray
    val_mask: np.ndarray
    test_mask: np.ndarray
    num_classes: int
    name: str = "graph"
    directed: bool = False
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.validate()

    @property
    def num_nodes(self) -> int:
        return int(self.adj.shape[0])

    @property
    def num_edges(self) -> int:
        """Stored non-zeros of the adjacency (an undirected edge counts twice)."""
        return int(self.adj.nnz)

    @property
    def num_features(self) -> int:
        return int(self.features.shape[1])

    def dense_features(self) -> np.ndarray:
        """Features as a dense float32 array of shape (n, f)."""
        if sp.issparse(self.features):
            return np.asarray(self.features.toarray(), dtype=np.float32)
        return np.asarray(self.features, dtype=np.float32)

    def validate(self) -> None:
        """Raise `DataError` with one clear line when the graph is inconsistent."""
        where = f"graph '{self.name}'"
        if not sp.issparse(self.adj) or self.adj.format != "csr":
            raise DataError(f"{where}: adjacency must be a scipy CSR matrix")
        n = self.adj.shape[0]
        if n == 0:
            raise DataError(f"{where}: the graph is empty (0 nodes)")
        if self.adj.shape != (n, n):
            raise DataError(f"{where}: adjacency must be square, got {self.adj.shape}")
        if self.adj.nnz and (self.adj.indices.min() < 0 or self.adj.indices.max() >= n):
            raise DataError(f"{where}: adjacency has column ids outside [0, {n})")
        if self.features.ndim != 2 or self.features.shape[0] != n:
            raise DataError(f"{where}: features have shape {self.features.shape}, expected ({n}, f)")
        values = self.features.data if sp.issparse(self.features) else self.features
        if not np.all(np.isfinite(values)):
            raise DataError(f"{where}: features contain NaN or inf")
        if not np.all(np.isfinite(self.adj.data)):
            raise DataError(f"{where}: edge weights contain NaN or inf")
        self._validate_labels(where, n)

    def _validate_labels(self, where: str, n: int) -> None:
        if self.labels.shape != (n,):
            raise DataError(f"{where}: {self.labels.shape[0]} labels for {n} nodes")
        if not np.issubdtype(self.labels.dtype, np.integer):
            raise DataError(f"{where}: labels must be integers, got {self.labels.dtype}")
        if self.num_classes < 1:
            raise DataError(f"{where}: num_classes must be positive, got {self.num_classes}")
        if self.num_classes > MAX_CLASSES:
            raise DataError(f"{where}: num_classes {self.num_classes} is more than the {MAX_CLASSES} classes "
                            "gridgnn supports (labels or num_classes damaged?)")
        if n and (self.labels.min() < 0 or self.labels.max() >= self.num_classes):
            raise DataError(f"{where}: labels outside [0, {self.num_classes})")
        for mask_name in ("train_mask", "val_mask", "test_mask"):
            mask = getattr(self, mask_name)
            if mask.shape != (n,) or mask.dtype != np.bool_:
                raise DataError(f"{where}: {mask_name} must be a bool array of shape ({n},)")
