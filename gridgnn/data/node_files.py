"""Node data read from files of their own (``--features``, ``--labels``, ``--split``), as plain arrays.

Layouts (row i is vertex i of the graph they are attached to, `gridgnn.data.attach`):

- features: ``.npy`` dense (n, f); ``.npz`` holding one dense array (n, f) (``np.savez``) or a sparse matrix
  written by ``scipy.sparse.save_npz`` (kept sparse, CSR);
- labels: ``.npy`` (n,) or (n, T), any numeric dtype (NaN or -1: unlabelled); ``.csv`` (``.csv.gz``) one row
  per vertex, T comma-separated columns, an empty field or ``nan`` a missing entry, integers or floats; a
  first line that is not numeric is skipped as a header;
- split folder: ``train``, ``valid`` (or ``val``) and ``test`` index files, each ``.npy`` (ids, any integer
  shape, or a bool mask of n entries), ``.csv`` / ``.txt`` (one id per line, ``.gz`` allowed; OGB's
  ``split/<kind>/train.csv.gz``).

Every failure is one `gridgnn.errors.DataError` line naming the file. Not collective.
"""

from __future__ import annotations

import gzip
import io
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from gridgnn.data.readers._common import check_inflation, load_table, reading
from gridgnn.data.splits import index_mask
from gridgnn.errors import DataError

SPLIT_PARTS = ("train", "valid", "test")
"""The index files of a split folder, in mask order (train, validation, test)."""
INDEX_SUFFIXES = (".npy", ".csv.gz", ".csv", ".txt.gz", ".txt")
"""The suffixes an index file may have, in the order they are looked for."""
_PART_NAMES = {"train": ("train",), "valid": ("valid", "val"), "test": ("test",)}


def _existing_file(path: Path, what: str) -> Path:
    path = Path(path).expanduser()
    if not path.exists():
        raise DataError(f"{path}: {what} file not found")
    if not path.is_file():
        raise DataError(f"{path}: {what} must be a regular file")
    return path


def read_features_file(path: Path | str) -> np.ndarray | sp.csr_matrix:
    """Features (n, f) as float32: a dense ``np.ndarray``, or a CSR matrix when the file holds a sparse one."""
    path = _existing_file(Path(path), "features")
    name = path.name.lower()
    with reading(path, "features"):
        if name.endswith(".npy"):
            features = np.load(path, allow_pickle=False)
        elif name.endswith(".npz"):
            features = _features_from_npz(path)
        else:
            raise DataError(f"{path}: features must be a .npy or .npz file")
        if sp.issparse(features):
            features = sp.csr_matrix(features, dtype=np.float32)
        else:
            if features.dtype.kind not in "biuf":
                raise DataError(f"{path}: features must be numbers, got dtype {features.dtype}")
            features = np.asarray(features, dtype=np.float32)
    if features.ndim == 1:
        features = features.reshape(-1, 1)
    if features.ndim != 2:
        raise DataError(f"{path}: features must have shape (n, f), got {features.shape}")
    values = features.data if sp.issparse(features) else features
    if not np.all(np.isfinite(values)):
        raise DataError(f"{path}: features contain NaN or inf")
    return features


def _features_from_npz(path: Path) -> np.ndarray | sp.spmatrix:
    """The one array of an ``np.savez`` file, or the matrix of a ``scipy.sparse.save_npz`` file."""
    check_inflation(path, path)
    with np.load(path, allow_pickle=False) as arrays:
        keys = list(arrays.keys())
        if "format" in keys and "shape" in keys:
            return sp.load_npz(path)
        if len(keys) != 1:
            raise DataError(f"{path}: a features .npz must hold one array or one scipy sparse matrix, got keys "
                            f"{', '.join(sorted(keys)[:8])}")
        return arrays[keys[0]]


def read_labels_file(path: Path | str) -> np.ndarray:
    """Labels as read: (n,) or (n, T), the file's dtype (``.npy``) or float64 with NaN missing (``.csv``)."""
    path = _existing_file(Path(path), "labels")
    name = path.name.lower()
    if name.endswith(".npy"):
        with reading(path, "labels"):
            values = np.load(path, allow_pickle=False)
    elif name.endswith((".csv", ".csv.gz")):
        values = _labels_from_csv(path)
    else:
        raise DataError(f"{path}: labels must be a .npy or .csv file")
    if values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    return values


