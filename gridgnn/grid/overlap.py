"""The overlap scheduler: asynchronous collectives in flight while the caller computes (not collective
itself; the collectives it waits for are, on their own axes).

`Pending` is one issued collective; `pipeline` issues the next stage's collectives before the caller
computes with the current one (double buffering); `InFlight` keeps one collective running behind the
computation. With overlap off both wait at once, so the same collectives run in the same order either way and
results and byte counts are identical. The collectives themselves and their byte convention are
`gridgnn.grid.comm.Communicator`'s.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

import torch

from gridgnn.grid.comm_records import CommRecord

if TYPE_CHECKING:
    from gridgnn.grid.comm import Communicator


class Pending:
    """An issued asynchronous collective. `wait()` blocks until it is done and returns ``then(tensor)``
    (the tensor by default); it is recorded then, with the phase that was current at issue."""

    def __init__(self, comm: Communicator, work, op: str, axis: str, nbytes: int, tensor: torch.Tensor,
                 then: Callable[[torch.Tensor], object] | None = None):
        self.comm, self.work, self.op, self.axis, self.nbytes = comm, work, op, axis, nbytes
        self.tensor, self.then, self.phase = tensor, then, comm.current_phase
        self.start, self._done_at = time.perf_counter(), None
        self._result = None
        if work is not None:
            try:  # completion time, seen from the communication thread (not supported everywhere)
                work.get_future().add_done_callback(self._mark_done)
            except (RuntimeError, AttributeError, NotImplementedError):
                pass

    def _mark_done(self, _future) -> None:
        self._done_at = time.perf_counter()

    def wait(self) -> object:
        if self.work is not None:
            blocked_from = time.perf_counter()
            try:
                self.work.wait()
            except RuntimeError as error:
                raise self.comm.lost_peer(self.op, self.axis, error) from error
            if self.comm.grid.device.type == "cuda":
                torch.cuda.synchronize(self.comm.grid.device)
            now = time.perf_counter()
            exposed = now - blocked_from
            # Lifetime: issue to completion (seen by the communication thread), never less than the wait.
            total = max(min(self._done_at or now, now) - self.start, exposed)
            self.comm.records.append(CommRecord(self.op, self.axis, self.comm.grid.size(self.axis), self.nbytes,
                                                total, self.phase, exposed))
            self.work = None
            self._result = self.then(self.tensor) if self.then is not None else self.tensor
        elif self._result is None:
            self._result = self.then(self.tensor) if self.then is not None else self.tensor
        return self._result


class Ready:
    """A value already at hand (a kept panel), waited for like a `Pending`: `wait()` returns it."""

    def __init__(self, value: object):
        self.value = value

    def wait(self) -> object:
        return self.value


class InFlight:
    """Collectives issued after the computation that feeds them (e.g. reduces of partial products): with
    overlap, `add` leaves the new one running while the caller computes the next part, and waits for the
    one before; without, it waits at once. `drain` (or leaving the ``with`` block) waits for the rest."""

    def __init__(self, overlap: bool):
        self.overlap, self.pending = overlap, []

    def add(self, pending: Pending) -> None:
        self.pending.append(pending)
        keep = 1 if self.overlap else 0
        while len(self.pending) > keep:
            self.pending.pop(0).wait()

    def drain(self) -> None:
        while self.pending:
            self.pending.pop(0).wait()

    def __enter__(self) -> InFlight:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None:
            self.drain()


def pipeline(stages: Iterable, issue: Callable[[object], object], overlap: bool) -> Iterator[tuple]:
    """Yield ``(stage, results)`` for each stage, where ``issue(stage)`` starts that stage's collectives
    (a `Pending`, a tuple of them, or None) and ``results`` is what they deliver once waited for.

    With ``overlap``, stage s + 1 is issued before stage s is handed to the caller (double buffering: two
    stages' receive buffers are alive at once); without, each stage is issued and waited for in turn.
    Every process of the groups involved must iterate the same stages.
    """
    stages = list(stages)
    ahead = issue(stages[0]) if stages and overlap else None
    for index, stage in enumerate(stages):
        current = ahead if overlap else issue(stage)
        results = _wait_all(current)
        if overlap and index + 1 < len(stages):
            ahead = issue(stages[index + 1])
        yield stage, results


def _wait_all(pending):
    """Wait for a `Pending`, a tuple of them (and Nones), or None; returns what they deliver."""
    if pending is None:
        return None
    if isinstance(pending, tuple):
        return tuple(p.wait() if p is not None else None for p in pending)
    return pending.wait()
