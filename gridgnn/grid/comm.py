"""Counted collectives: every byte gridgnn moves between processes goes through `Communicator`.

Byte convention (DESIGN.md §3, the bandwidth term; a rank never counts data it already holds). For a payload
of ``m`` bytes on an axis group of ``p`` processes:

================  =========================================================================
broadcast         ``m`` to each non-root, 0 to the root
reduce (sum)      ``m`` to each non-root (the transpose of a broadcast), 0 to the root
all-reduce        ``2 * m * (p - 1) // p`` to every process
all-gather        ``(p - 1) * chunk`` to every process, ``chunk`` the (padded) per-process part
reduce-scatter    ``(p - 1) * chunk`` to every process
================  =========================================================================

All-gather and reduce-scatter pad every part to the largest one (NCCL and gloo need equal parts), and the
padding is counted: it is really sent. A collective on a group of one process is skipped and not recorded.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from gridgnn.errors import CollectiveError
from gridgnn.grid.process_grid import ProcessGrid

# torch 2.13 renamed the equal-part collectives; older releases (>= 2.4) only have the first names.
_all_gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_reduce_scatter_single = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor

PHASES = ("spmm_forward", "spmm_backward", "dense", "weight_grad", "loss", "other")


@dataclass(frozen=True)
class CommRecord:
    """One collective as seen by this rank."""

    op: str
    axis: str
    group_size: int
    bytes: int
    seconds: float
    phase: str


@dataclass
class CommTotals:
    """Sums over a list of records: bytes and calls overall and per phase."""

    bytes: int = 0
    calls: int = 0
    seconds: float = 0.0
    bytes_by_phase: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PHASES, 0))
    calls_by_phase: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PHASES, 0))

    @classmethod
    def of(cls, records: list[CommRecord]) -> CommTotals:
        totals = cls()
        for rec in records:
            totals.bytes += rec.bytes
            totals.calls += 1
            totals.seconds += rec.seconds
            totals.bytes_by_phase[rec.phase] += rec.bytes
            totals.calls_by_phase[rec.phase] += 1
        return totals


class Communicator:
    """Collectives on the axes of a `ProcessGrid`, each recorded with the current phase tag."""

    def __init__(self, grid: ProcessGrid):
        self.grid = grid
        self.records: list[CommRecord] = []
        self._phase = "other"

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Tag the collectives issued inside the block with ``name`` (one of `PHASES`)."""
        if name not in PHASES:
            raise ValueError(f"unknown phase '{name}'")
        previous, self._phase = self._phase, name
        try:
            yield
        finally:
            self._phase = previous

    def totals(self) -> CommTotals:
        return CommTotals.of(self.records)

    def reset(self) -> list[CommRecord]:
        """Return the records so far and start a new list."""
        records, self.records = self.records, []
        return records

    def _run(self, op: str, axis: str, nbytes: int, call) -> None:
        p = self.grid.size(axis)
        if p == 1:
            return
        start = time.perf_counter()
        try:
            call(self.grid.group(axis))
        except RuntimeError as error:  # gloo and NCCL report a lost or silent peer as RuntimeError
            first = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise CollectiveError(f"{op} on axis '{axis}' (rank {self.grid.rank}) failed: another worker "
                                  f"stopped or did not answer in time ({first[:200]})") from error
        if self.grid.device.type == "cuda":
            torch.cuda.synchronize(self.grid.device)
        self.records.append(CommRecord(op, axis, p, nbytes, time.perf_counter() - start, self._phase))

    def broadcast(self, tensor: torch.Tensor, axis: str, root: int) -> torch.Tensor:
        """Collective on ``axis``: ``tensor`` of the process at coordinate ``root`` overwrites the others'."""
        nbytes = 0 if self.grid.index(axis) == root else _nbytes(tensor)
        self._run("broadcast", axis, nbytes,
                  lambda g: dist.broadcast(tensor, group=g, group_src=root))
        return tensor

    def reduce(self, tensor: torch.Tensor, axis: str, root: int) -> torch.Tensor:
        """Collective on ``axis``: the sum over the group lands in the root's ``tensor``.

        Non-root buffers are clobbered (gloo uses them as scratch): do not read them afterwards.
        """
        nbytes = 0 if self.grid.index(axis) == root else _nbytes(tensor)
        self._run("reduce", axis, nbytes, lambda g: dist.reduce(tensor, group=g, group_dst=root))
        return tensor

    def all_reduce(self, tensor: torch.Tensor, axis: str) -> torch.Tensor:
        """Collective on ``axis``: every process's ``tensor`` becomes the sum over the group."""
        p = self.grid.size(axis)
        self._run("all_reduce", axis, 2 * _nbytes(tensor) * (p - 1) // p,
                  lambda g: dist.all_reduce(tensor, group=g))
        return tensor

    def all_gather_rows(self, local: torch.Tensor, axis: str, row_counts: list[int]) -> torch.Tensor:
        """Collective on ``axis``: concatenate the groups's row blocks (process k holds ``row_counts[k]``).

        Returns a tensor of ``sum(row_counts)`` rows on every process; parts are padded to the largest.
        """
        p = self.grid.size(axis)
        if p == 1:
            return local
        chunk = max(row_counts)
        padded = _pad_rows(local, chunk)
        out = local.new_empty((p * chunk,) + tuple(local.shape[1:]))
        self._run("all_gather", axis, (p - 1) * _nbytes(padded),
                  lambda g: _all_gather_single(out, padded, group=g))
        parts = [out[k * chunk: k * chunk + rows] for k, rows in enumerate(row_counts)]
        return torch.cat(parts)

    def reduce_scatter_rows(self, full: torch.Tensor, axis: str, row_counts: list[int]) -> torch.Tensor:
        """Collective on ``axis``: sum ``full`` over the group; process k keeps rows of part k.

        ``full`` has ``sum(row_counts)`` rows; parts are padded to the largest before the collective.
        """
        p = self.grid.size(axis)
        if p == 1:
            return full
        chunk = max(row_counts)
        blocks = torch.split(full, row_counts)
        stacked = torch.cat([_pad_rows(b, chunk) for b in blocks])
        out = full.new_empty((chunk,) + tuple(full.shape[1:]))
        self._run("reduce_scatter", axis, (p - 1) * _nbytes(out),
                  lambda g: _reduce_scatter_single(out, stacked, group=g))
        return out[: row_counts[self.grid.index(axis)]]


def _nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def _pad_rows(tensor: torch.Tensor, rows: int) -> torch.Tensor:
    if tensor.shape[0] == rows:
        return tensor.contiguous()
    pad = tensor.new_zeros((rows - tensor.shape[0],) + tuple(tensor.shape[1:]))
    return torch.cat([tensor, pad])
