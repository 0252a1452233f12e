"""Shchur et al.'s gnn-benchmark ``.npz`` graphs (Amazon, Coauthor, ...), bare or as the single ``.npz``
inside a ``.zip``.

Keys: ``adj_data/adj_indices/adj_indptr/adj_shape`` (CSR, entry (i, j) = edge i -> j), features as
``attr_data/attr_indices/attr_indptr/attr_shape`` (CSR) or ``attr_matrix`` (dense), ``labels`` (n,).
Name fields (object arrays) are never read, so ``allow_pickle=False`` holds. Split: Shchur et al.'s seeded
random 20 train / 30 validation nodes per class, every other node is test. Without labels, the
structure-only defaults of `gridgnn.data.synthetic` apply.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from gridgnn.data.graph import Graph
from gridgnn.data.readers._common import (
    build_graph,
    check_features,
    check_inflation,
    check_labels,
    is_symmetric,
    reading,
)
from gridgnn.data.splits import per_class_split
from gridgnn.data.synthetic import placeholder_features, structure_only_graph
from gridgnn.errors import DataError

TRAIN_PER_CLASS = 20
VAL_PER_CLASS = 30


def open_npz(path: Path) -> Mapping[str, np.ndarray]:
    """Load every array of an ``.npz`` file, or of the single ``.npz`` inside a ``.zip``, into a dict."""
    with reading(path, "npz/zip archive"):
        check_inflation(path, path)
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            if not any(n.endswith(".npy") for n in names):
                inner = [n for n in names if n.endswith(".npz")]
                if len(inner) != 1:
                    raise DataError(
                        f"{path}: expected .npy arrays or exactly one .npz inside, found {len(names)} files"
                    )
                return _load_arrays(io.BytesIO(archive.read(inner[0])), f"{path}!{inner[0]}")
        return _load_arrays(path, str(path))


_DATA_KEYS = ("gridgnn_format", "format_version", "name", "directed", "num_classes", "meta_json", "task", "train_mask",
              "val_mask", "test_mask", "vertex_ids")
_DATA_PREFIXES = ("adj_", "attr_", "features", "labels")


def _is_data_key(key: str) -> bool:
    """True for the keys the gnn-benchmark and native readers use (not the name lists such as class_names)."""
    return key in _DATA_KEYS or key.startswith(_DATA_PREFIXES)


def _load_arrays(source: Path | io.BytesIO, where: str) -> dict[str, np.ndarray]:
    """The arrays of an npz that the gnn-benchmark and native readers use (`_is_data_key`); any other member
    (name lists such as ``class_names``, or anything else however large) is skipped unread. Object arrays are
    pickles and never loaded: one under a key the readers use (``labels``, ``adj_data``, ...) raises
    `DataError`."""
    with reading(where, "npz archive"):
        check_inflation(source, where)
    with reading(where, "npz archive"), np.load(source, allow_pickle=False) as npz:
        arrays = {}
        for key in npz.files:
            if not _is_data_key(key):
                continue
            try:
                arrays[key] = npz[key]
            except ValueError as exc:
                if "allow_pickle" not in str(exc):
                    raise
                if _is_data_key(key):
                    raise DataError(
                        f"{where}: array '{key}' holds Python objects (a pickle), which gridgnn does not load"
                    ) from None
        return arrays


def read_gnn_benchmark(path: Path | str, seed: int = 0) -> Graph:
    """Read a gnn-benchmark ``.npz``/``.zip`` into a `Graph` with the seeded 20/30-per-class split."""
    path = Path(path)
    return graph_from_gnn_benchmark(open_npz(path), path, seed=seed)


def graph_from_gnn_benchmark(arrays: Mapping[str, np.ndarray], where: Path | str, seed: int = 0) -> Graph:
    """Build a `Graph` from gnn-benchmark arrays (see the module docstring for the keys)."""
    adj = _adjacency(arrays, where)
    num_nodes = adj.shape[0]
    name = Path(str(where).split("!")[0]).stem
    meta = {"source": str(where), "format": "gnn-benchmark"}
    if "labels" not in arrays:
        if "labels_data" in arrays:
            raise DataError(f"{where}: multi-label (sparse) labels are not supported")
        return structure_only_graph(adj, where, name, seed=seed, meta=meta, directed=not is_symmetric(adj))
    labels = check_labels(arrays["labels"], num_nodes, where)
    train, val, test = per_class_split(labels, TRAIN_PER_CLASS, VAL_PER_CLASS, seed=seed)
    features = _features(arrays, adj, where, seed)
    return build_graph(
        where,
        adj=adj,
        features=features,
        labels=labels,
        train_mask=train,
        val_mask=val,
        test_mask=test,
        num_classes=int(labels.max()) + 1,
        name=name,
        directed=not is_symmetric(adj),
        meta={**meta, "split": f"per-class-{TRAIN_PER_CLASS}-{VAL_PER_CLASS}", "seed": seed},
    )


def _adjacency(arrays: Mapping[str, np.ndarray], where: Path | str) -> sp.csr_matrix:
    """Binary CSR float32 (n, n) with ``adj[dst, src] = 1``; the file stores row = source."""
    stored = _csr_from(arrays, "adj", where)
    if stored.shape[0] != stored.shape[1]:
        raise DataError(f"{where}: adjacency must be square, got {stored.shape}")
    if stored.shape[0] == 0:
        raise DataError(f"{where}: the graph is empty (0 nodes)")
    if not np.all(np.isfinite(stored.data)):
        raise DataError(f"{where}: edge weights contain NaN or inf")
    stored.eliminate_zeros()
    stored.data[:] = 1.0
    return stored.T.tocsr()


def _csr_from(arrays: Mapping[str, np.ndarray], prefix: str, where: Path | str) -> sp.csr_matrix:
    """CSR float32 from ``<prefix>_data/_indices/_indptr/_shape``, fully checked."""
    keys = [f"{prefix}_{part}" for part in ("data", "indices", "indptr", "shape")]
    missing = [k for k in keys if k not in arrays]
    if missing:
        raise DataError(f"{where}: missing key(s) {', '.join(missing)}")
    data, indices, indptr, shape = (arrays[k] for k in keys)
    with reading(where, f"{prefix} matrix"):
        matrix = sp.csr_matrix((data, indices, indptr), shape=tuple(int(s) for s in shape), dtype=np.float32)
        matrix.check_format(full_check=True)
    return matrix


def _features(
    arrays: Mapping[str, np.ndarray], adj: sp.csr_matrix, where: Path | str, seed: int
) -> np.ndarray | sp.csr_matrix:
    """Features (n, f): CSR float32 from ``attr_*``, dense float32 from ``attr_matrix``, else placeholders."""
    num_nodes = adj.shape[0]
    if "attr_data" in arrays:
        features = _csr_from(arrays, "attr", where)
    elif "attr_matrix" in arrays:
        features = np.asarray(arrays["attr_matrix"], dtype=np.float32)
    else:
        return placeholder_features(adj, seed=seed)
    check_features(features, num_nodes, where)
    return features
