"""Rows of one array inside a ``.npz`` (a zip of ``.npy`` members, compressed or not) without loading the array.

OGB's binary layout (`gridgnn.data.readers.ogb_binary`) ships ``np.savez_compressed`` archives, whose members
cannot be memory-mapped. `NpzMember` reads a member's ``.npy`` header, then streams the member forward: a
read of rows ``[a, b)`` decompresses and discards what lies before ``a`` (in chunks of `SKIP_BYTES`) and keeps
only its rows, so a process of a distributed preparation holds its own rows and one chunk, never the array.
Reads in increasing order continue the stream; a read behind it opens the member again. Not collective.
"""

from __future__ import annotations

import zipfile
import zlib
from pathlib import Path

import numpy as np

from gridgnn.errors import DataError

SKIP_BYTES = 1 << 20
"""Bytes decompressed at a time: discarded while seeking forward in a member, or copied into the result."""


class NpzMember:
    """The array ``name`` of the ``.npz`` at ``path``: its ``shape``, ``dtype`` and ``ndim`` from its header, and
    its rows by slicing (``member[a:b]``: rows a to b of a C-order array) or by flat range (`flat`)."""

    def __init__(self, path: str | Path, name: str):
        self.path, self.name = Path(path), name
        self._archive: zipfile.ZipFile | None = None
        self._stream = None
        self._open()

    def __enter__(self) -> NpzMember:
        return self

    def __exit__(self, *_) -> None:
        self.close()

    def _open(self) -> None:
        """(Re)open the member at its first value; `DataError` (one line) for a damaged or foreign file."""
        try:
            self._start()
        except (OSError, EOFError, zipfile.BadZipFile, zlib.error, KeyError, ValueError) as exc:
            self.close()
            raise DataError(f"{self.path}: cannot read the array '{self.name}' ({exc})") from None

    def _start(self) -> None:
        self.close()
        self._archive = zipfile.ZipFile(self.path)
        self._stream = self._archive.open(f"{self.name}.npy")
        version = np.lib.format.read_magic(self._stream)
        readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
        if version not in readers:
            raise ValueError(f".npy format version {version} is not read by rows")
        shape, fortran, dtype = readers[version](self._stream)
        if fortran and len(shape) > 1:
            raise ValueError("a Fortran-order array cannot be read by rows")
        if dtype.hasobject:
            raise ValueError("an object array is not read")
        self.shape, self.dtype, self.ndim = tuple(shape), dtype, len(shape)
        self._row_values = int(np.prod(shape[1:], dtype=np.int64)) if len(shape) > 1 else 1
        self._position = 0  # values of the array consumed so far

    def close(self) -> None:
        """Release the archive (reading again reopens it)."""
        if self._stream is not None:
            self._stream.close()
        if self._archive is not None:
            self._archive.close()
        self._stream = self._archive = None

    def __len__(self) -> int:
        return int(self.shape[0])

    def flat(self, start: int, count: int) -> np.ndarray:
        """Values ``[start, start + count)`` of the array in C order, shape (count,), read straight into the
        returned array. `DataError` (one line) for a member cut short or damaged."""
        if start < self._position or self._stream is None:
            self._open()
        out = np.empty(count, dtype=self.dtype)
        try:
            skip = (start - self._position) * self.dtype.itemsize
            while skip > 0:
                got = len(self._stream.read(min(skip, SKIP_BYTES)))
                if got == 0:
                    raise EOFError("cut short")
                skip -= got
            view, filled = memoryview(out).cast("B"), 0
            while filled < len(view):
                got = self._stream.readinto(view[filled:filled + SKIP_BYTES])
                if not got:
                    raise EOFError("cut short")
                filled += got
        except (OSError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
            self.close()
            raise DataError(f"{self.path}: cannot read the array '{self.name}' ({exc})") from None
        self._position = start + count
        return out

    def __getitem__(self, rows: slice) -> np.ndarray:
        if not isinstance(rows, slice) or rows.step not in (None, 1):
            raise TypeError("NpzMember reads a contiguous range of rows: member[a:b]")
        a, b, _ = rows.indices(len(self))
        b = max(a, b)
        values = self.flat(a * self._row_values, (b - a) * self._row_values)
        return values.reshape((b - a,) + self.shape[1:])
