"""Shared assertions of the bad-input tests: a `DataError` of one line that names the file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from gridgnn.data import load_dataset
from gridgnn.errors import DataError


def fails(call: Callable[[], object], where: Path | str, match: str) -> str:
    """Run ``call``; it must raise a one-line `DataError` matching ``match`` and naming ``where``."""
    with pytest.raises(DataError, match=match) as info:
        call()
    message = str(info.value)
    assert "\n" not in message and str(where) in message, message
    return message


def load(path: Path) -> Callable[[], object]:
    """A call that loads ``path`` as `gridgnn train --dataset PATH` would."""
    return lambda: load_dataset(str(path))


def benchmark_arrays(**overrides: object) -> dict:
    """The arrays of a valid 3-node gnn-benchmark ``.npz`` with ``overrides`` (a None value removes the key)."""
    adj = sp.csr_matrix(np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], dtype=np.float32))
    arrays = {f"adj_{k}": getattr(adj, k) for k in ("data", "indices", "indptr")}
    arrays.update(adj_shape=np.array([3, 3]), attr_matrix=np.ones((3, 2), np.float32), labels=np.array([0, 1, 0]))
    arrays.update(overrides)
    return {k: v for k, v in arrays.items() if v is not None}
