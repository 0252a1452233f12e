"""A restricted unpickler for the Python-2 pickles of the Planetoid datasets.

`pickle.load` runs whatever callables a file names. `load_restricted` admits only the few classes that
the Planetoid files need (numpy arrays and dtypes, scipy CSR matrices, ``defaultdict(list)``); any other
global raises `DataError` naming the file and the class.
"""

from __future__ import annotations

import collections
import importlib
import io
import pickle
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from gridgnn.data.readers._common import reading
from gridgnn.errors import DataError


def _numpy_reconstruct() -> object:
    """numpy's array-unpickling helper (moved from numpy.core to numpy._core in numpy 2)."""
    for module in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            return importlib.import_module(module)._reconstruct
        except (ImportError, AttributeError):
            continue
    raise ImportError("numpy multiarray._reconstruct not found")


def _allowed_globals() -> dict[tuple[str, str], object]:
    """(module, name) -> object for every global the Planetoid pickles may ask for (py2 and py3 spellings)."""
    reconstruct = _numpy_reconstruct()
    allowed: dict[tuple[str, str], object] = {
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
        ("numpy.core.multiarray", "_reconstruct"): reconstruct,
        ("numpy._core.multiarray", "_reconstruct"): reconstruct,
        ("collections", "defaultdict"): collections.defaultdict,
        ("__builtin__", "list"): list,
        ("builtins", "list"): list,
    }
    for module in ("scipy.sparse", "scipy.sparse.csr", "scipy.sparse._csr"):
        allowed[(module, "csr_matrix")] = sp.csr_matrix
    return allowed


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickler whose `find_class` only returns allow-listed numpy/scipy/builtin objects."""

    def __init__(self, file: io.BufferedIOBase, source: Path | str) -> None:
        super().__init__(file, encoding="latin1")
        self._source = source
        self._allowed = _allowed_globals()

    def find_class(self, module: str, name: str) -> object:
        try:
            return self._allowed[(module, name)]
        except KeyError:
            raise DataError(f"{self._source}: pickle asks for forbidden class {module}.{name}") from None


def load_restricted(path: Path) -> object:
    """Unpickle `path` with `RestrictedUnpickler`; any failure becomes a one-line `DataError`."""
    with reading(path, "pickle"), open(path, "rb") as file:
        return RestrictedUnpickler(file, path).load()


def as_csr(obj: object, path: Path) -> sp.csr_matrix:
    """Rebuild and fully check a CSR float32 matrix from an unpickled sparse matrix or 2-D array."""
    with reading(path, "sparse matrix"):
        if isinstance(obj, np.ndarray) and obj.ndim == 2:
            return sp.csr_matrix(obj.astype(np.float32))
        if not sp.issparse(obj):
            raise DataError(f"{path}: expected a sparse matrix, got {type(obj).__name__}")
        matrix = sp.csr_matrix((obj.data, obj.indices, obj.indptr), shape=obj.shape, dtype=np.float32)
        matrix.check_format(full_check=True)
        return matrix


def as_array(obj: object, path: Path) -> np.ndarray:
    """Return `obj` as a 2-D numeric numpy array of finite values (Planetoid one-hot labels), else raise
    `DataError` (an object array, holding None or anything else, included)."""
    if not isinstance(obj, np.ndarray) or obj.ndim != 2:
        raise DataError(f"{path}: expected a 2-D numpy array, got {type(obj).__name__}")
    if obj.dtype.kind not in "biuf":
        raise DataError(f"{path}: expected a numeric (one-hot) array, got dtype {obj.dtype}")
    if obj.dtype.kind == "f" and not np.all(np.isfinite(obj)):
        raise DataError(f"{path}: labels contain NaN or inf")
    return obj
