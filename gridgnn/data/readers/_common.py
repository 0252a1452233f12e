"""Helpers shared by the format readers: error translation, edge arrays to CSR, graph assembly."""

from __future__ import annotations

import io
import pickle
import struct
import warnings
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from gridgnn.data.graph import Graph
from gridgnn.errors import DataError
from gridgnn.limits import MAX_CLASSES, zip_inflation_problem

# Exceptions that numpy, scipy, zipfile, gzip and pickle raise on malformed or truncated input.
_PARSE_ERRORS = (
    OSError,
    ValueError,
    EOFError,
    KeyError,
    IndexError,
    TypeError,
    AttributeError,
    MemoryError,
    OverflowError,
    RecursionError,  # JSON nested deeper than the interpreter's stack
    UnicodeDecodeError,
    zipfile.BadZipFile,
    zlib.error,
    struct.error,
    pickle.UnpicklingError,
)


def one_line(text: object) -> str:
    """Collapse a message onto one line (exception texts from numpy/scipy may span several)."""
    return " ".join(str(text).split())


@contextmanager
def reading(path: Path | str, what: str) -> Iterator[None]:
    """Turn any low-level parse failure inside the block into a one-line `DataError` naming `path`."""
    try:
        yield
    except DataError:
        raise
    except FileNotFoundError as exc:
        raise DataError(f"{exc.filename or path}: file not found") from exc
    except _PARSE_ERRORS as exc:
        detail = one_line(exc) or type(exc).__name__
        raise DataError(f"{path}: cannot read {what}: {detail}") from exc


def load_table(path: Path, what: str, **loadtxt_kwargs: object) -> np.ndarray:
    """``np.loadtxt(path, **loadtxt_kwargs)`` without its empty-file warning; failures become `DataError`."""
    with reading(path, what), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "input contained no data": callers check the size
        return np.loadtxt(path, **loadtxt_kwargs)


def check_inflation(source: Path | io.BytesIO, where: Path | str) -> None:
    """Refuse (`DataError`) a zip archive (``.npz``) whose members would inflate beyond what arrays do
    (`gridgnn.limits.zip_inflation_problem`), from its central directory, before anything is inflated; a file
    that is no zip archive is left to its reader. Leaves an in-memory ``source`` at its start."""
    if zipfile.is_zipfile(source):
        with zipfile.ZipFile(source) as archive:
            problem = zip_inflation_problem(archive)
        if problem is not None:
            raise DataError(f"{where}: {problem}; not reading it (if the arrays are genuine, save them "
                            "uncompressed with np.savez)")
    if isinstance(source, io.BytesIO):
        source.seek(0)


def require_file(path: Path) -> Path:
    """Return `path` if it is an existing file, else raise `DataError`."""
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    return path


def adjacency_from_edges(src: np.ndarray, dst: np.ndarray, num_nodes: int, where: Path | str) -> sp.csr_matrix:
    """Binary CSR adjacency of shape (n, n) with ``adj[dst, src] = 1`` for every edge src -> dst.

    `src`, `dst`: integer arrays of shape (E,). Duplicate edges collapse to one entry; ids must lie in
    ``[0, num_nodes)``.
    """
    src = np.asarray(src)
    dst = np.asarray(dst)
    if src.shape != dst.shape or src.ndim != 1:
        raise DataError(f"{where}: source and target id arrays differ in shape ({src.shape} vs {dst.shape})")
    if num_nodes <= 0:
        raise DataError(f"{where}: the graph is empty (0 nodes)")
    for ids in (src, dst):
        if ids.size and (ids.min() < 0 or ids.max() >= num_nodes):
            bad = ids.min() if ids.min() < 0 else ids.max()
            raise DataError(f"{where}: vertex id {int(bad)} is outside [0, {num_nodes})")
    index_dtype = np.int32 if num_nodes < 2**31 - 1 else np.int64
    data = np.ones(src.shape[0], dtype=np.float32)
    try:
        coo = sp.coo_matrix((data, (dst.astype(index_dtype), src.astype(index_dtype))), shape=(num_nodes, num_nodes))
        adj = coo.tocsr()
    except MemoryError as exc:  # a declared node count far beyond the edges (e.g. num-node-list)
        raise DataError(f"{where}: {num_nodes} nodes do not fit in memory ({one_line(exc)})") from None
    adj.sum_duplicates()
    adj.data[:] = 1.0
    return adj


def is_symmetric(adj: sp.spmatrix) -> bool:
    """True when the sparsity pattern and values of `adj` (n, n) equal those of its transpose."""
    if adj.nnz == 0:
        return True
    return bool((adj != adj.T).nnz == 0)


def build_graph(where: Path | str, **fields: object) -> Graph:
    """Construct a `Graph`, prefixing any validation error with the source file."""
    try:
        return Graph(**fields)  # type: ignore[arg-type]
    except DataError as exc:
        raise DataError(f"{where}: {exc}") from None


def check_labels(labels: np.ndarray, num_nodes: int, where: Path | str) -> np.ndarray:
    """Validate a label vector read from a file and return it as int64 of shape (n,)."""
    labels = np.asarray(labels)
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    if labels.ndim != 1:
        raise DataError(f"{where}: labels must be one integer per node, got shape {labels.shape}")
    if labels.shape[0] != num_nodes:
        raise DataError(f"{where}: {labels.shape[0]} labels for {num_nodes} nodes")
    if labels.dtype.kind == "f":
        if not np.all(np.isfinite(labels)) or np.any(labels != np.round(labels)):
            raise DataError(f"{where}: labels contain NaN, inf or non-integer values")
    elif labels.dtype.kind not in "iu":
        raise DataError(f"{where}: labels must be integers, got dtype {labels.dtype}")
    if labels.size and labels.max() >= MAX_CLASSES:  # before any per-class table is allocated
        raise DataError(f"{where}: label {labels.max()} is beyond the {MAX_CLASSES} classes gridgnn supports")
    labels = labels.astype(np.int64)
    if labels.size and labels.min() < 0:
        raise DataError(f"{where}: negative label {int(labels.min())}")
    return labels


def check_features(features: np.ndarray | sp.spmatrix, num_nodes: int, where: Path | str) -> None:
    """Raise `DataError` when features (n, f) have the wrong row count or hold NaN/inf."""
    if features.ndim != 2 or features.shape[0] != num_nodes:
        raise DataError(f"{where}: features have shape {features.shape}, expected ({num_nodes}, f)")
    values = features.data if sp.issparse(features) else features
    if not np.all(np.isfinite(values)):
        raise DataError(f"{where}: features contain NaN or inf")
