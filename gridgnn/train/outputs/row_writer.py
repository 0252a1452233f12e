"""One per-vertex output file written by many ranks, each its own rows, safely (`gridgnn.train.outputs.per_vertex`).

The steps, every one agreed by all ranks before the next (so a failure on any rank is the same one line on
every rank, and nobody waits at a barrier for a rank that gave up)::

    1. rank 0 claims the hidden partial beside the target: created new (``O_EXCL | O_NOFOLLOW``) and held by
       an exclusive ``flock`` until the end. A partial left by a killed run (unlocked) is removed, and once
       the claim is held every CSV part of that target left by earlier runs; a locked partial means another
       run is writing the same file: refused.
       For .npy it writes the header and reserves the whole file (``posix_fallocate``): a full disk fails
       here, before any rank writes, and never later as SIGBUS (nothing is written through a memory map).
    2. each writing rank writes its rows: .npy with ``pwrite`` at the rows' offsets (a reordered graph's
       rows in runs of consecutive positions); .csv into a part file of its own, named by this run's
       token (``.gridgnn-<hash of the name>.<token>.<first row>.part``), so parts of another or a killed run
       are never joined.
    3. rank 0 appends this run's parts in row order (.csv), syncs, and renames the partial onto the target,
       checked again to be a regular file or absent.

A failed step removes the partial and this run's parts and raises `ConfigError` naming the target on every
rank. Collective on the world when a process group exists (every rank calls `write_rows_file`).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import secrets
import shutil
from pathlib import Path

import numpy as np
import torch.distributed as dist

from gridgnn.errors import ConfigError
from gridgnn.safe_files import (
    check_target,
    create_new,
    hidden_partial,
    open_regular,
    publish,
    remove_quietly,
    write_failed,
)


def write_rows_file(target: Path, what: str, rows: tuple[int, int], num_rows: int, block: np.ndarray,
                    ids: np.ndarray, positions: np.ndarray | None, writer_of) -> None:
    """Write this rank's ``block`` (rows ``rows`` of an (n, ...) output of ``num_rows`` rows) into ``target``
    as the module docstring says; ``writer_of(rows)`` tells whether this rank writes its rows (collective).
    ``positions``: the .npy rows the block's rows go to (default ``rows``)."""
    csv = target.suffix.lower() == ".csv"
    partial, stem = hidden_partial(target), _part_stem(target)
    held, token, problem, header = None, secrets.token_hex(8), None, 0
    if _rank() == 0:
        try:
            held = _claim(partial, stem, target, what)
            header = _start_csv(held, block) if csv else _start_npy(held, block, num_rows)
        except (OSError, ConfigError) as exc:
            problem = _message(exc, what, target)
    writer = writer_of(rows)
    token, problem, header = _from_rank0((token, problem, header))
    try:
        _raise_if(agree(problem))
        problem = None
        if writer:
            try:
                if csv:
                    _write_csv_part(partial.with_name(f"{stem}.{token}.{rows[0]:015d}.part"), block, ids)
                elif rows[1] > rows[0]:
                    _write_npy_rows(held, partial, header, rows, block, positions, what)
            except (OSError, ConfigError) as exc:
                problem = _message(exc, what, target)
        _raise_if(agree(problem))
        if _rank() == 0:
            try:
                if csv:
                    _append_parts(held, sorted(partial.parent.glob(f"{stem}.{token}.*.part")))
                os.fsync(held)
                publish(partial, target, what)
            except (OSError, ConfigError) as exc:
                problem = _message(exc, what, target)
        _raise_if(agree(problem))
    except BaseException:
        if held is not None:  # ours: a partial claimed by another live run is never touched
            remove_quietly(partial)
            for part in partial.parent.glob(f"{stem}.{token}.*.part"):
                remove_quietly(part)
        raise
    finally:
        if held is not None:
            os.close(held)  # releases the claim


def _part_stem(target: Path) -> str:
    """``.gridgnn-<hash of the target's name>``: the prefix of its CSV parts (short for any legal name)."""
    return f".gridgnn-{hashlib.sha256(os.fsencode(target.name)).hexdigest()[:16]}"


def _claim(partial: Path, stem: str, target: Path, what: str) -> int:
    """Rank 0: a new, locked partial (a stale one, with no live holder, removed first); once it is ours no
    other run can be writing the target, so every CSV part of it left beside it is removed."""
    check_target(target, what)
    for _ in range(2):
        try:
            handle = create_new(partial, replace_stale=False)
        except FileExistsError:  # a killed run's (removed) or a live run's (refused)
            _remove_stale(partial, target, what)
            continue
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)  # new and ours: cannot be held by another
        for part in [*partial.parent.glob(f"{stem}.*.part"), *partial.parent.glob(f"{partial.name}.*")]:
            remove_quietly(part)  # parts of killed runs (and of the previous release's naming): never joined
        return handle
    raise ConfigError(f"cannot write {what} '{target}': another run is writing it now; wait for it to end, "
                      "or choose another file")


