"""Shared assertions of the bad-input tests: a `DataError` of one line that names the file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

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
