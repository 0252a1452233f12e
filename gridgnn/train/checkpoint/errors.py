"""What goes wrong inside a checkpoint step, told in one line (not collective itself).

A save or load fails for one of two reasons the user must tell apart: a peer stopped answering
(`CollectiveError`, exit status 3) or the files are bad (`CheckpointError`, exit status 2, naming the folder).
DCP wraps the per-rank errors in its `CheckpointException`; `failures_explained` looks inside.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from torch.distributed.checkpoint.api import CheckpointException

from gridgnn.errors import CheckpointError, CollectiveError
from gridgnn.grid.peer_failures import is_peer_failure
from gridgnn.peer_errors import peer_failure_text


def _causes(error: BaseException) -> list[BaseException]:
    """The per-rank exceptions inside DCP's `CheckpointException`, or the error itself."""
    if isinstance(error, CheckpointException):
        return [pair[0] for pair in error.failures.values()] or [error]
    return [error]


@contextmanager
def failures_explained(what: str, folder: Path) -> Iterator[None]:
    """Turn what goes wrong inside a checkpoint step into one of our one-line errors: `CollectiveError`
    (exit 3) when a peer stopped answering, else `CheckpointError` (exit 2) naming the folder; a Ctrl-C that
    DCP wrapped with the rest is a `KeyboardInterrupt` again (exit 130)."""
    try:
        yield
    except (CheckpointError, CollectiveError):
        raise
    except (CheckpointException, RuntimeError, OSError, ValueError, KeyError, pickle.UnpicklingError) as error:
        causes = _causes(error)
        if any(isinstance(cause, KeyboardInterrupt) for cause in causes):  # DCP wraps even Ctrl-C: exit 130
            raise KeyboardInterrupt from None
        text = " ".join(str(causes[0]).split())[:300]
        first = f"{type(causes[0]).__name__}: {text}" if text else type(causes[0]).__name__
        if any(is_peer_failure(cause) for cause in causes):
            raise CollectiveError(peer_failure_text(f"{what} '{folder}'", first)) from None
        raise CheckpointError(f"{what} '{folder}' failed: {first}") from None
