"""What C and C++ libraries print on the process's own descriptors (METIS's ``***`` lines, torch's c10d
``[E ...] socket.cpp`` lines) kept off the terminal, where it would come before gridgnn's one line.
Not collective.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def c_output_captured() -> Iterator[list[str]]:
    """Descriptors 1 and 2 point at a temporary file for the block (Python's own streams are flushed first,
    and write there too meanwhile); when the block ends, however it ends, they are restored and the text is
    appended to the yielded list, for the caller to use in its message or drop."""
    captured: list[str] = []
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):  # a closed or absent stream
            pass
    with tempfile.TemporaryFile() as sink:
        saved = [os.dup(1), os.dup(2)]
        try:
            os.dup2(sink.fileno(), 1)
            os.dup2(sink.fileno(), 2)
            yield captured
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (AttributeError, OSError, ValueError):
                    pass
            for fd, original in zip((1, 2), saved, strict=True):
                os.dup2(original, fd)
                os.close(original)
            sink.seek(0)
            captured.append(sink.read().decode("utf-8", errors="replace"))
