"""The `Graph` container every reader and generator returns."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from gridgnn.data.targets import check_graph_targets, labelled_vertices
from gridgnn.errors import DataError


@dataclass
class Graph:
    """A node-classification graph held in one process.

    Attributes:
        adj: CSR adjacency, shape (n, n). ``adj[dst, src] != 0`` means an edge src -> dst, so row i lists
            the in-neighbours that node i aggregates from (the orientation of Â in docs/architecture.md §1).
        features: node features, shape (n, f), float32; a dense ``np.ndarray`` or a ``scipy.sparse`` CSR
            matrix (bag-of-words features stay sparse).
        labels: the targets, laid out for ``task`` (`gridgnn.data.targets`): int64 (n,) in ``[0,
            num_classes)`` with -1 for an unlabelled vertex (multiclass), else float32 (n, T) with NaN for a
            missing entry (multilabel: 0/1; regression: real values).
        train_mask, val_mask, test_mask: bool arrays, shape (n,); they name labelled vertices only.
        num_classes: the model's output width: classes (multiclass) or targets T.
        name: a short name used in logs and metrics.
        directed: False when ``adj`` is known to be symmetric.
        task: ``multiclass``, ``multilabel`` or ``regression`` (`gridgnn.data.targets.TASKS`).
        edge_attr: edge features, (E, d) float32 with row e those of ``adj``'s e-th stored entry in CSR order
            (`gridgnn.data.edge_features`; ``adj`` is then canonical), or None.
        edge_order: for ``--edge-features FILE``: the CSR entry of each edge of the source in the source's own
            order (an edge list's lines, OGB's edge rows, PyG's ``edge_index`` columns), set by the readers
            that read such a list (None: the file's rows follow the CSR order). Dropped by every transform.
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
    task: str = "multiclass"
    edge_attr: np.ndarray | None = None
    edge_order: np.ndarray | None = field(default=None, repr=False)

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
    def num_edge_features(self) -> int:
        """d of `edge_attr` (0 without edge features)."""
        return 0 if self.edge_attr is None else int(self.edge_attr.shape[1])

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
        if self.edge_attr is not None:
            self._validate_edge_attr(where)

    def _validate_edge_attr(self, where: str) -> None:
        attr = self.edge_attr
        if not isinstance(attr, np.ndarray) or attr.ndim != 2 or attr.dtype != np.float32:
            raise DataError(f"{where}: edge features must be a float32 array of shape (E, d)")
        if attr.shape[0] != self.adj.nnz:
            raise DataError(f"{where}: {attr.shape[0]} edge-feature rows for the {self.adj.nnz} stored edges")
        if not self.adj.has_canonical_format:
            raise DataError(f"{where}: a graph with edge features needs a canonical adjacency (sorted, no "
                            "duplicate entries)")
        if not np.isfinite(attr).all():
            raise DataError(f"{where}: edge features contain NaN or inf")

    def _validate_labels(self, where: str, n: int) -> None:
        masks = {}
        for mask_name in ("train_mask", "val_mask", "test_mask"):
            mask = getattr(self, mask_name)
            if mask.shape != (n,) or mask.dtype != np.bool_:
                raise DataError(f"{where}: {mask_name} must be a bool array of shape ({n},)")
            masks[mask_name] = mask
        check_graph_targets(self.labels, self.task, self.num_classes, n, masks, where)

    def labelled(self) -> np.ndarray:
        """Bool (n,): the vertices that have a target (at least one present entry)."""
        return labelled_vertices(self.labels, self.task)