def _labels_from_csv(path: Path) -> np.ndarray:
    """A comma-separated table of n rows and T columns (empty or ``nan``: missing) as float64."""
    with reading(path, "labels"):
        raw = gzip.open(path, "rb").read() if path.name.lower().endswith(".gz") else path.read_bytes()
        lines = [line for line in raw.decode("utf-8").splitlines() if line.strip()]
        if lines and not _numeric_row(lines[0]):
            lines = lines[1:]  # a header such as "label" or "y0,y1"
        if not lines:
            raise DataError(f"{path}: the label file has no rows")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            table = np.genfromtxt(io.StringIO("\n".join(lines)), delimiter=",", dtype=np.float64,
                                  missing_values="", filling_values=np.nan, ndmin=2, invalid_raise=True)
    if table.ndim != 2:
        raise DataError(f"{path}: expected one row per vertex, got shape {table.shape}")
    return table


def _numeric_row(line: str) -> bool:
    for field in line.split(","):
        text = field.strip()
        if not text:
            continue
        try:
            float(text)
        except ValueError:
            return False
    return True


def index_file(folder: Path, part: str) -> Path | None:
    """``folder/<part>.<suffix>`` for the first of `INDEX_SUFFIXES` (and ``val`` for ``valid``) that exists."""
    for stem in _PART_NAMES.get(part, (part,)):
        for suffix in INDEX_SUFFIXES:
            if (folder / f"{stem}{suffix}").is_file():
                return folder / f"{stem}{suffix}"
    return None


def read_index_file(path: Path, num_nodes: int | None = None) -> np.ndarray:
    """Vertex ids (int64 (k,)) of a ``.npy``, ``.csv`` or ``.txt`` file (``.gz`` allowed for text); a ``.npy``
    of ``num_nodes`` booleans is a mask (its true entries are the ids)."""
    name = path.name.lower()
    if name.endswith(".npy"):
        with reading(path, "vertex ids"):
            ids = np.load(path, allow_pickle=False)
    else:  # an empty file: no ids
        ids = load_table(path, "vertex ids", dtype=np.float64, delimiter="," if ".csv" in name else None, ndmin=1)
    ids = np.asarray(ids).reshape(-1)
    if ids.dtype.kind == "b" and ids.shape[0] == num_nodes:
        return np.flatnonzero(ids).astype(np.int64)
    if ids.dtype.kind == "b" or ids.dtype.kind not in "iuf":
        raise DataError(f"{path}: vertex ids must be integers, got dtype {ids.dtype}")
    if ids.dtype.kind == "f":
        if not np.all(np.isfinite(ids)) or np.any(ids != np.round(ids)):
            raise DataError(f"{path}: vertex ids must be integers")
    return ids.astype(np.int64)


def read_split_dir(folder: Path | str, num_nodes: int) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray],
                                                                 dict[str, Path]]:
    """(train, val, test) bool masks (n,) from the index files of ``folder``, and the file of each part.
    Refuses a missing part and an id outside ``[0, num_nodes)``."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise DataError(f"{folder}: split folder not found (give a folder holding train, valid and test index "
                        "files)")
    masks, files = [], {}
    for part in SPLIT_PARTS:
        path = index_file(folder, part)
        if path is None:
            raise DataError(f"{folder}: missing {part}.csv.gz (or {part}.csv, {part}.npy, {part}.txt(.gz))")
        ids = read_index_file(path, num_nodes)
        if ids.size and (ids.min() < 0 or ids.max() >= num_nodes):
            bad = int(ids.min() if ids.min() < 0 else ids.max())
            raise DataError(f"{path}: node id {bad} outside [0, {num_nodes})")
        masks.append(index_mask(num_nodes, ids))
        files[part] = path
    return (masks[0], masks[1], masks[2]), files