def _remove_stale(partial: Path, target: Path, what: str) -> None:
    """Remove the partial of a run that no longer holds it (killed); raise `ConfigError` when a live run holds
    it."""
    try:
        old = open_regular(partial, os.O_RDONLY, f"partial of {what}")
    except ConfigError:
        remove_quietly(partial)  # a link or FIFO planted there: the name is ours to reuse
        return
    except FileNotFoundError:
        return
    try:
        fcntl.flock(old, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        raise ConfigError(f"cannot write {what} '{target}': another run is writing it now; wait for it to "
                          "end, or choose another file") from None
    finally:
        os.close(old)
    remove_quietly(partial)


def _start_npy(handle: int, block: np.ndarray, num_rows: int) -> int:
    """Write the .npy header of the whole (num_rows, ...) array and reserve the file; returns its length."""
    shape = (num_rows,) if block.dtype.names else (num_rows, block.shape[1])
    header = {"descr": np.lib.format.dtype_to_descr(block.dtype), "fortran_order": False, "shape": shape}
    with os.fdopen(os.dup(handle), "wb") as stream:
        try:
            np.lib.format.write_array_header_1_0(stream, header)
        except ValueError:  # a header over 64 KiB (thousands of classes)
            np.lib.format.write_array_header_2_0(stream, header)
        length = stream.tell()
    total = length + num_rows * _row_bytes(block)
    if total > length and hasattr(os, "posix_fallocate"):
        os.posix_fallocate(handle, 0, total)  # a full disk fails here; the rows' pwrite then never does
    else:
        os.ftruncate(handle, total)
    return length


def _row_bytes(block: np.ndarray) -> int:
    return block.dtype.itemsize * (1 if block.dtype.names else block.shape[1])


def _write_npy_rows(held: int | None, partial: Path, header: int, rows: tuple[int, int], block: np.ndarray,
                    positions: np.ndarray | None, what: str) -> None:
    """``pwrite`` the block's rows at their positions (runs of consecutive positions written at once)."""
    handle = held if held is not None else open_regular(partial, os.O_WRONLY, f"partial of {what}")
    try:
        width = _row_bytes(block)
        data = np.ascontiguousarray(block)
        if positions is None:
            _pwrite_all(handle, data, header + rows[0] * width)
            return
        order = np.argsort(positions, kind="stable")
        where, data = np.asarray(positions)[order], data[order]
        starts = np.flatnonzero(np.diff(where) != 1) + 1
        for lo, hi in zip(np.r_[0, starts], np.r_[starts, len(where)], strict=True):
            _pwrite_all(handle, data[lo:hi], header + int(where[lo]) * width)
    finally:
        if held is None:
            os.close(handle)


def _pwrite_all(handle: int, rows: np.ndarray, offset: int) -> None:
    view = memoryview(np.ascontiguousarray(rows).reshape(-1).view(np.uint8))
    while view:
        done = os.pwrite(handle, view, offset)
        view, offset = view[done:], offset + done


def _start_csv(handle: int, block: np.ndarray) -> int:
    """Write the CSV header line; returns 0."""
    if block.dtype.names:
        header = ["node"] + [name for name, _ in _record_columns(block.dtype)]
    else:
        header = ["node"] + [f"dim_{k}" for k in range(block.shape[1])]
    os.write(handle, (",".join(header) + "\n").encode("ascii"))
    return 0


CSV_PREFIXES = {"probabilities": "prob", "predicted": "predicted"}
"""The column name prefix of each vector field of prediction records (``prob_0``, ``predicted_0``, ...)."""


def _record_columns(dtype: np.dtype) -> list[tuple[str, str]]:
    """(column name, printf format) of every CSV column of prediction records after ``node``: a scalar field
    is one column of its name, a vector field of width k is k columns ``<prefix>_0`` ... (`CSV_PREFIXES`);
    integers print whole, floats with 9 significant digits."""
    columns = []
    for name in dtype.names[1:]:
        base, shape = dtype[name].base, dtype[name].shape
        fmt = "%d" if base.kind in "iu" else "%.9g"
        if not shape:
            columns.append((name, fmt))
        else:
            columns += [(f"{CSV_PREFIXES.get(name, name)}_{k}", fmt) for k in range(shape[0])]
    return columns


def _write_csv_part(path: Path, block: np.ndarray, ids: np.ndarray) -> None:
    if block.dtype.names:
        values = np.column_stack([block[name].reshape(len(block), -1).astype(np.float64)
                                  for name in block.dtype.names[1:]])
        formats = [fmt for _, fmt in _record_columns(block.dtype)]
    else:
        values, formats = block, ["%.9g"] * block.shape[1]
    table = np.column_stack([ids.astype(np.float64), values]) if len(ids) else np.empty((0, len(formats) + 1))
    with os.fdopen(create_new(path, replace_stale=False), "w", encoding="ascii") as out:
        np.savetxt(out, table, fmt=["%d", *formats], delimiter=",")


def _append_parts(handle: int, parts: list[Path]) -> None:
    """Append ``parts`` (this run's, in row order) to the partial and remove them."""
    with os.fdopen(os.dup(handle), "ab") as out:
        for part in parts:
            with open(part, "rb") as source:
                shutil.copyfileobj(source, out)
            part.unlink()


def _message(exc: Exception, what: str, target: Path) -> str:
    return str(exc) if isinstance(exc, ConfigError) else str(write_failed(what, target, exc))


def _raise_if(problem: str | None) -> None:
    if problem is not None:
        raise ConfigError(problem)


def _distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def _rank() -> int:
    return dist.get_rank() if _distributed() else 0


def _from_rank0(value):
    """Rank 0's ``value`` on every rank (collective on the world)."""
    if not _distributed():
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def agree(problem: str | None) -> str | None:
    """The first rank's problem, on every rank (collective on the world): one line everywhere."""
    if not _distributed():
        return problem
    every: list = [None] * dist.get_world_size()
    dist.all_gather_object(every, problem)
    return next((p for p in every if p is not None), None)
