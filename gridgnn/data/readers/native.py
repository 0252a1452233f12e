"""gridgnn's own graph file: an uncompressed ``.npz`` that loads without pickle and round-trips exactly.

Keys: ``gridgnn_format`` = "gridgnn-graph" (the marker) and ``format_version`` = 1; ``name``, ``directed``,
``num_classes``, ``task`` (`gridgnn.data.targets`; absent in older files: multiclass), ``meta_json`` (the
`Graph.meta` dict as JSON); ``adj_{data,indices,indptr,shape}``;
either ``features`` (dense) or ``features_{data,indices,indptr,shape}`` (CSR); ``labels`` and the three
masks; ``edge_attr`` (E, d) float32, optional: the edge features, aligned with the adjacency's CSR entries
(`gridgnn.data.edge_features`). Arrays keep their dtypes (index arrays included).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from gridgnn.data.graph import Graph
from gridgnn.data.readers._common import build_graph, check_inflation, reading
from gridgnn.data.schemas import check_meta
from gridgnn.errors import ConfigError, DataError
from gridgnn.safe_files import atomic_write

FORMAT_KEY = "gridgnn_format"
FORMAT_MARKER = "gridgnn-graph"
FORMAT_VERSION = 1
_MASKS = ("train_mask", "val_mask", "test_mask")


def _csr_arrays(prefix: str, matrix: sp.csr_matrix) -> dict[str, np.ndarray]:
    return {
        f"{prefix}_data": matrix.data,
        f"{prefix}_indices": matrix.indices,
        f"{prefix}_indptr": matrix.indptr,
        f"{prefix}_shape": np.asarray(matrix.shape, dtype=np.int64),
    }


def save_graph(graph: Graph, path: Path | str) -> Path:
    """Write `graph` to `path` (conventionally ``*.npz``) atomically; returns the path written."""
    path = Path(path)
    meta = {key: value for key, value in graph.meta.items() if key != "vertex_ids"}  # an array: stored apart
    try:
        meta_json = json.dumps(meta, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise DataError(f"{path}: graph meta is not JSON-serializable ({exc})") from None
    arrays = {
        FORMAT_KEY: np.asarray(FORMAT_MARKER),
        "format_version": np.asarray(FORMAT_VERSION, dtype=np.int64),
        "name": np.asarray(graph.name),
        "directed": np.asarray(bool(graph.directed)),
        "num_classes": np.asarray(int(graph.num_classes), dtype=np.int64),
        "task": np.asarray(graph.task),
        "meta_json": np.asarray(meta_json),
        "labels": graph.labels,
        **{mask: getattr(graph, mask) for mask in _MASKS},
        **_csr_arrays("adj", graph.adj),
    }
    if graph.meta.get("vertex_ids") is not None:
        arrays["vertex_ids"] = np.asarray(graph.meta["vertex_ids"], dtype=np.int64)
    if sp.issparse(graph.features):
        arrays.update(_csr_arrays("features", sp.csr_matrix(graph.features)))
    else:
        arrays["features"] = np.asarray(graph.features)
    if graph.edge_attr is not None:
        arrays["edge_attr"] = np.asarray(graph.edge_attr, dtype=np.float32)
    try:  # a hidden partial renamed into place, never through a link; a failure leaves nothing
        with atomic_write(path, "graph file") as file:
            np.savez(file, **arrays)
    except ConfigError as exc:
        raise DataError(str(exc)) from None
    return path


def is_native(arrays: Mapping[str, np.ndarray]) -> bool:
    """True when the npz arrays carry the gridgnn format marker."""
    return FORMAT_KEY in arrays


def load_native(path: Path | str) -> Graph:
    """Read a file written by `save_graph` back into an identical `Graph`."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    with reading(path, "gridgnn graph file"):
        check_inflation(path, path)
    with reading(path, "gridgnn graph file"), np.load(path, allow_pickle=False) as npz:
        return graph_from_native({key: npz[key] for key in npz.files if _used(key)}, path)


