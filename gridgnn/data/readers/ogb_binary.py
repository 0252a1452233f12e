"""OGB's binary raw layout (as ogbn-papers100M ships it), read into the same tables as its CSV layout.

``raw/data.npz``: ``edge_index`` int (2, E) of (source, target) rows, ``num_nodes_list`` (one entry, the node
count; ``num_nodes`` accepted too), ``num_edges_list`` (ignored), ``node_feat`` (n, f) optional, ``edge_feat``
(E, d) optional (the edge features, in ``edge_index``'s order);
``raw/node-label.npz`` (optional): ``node_label`` (n,) or (n, T), NaN for an unlabelled vertex. Only a
single-graph file is a node-property dataset; several entries in ``num_nodes_list`` are refused. Not
collective.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gridgnn.data.readers._common import check_inflation, reading
from gridgnn.errors import DataError

DATA_FILE = "data.npz"
LABEL_FILE = "node-label.npz"


def is_binary_raw(raw: Path) -> bool:
    """True when ``raw`` holds OGB's binary ``data.npz``."""
    return (raw / DATA_FILE).is_file()


def read_binary_raw(raw: Path) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None, int]:
    """(edges int64 (E, 2) as (source, target) rows, features float32 (n, f) or None, labels float64 (n,) or
    (n, T) or None, node count) from ``raw/data.npz`` and ``raw/node-label.npz``."""
    path = raw / DATA_FILE
    check_inflation(path, path)
    with reading(path, "OGB binary graph"), np.load(path, allow_pickle=False) as arrays:
        if "edge_index" not in arrays:
            raise DataError(f"{path}: no 'edge_index' array (keys: {', '.join(sorted(arrays)[:8])})")
        edge_index = np.asarray(arrays["edge_index"])
        key = next((k for k in ("num_nodes_list", "num_nodes") if k in arrays), None)
        counts = np.asarray(arrays[key]) if key else None
        features = np.asarray(arrays["node_feat"]) if "node_feat" in arrays else None
    if edge_index.ndim != 2 or edge_index.shape[0] != 2 or edge_index.dtype.kind not in "iu":
        raise DataError(f"{path}: edge_index must be integers of shape (2, E), got {edge_index.dtype} "
                        f"{edge_index.shape}")
    if edge_index.shape[1] == 0:
        raise DataError(f"{path}: edge_index holds no edge")
    num_nodes = _node_count(path, counts, edge_index)
    if features is not None:
        if features.dtype.kind not in "biuf":
            raise DataError(f"{path}: node_feat must be numbers, got dtype {features.dtype}")
        features = features.astype(np.float32, copy=False)
    labels = None
    label_path = raw / LABEL_FILE
    if label_path.is_file():
        check_inflation(label_path, label_path)
        with reading(label_path, "OGB node labels"), np.load(label_path, allow_pickle=False) as arrays:
            if "node_label" not in arrays:
                raise DataError(f"{label_path}: no 'node_label' array (keys: {', '.join(sorted(arrays)[:8])})")
            labels = np.asarray(arrays["node_label"])
        if labels.dtype.kind not in "biuf":
            raise DataError(f"{label_path}: node_label must be numbers, got dtype {labels.dtype}")
        labels = labels.astype(np.float64, copy=False)
    return edge_index.T.astype(np.int64), features, labels, num_nodes


def read_binary_edge_features(raw: Path) -> np.ndarray | None:
    """``edge_feat`` (E, d) of ``raw/data.npz`` (rows in ``edge_index``'s order), or None when absent."""
    path = raw / DATA_FILE
    with reading(path, "OGB binary graph"), np.load(path, allow_pickle=False) as arrays:
        return np.asarray(arrays["edge_feat"]) if "edge_feat" in arrays else None


def _node_count(path: Path, counts: object, edge_index: np.ndarray) -> int:
    """The one entry of ``num_nodes_list`` (else the largest edge id + 1)."""
    if counts is None:
        return int(edge_index.max()) + 1
    counts = np.asarray(counts).reshape(-1)
    if counts.size != 1 or counts.dtype.kind not in "iu" or int(counts[0]) <= 0:
        raise DataError(f"{path}: num_nodes_list must hold one positive node count (one graph), got "
                        f"{counts[:4].tolist()}")
    return int(counts[0])
