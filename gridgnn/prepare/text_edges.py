"""One process's part of a text edge list: a byte range cut at line starts, parsed as the one-process reader
(`gridgnn.data.readers.edgelist`) parses the whole file.

The data lines (after a header line, if any) are cut into P byte ranges of equal size; each range moves
forward to the next line start, so a line belongs to the process whose range holds its first byte. A range is
read and parsed `BLOCK_BYTES` at a time (at line ends), so a process holds its part's edges, not its text.
"""

from __future__ import annotations

import io
import os
import warnings
from pathlib import Path

import numpy as np

from gridgnn.data.readers.edgelist import COMMENTS, _sniff
from gridgnn.errors import DataError

BLOCK_BYTES = 32 << 20
"""Text parsed at a time by one process."""


def data_start(path: Path, skip_lines: int) -> int:
    """The byte offset after the first ``skip_lines`` lines (comments and a header line), 0 for none."""
    offset = 0
    with open(path, "rb") as stream:
        for _ in range(skip_lines):
            line = stream.readline()
            if not line:
                break
            offset += len(line)
    return offset


def line_start_at_or_after(stream, position: int, floor: int, size: int) -> int:
    """The first line start at or after byte ``position`` (``floor``: the first data byte; ``size``: the file's)."""
    if position <= floor:
        return floor
    if position >= size:
        return size
    stream.seek(position - 1)
    offset = position - 1
    while True:
        block = stream.read(1 << 16)
        if not block:
            return size
        newline = block.find(b"\n")
        if newline >= 0:
            return offset + newline + 1
        offset += len(block)


def byte_range(path: Path, rank: int, size: int) -> tuple[int, int, str | None]:
    """(first byte, end byte, delimiter) of process ``rank`` of ``size``'s lines."""
    delimiter, skip = _sniff(path)
    floor, total = data_start(path, skip), path.stat().st_size
    with open(path, "rb") as stream:
        lo = line_start_at_or_after(stream, floor + (total - floor) * rank // size, floor, total)
        hi = line_start_at_or_after(stream, floor + (total - floor) * (rank + 1) // size, floor, total)
    return lo, hi, delimiter


def read_edge_range(path: Path, lo: int, hi: int, delimiter: str | None) -> np.ndarray:
    """The (E, 2) int64 (source, target) ids of the lines in bytes [lo, hi) of ``path``, in file order."""
    parts = []
    with open(path, "rb") as stream:
        stream.seek(lo)
        position, carry = lo, b""
        while position < hi:
            block = carry + stream.read(min(BLOCK_BYTES, hi - position))
            position = stream.tell()
            cut = block.rfind(b"\n") + 1 if position < hi else len(block)
            text, carry = block[:cut], block[cut:]
            if text:
                parts.append(_parse(path, text, delimiter, lo))
        if carry:
            parts.append(_parse(path, carry, delimiter, lo))
    parts = [p for p in parts if p.size]
    return np.concatenate(parts) if parts else np.empty((0, 2), dtype=np.int64)


def _parse(path: Path, text: bytes, delimiter: str | None, lo: int) -> np.ndarray:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "input contained no data": an all-comment block
            return np.loadtxt(io.StringIO(text.decode("utf-8")), dtype=np.int64, comments=COMMENTS,
                              delimiter=delimiter, usecols=(0, 1), ndmin=2)
    except (ValueError, UnicodeDecodeError) as exc:
        detail = " ".join(str(exc).split())[:200]
        raise DataError(f"{path}: cannot read the edge lines from byte {lo} on ({detail})") from None


def file_state(path: Path) -> list[int]:
    """[size, modification time in ns, inode] of ``path``: compared before and after reading, to refuse an
    input that changed while it was read."""
    info = os.stat(path)
    return [int(info.st_size), int(info.st_mtime_ns), int(info.st_ino)]