def _used(key: str) -> bool:
    """True for the members this format reads (any other member stays unread, however large)."""
    return (key in _SCALARS or key in ("labels", "features", "vertex_ids", "edge_attr", *_MASKS)
            or key.startswith(("adj_", "features_")))


_SCALARS = (FORMAT_KEY, "format_version", "name", "directed", "num_classes", "meta_json", "task")


def graph_from_native(arrays: Mapping[str, np.ndarray], where: Path | str) -> Graph:
    """Build a `Graph` from the arrays of a native file (see the module docstring for the keys)."""
    if not is_native(arrays) or _scalar(arrays, FORMAT_KEY, where, "U") != FORMAT_MARKER:
        raise DataError(f"{where}: not a gridgnn graph file (no '{FORMAT_KEY}' marker)")
    version = _scalar(arrays, "format_version", where, "iu")
    if version != FORMAT_VERSION:
        raise DataError(f"{where}: format version {version} is not supported (this gridgnn reads {FORMAT_VERSION})")
    with reading(where, "graph meta"):
        meta = check_meta(json.loads(_scalar(arrays, "meta_json", where, "U")), where)
    if "vertex_ids" in arrays and arrays["vertex_ids"].shape[:1] == arrays["labels"].shape[:1]:
        meta["vertex_ids"] = np.asarray(arrays["vertex_ids"], dtype=np.int64)
    if "features_data" in arrays:
        features = _csr(arrays, "features", where)
    else:
        features = _get(arrays, "features", where)
    return build_graph(
        where,
        adj=_csr(arrays, "adj", where),
        features=features,
        labels=_get(arrays, "labels", where),
        **{mask: _get(arrays, mask, where) for mask in _MASKS},
        num_classes=_scalar(arrays, "num_classes", where, "iu"),
        name=_scalar(arrays, "name", where, "U"),
        directed=_scalar(arrays, "directed", where, "b"),
        meta=meta,
        task=_scalar(arrays, "task", where, "U") if "task" in arrays else "multiclass",  # older files: classes
        edge_attr=_edge_attr(arrays, where),
    )


def _edge_attr(arrays: Mapping[str, np.ndarray], where: Path | str) -> np.ndarray | None:
    """The optional ``edge_attr`` array (checked by the graph's own validation), as float32."""
    if "edge_attr" not in arrays:
        return None
    attr = arrays["edge_attr"]
    if attr.dtype.kind not in "biuf":
        raise DataError(f"{where}: 'edge_attr' must be numbers, got dtype {attr.dtype}")
    return np.asarray(attr, dtype=np.float32)


def _get(arrays: Mapping[str, np.ndarray], key: str, where: Path | str) -> np.ndarray:
    if key not in arrays:
        raise DataError(f"{where}: missing key '{key}'")
    return arrays[key]


def _scalar(arrays: Mapping[str, np.ndarray], key: str, where: Path | str, kinds: str) -> str | int | bool:
    """The 0-d array ``key`` as a Python str, int or bool, its dtype kind one of ``kinds`` (`DataError`
    otherwise: a list where a number belongs, a float count)."""
    value = _get(arrays, key, where)
    if value.ndim != 0 or value.dtype.kind not in kinds:
        raise DataError(f"{where}: '{key}' must be a single {_KIND_NAMES[kinds]}, got {value.dtype} of shape "
                        f"{value.shape}")
    return value.item()


_KIND_NAMES = {"U": "string", "iu": "integer", "b": "boolean"}


def _csr(arrays: Mapping[str, np.ndarray], prefix: str, where: Path | str) -> sp.csr_matrix:
    """CSR matrix from ``<prefix>_{data,indices,indptr,shape}`` keeping the stored dtypes, fully checked."""
    data, indices, indptr, shape = (
        _get(arrays, f"{prefix}_{p}", where) for p in ("data", "indices", "indptr", "shape")
    )
    with reading(where, f"{prefix} matrix"):
        matrix = sp.csr_matrix((data, indices, indptr), shape=tuple(int(s) for s in shape), copy=False)
        matrix.check_format(full_check=True)
    return matrix
