"""The collectives distributed preparation moves data with: uneven all-to-alls of numpy rows, a lookup of
values held by their owners, and agreement on errors. Collective on the world (the preparation's process
group); 64-bit counts and split sizes throughout.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.distributed as dist

from gridgnn.errors import DataError

_WIRE = {np.dtype(np.bool_): np.dtype(np.uint8)}
"""numpy dtypes sent as another of the same width (gloo has no bool all-to-all)."""


def world() -> tuple[int, int]:
    """(rank, size) of the process group, (0, 1) without one."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def exchange_counts(send_counts: np.ndarray) -> np.ndarray:
    """Collective on the world: ``recv[s]`` = what rank s sends this rank (``send_counts`` (P,) int64)."""
    _, size = world()
    if size == 1:
        return np.asarray(send_counts, dtype=np.int64).copy()
    received = torch.empty(size, dtype=torch.int64)
    dist.all_to_all_single(received, torch.from_numpy(np.ascontiguousarray(send_counts, dtype=np.int64)))
    return received.numpy()


def all_to_all_rows(rows: np.ndarray, send_counts: np.ndarray, recv_counts: np.ndarray) -> np.ndarray:
    """Collective on the world: ``rows`` (sum(send_counts), ...) already grouped by destination rank (the first
    ``send_counts[0]`` to rank 0, ...) in; the rows every rank sent this one, grouped by sender, out."""
    _, size = world()
    rows = np.ascontiguousarray(rows)
    if size == 1:
        return rows.copy()
    wire = _WIRE.get(rows.dtype, rows.dtype)
    out = np.empty((int(np.sum(recv_counts)),) + rows.shape[1:], dtype=wire)
    dist.all_to_all_single(torch.from_numpy(out), torch.from_numpy(rows.view(wire)),
                           [int(c) for c in recv_counts], [int(c) for c in send_counts])
    return out.view(rows.dtype)


def send_to_owners(owners: np.ndarray, *arrays: np.ndarray) -> list[np.ndarray]:
    """Collective on the world: row e of every array (all of length E) goes to rank ``owners[e]``; returns the
    rows this rank received, grouped by sender rank, each sender's in their original order."""
    _, size = world()
    order = np.argsort(owners, kind="stable")
    send_counts = np.bincount(owners, minlength=size).astype(np.int64)
    recv_counts = exchange_counts(send_counts)
    return [all_to_all_rows(array[order], send_counts, recv_counts) for array in arrays]


def ask_owners(keys: np.ndarray, owners: np.ndarray, answer) -> np.ndarray:
    """Collective on the world: ``answer(asked)`` evaluated by the owner of each key, for every one of
    ``keys`` (E,), in the order of ``keys``. ``answer`` maps the (m,) keys a rank is asked for to (m, ...)
    values; every rank must call it (with its own, possibly empty, requests)."""
    _, size = world()
    order = np.argsort(owners, kind="stable")
    send_counts = np.bincount(owners, minlength=size).astype(np.int64)
    recv_counts = exchange_counts(send_counts)
    asked = all_to_all_rows(keys[order], send_counts, recv_counts)
    replies = np.asarray(answer(asked))
    got = all_to_all_rows(replies, recv_counts, send_counts)
    out = np.empty_like(got)
    out[order] = got
    return out


def agree(problem: str | None) -> None:
    """Collective on the world: every rank raises the first rank's problem (`DataError`, one line) when any
    rank has one, so that all stop alike instead of some waiting in the next collective."""
    _, size = world()
    found = [problem] * size
    if size > 1:
        dist.all_gather_object(found, problem)
    first = next((p for p in found if p is not None), None)
    if first is not None:
        raise DataError(first)


def total(value: int) -> int:
    """Collective on the world: the sum of every rank's ``value`` (int64)."""
    return _reduced(value, "SUM")


def maximum(value: int) -> int:
    """Collective on the world: the largest of every rank's ``value`` (int64)."""
    return _reduced(value, "MAX")


def _reduced(value: int, op: str) -> int:
    _, size = world()
    if size == 1:
        return int(value)
    tensor = torch.tensor([int(value)], dtype=torch.int64)
    dist.all_reduce(tensor, op=getattr(dist.ReduceOp, op))
    return int(tensor.item())


def gather_all(values: np.ndarray) -> np.ndarray:
    """Collective on the world: every rank's (k,) int64 ``values`` (k equal everywhere), as (P, k)."""
    _, size = world()
    mine = torch.from_numpy(np.ascontiguousarray(values, dtype=np.int64))
    if size == 1:
        return mine.numpy()[None, :].copy()
    out = [torch.empty_like(mine) for _ in range(size)]
    dist.all_gather(out, mine)
    return torch.stack(out).numpy()


def all_gather_rows(values: np.ndarray) -> np.ndarray:
    """Collective on the world: every rank's ``values`` (m_r,) (uneven lengths, one dtype), concatenated in
    rank order: (sum of m_r,)."""
    _, size = world()
    values = np.ascontiguousarray(values)
    if size == 1:
        return values.copy()
    counts = gather_all(np.array([len(values)], dtype=np.int64))[:, 0]
    padded = np.zeros(int(counts.max()), dtype=values.dtype)
    padded[:len(values)] = values
    mine = torch.from_numpy(padded)
    out = [torch.empty_like(mine) for _ in range(size)]
    dist.all_gather(out, mine)
    return np.concatenate([out[r].numpy()[:counts[r]] for r in range(size)])
