"""One-line errors for a peer that died or stopped answering, for the collectives outside `Communicator`.

The counted collectives of `gridgnn.grid.comm.Communicator` turn a failed call into `CollectiveError` (exit
status 3, one line). Control collectives issued straight through ``torch.distributed`` (the set-up barrier,
gathering metrics to rank 0, the resume decision, checkpoint barriers) go through `peer_failures_explained`
so that a stopped peer ends them the same way, not with a traceback and status 1. Not collective itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch.distributed as dist

from gridgnn.errors import CollectiveError
from gridgnn.peer_errors import first_line, is_out_of_memory, peer_failure_text


def is_peer_failure(error: BaseException) -> bool:
    """A failure of the process group (a peer died or timed out), not of the data or the files: torch's
    distributed errors, or the plain RuntimeError gloo raises for a closed or silent peer."""
    if is_out_of_memory(error):  # this process's own failure, whatever library raised it
        return False
    if isinstance(error, dist.DistError):
        return True
    text = str(error).lower()
    return type(error) is RuntimeError and any(
        word in text for word in ("timed out", "timeout", "connection", "gloo", "nccl", "peer"))


@contextmanager
def peer_failures_explained(what: str) -> Iterator[None]:
    """Re-raise a peer failure inside the block as `CollectiveError` ``"<what> failed: another worker stopped
    or did not answer in time (<first line>)"``; every other error passes unchanged."""
    try:
        yield
    except RuntimeError as error:
        if isinstance(error, CollectiveError) or not is_peer_failure(error):
            raise
        raise CollectiveError(peer_failure_text(what, first_line(error, 200))) from error
