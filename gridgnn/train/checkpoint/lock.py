"""One run per checkpoint folder: an exclusive `fcntl.flock` on ``DIR/.gridgnn-lock``, held for the run.

Two runs saving into one folder would delete each other's partial saves and prune each other's
checkpoints. So the process that owns a run takes the lock before anything else touches the folder: a
one-process run itself, the local launcher for its workers (their run spec says so,
`gridgnn.run_spec.RunSpec.launched_locally`, and they take nothing), and rank 0 of a torchrun job (which
tells the other ranks whether it got it). The holder writes its pid and host into the file, so that a
second run is refused at once with one line naming them. The kernel drops the lock when its holder exits,
however it exits; the file itself stays (removing it would let two runs lock two different files).

The lock file is opened without following a link and checked to be a regular file with one link before it is
written (`gridgnn.safe_files.open_regular`): a link, directory or FIFO planted at its name is refused with one
line, never written through (it would destroy a file outside the run) and never taken for "no lock".
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch.distributed as dist

from gridgnn.config import CheckpointOptions
from gridgnn.errors import ConfigError
from gridgnn.grid.peer_failures import peer_failures_explained
from gridgnn.safe_files import open_regular

LOCK_FILE = ".gridgnn-lock"
"""The lock file inside a checkpoint folder; it holds ``<pid> <host>`` of the run that has it."""


@contextmanager
def hold_checkpoint_dir(checkpoints: CheckpointOptions, *, agree: bool = False,
                        held_by_launcher: bool = False) -> Iterator[None]:
    """Hold the lock of ``checkpoints.checkpoint_dir`` (a run's checkpoint section, or its whole `TrainConfig`)
    for the duration (nothing without a folder, or with
    ``held_by_launcher``: in a worker of the local launcher, which holds it for the whole run). Raises
    `ConfigError` naming the holder when another run has it.

    With ``agree`` (a worker of a process group): only rank 0 locks, and every rank raises alike;
    collective on the world. A folder that cannot be created is left to `check_checkpoint_dir` to report.
    """
    if checkpoints.checkpoint_dir is None or held_by_launcher:
        yield
        return
    distributed = agree and dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
    folder = Path(checkpoints.checkpoint_dir)
    handle, refusal, created = None, None, not folder.exists()
    if not distributed or dist.get_rank() == 0:
        try:
            handle = _acquire(folder)
        except ConfigError as error:
            refusal = str(error)
    if distributed:
        answer = [refusal]
        with peer_failures_explained("agreeing on the checkpoint folder's lock"):
            dist.broadcast_object_list(answer, src=0)
        refusal = answer[0]
    if refusal is not None:
        raise ConfigError(refusal)
    try:
        yield
    finally:
        if handle is not None:
            if created:
                _remove_if_unused(folder)
            os.close(handle)  # releases the lock


def _remove_if_unused(folder: Path) -> None:
    """Remove a folder this run created when it holds nothing but the lock file (a run that failed before
    its first save leaves nothing behind)."""
    try:
        if [entry.name for entry in folder.iterdir()] == [LOCK_FILE]:
            (folder / LOCK_FILE).unlink()
            folder.rmdir()
    except OSError:
        pass


def _acquire(folder: Path) -> int | None:
    """The open, locked lock file of ``folder`` (created), or None when the folder cannot be made (left to
    `check_checkpoint_dir` to report). Raises `ConfigError` when another run holds it or the lock path is
    not a regular file of its own."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    if not folder.is_dir():
        return None
    try:
        handle = open_regular(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, "checkpoint lock file")
    except OSError as exc:
        raise ConfigError(f"cannot lock checkpoint folder '{folder}': {exc.strerror or exc}") from None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(handle)
        raise ConfigError(f"checkpoint folder '{folder}' is in use by another run ({_holder(folder)}); wait "
                          "for it to end, or choose another --checkpoint-dir") from None
    os.ftruncate(handle, 0)
    os.write(handle, f"{os.getpid()} {socket.gethostname()}\n".encode())
    return handle


def _holder(folder: Path, attempts: int = 20) -> str:
    """``pid N on HOST`` from the lock file (its holder may be writing it this very moment)."""
    for _ in range(attempts):
        try:
            fields = (folder / LOCK_FILE).read_text(encoding="utf-8", errors="replace").split()
        except OSError:
            fields = []
        if len(fields) == 2 and fields[0].isdigit():
            return f"pid {fields[0]} on {fields[1]}"
        time.sleep(0.01)
    return "pid unknown"
