"""Resumable training checkpoints: saving and loading `torch.distributed.checkpoint` (DCP) files atomically.

What a checkpoint folder ``DIR/epoch-00000010/`` holds::

    .metadata, __0_0.distcp     DCP's files: model weights, Adam state (moments, step, param groups),
                                torch RNG state
    gridgnn-checkpoint.json     the manifest, written last (`gridgnn.train.checkpoint.manifest`)

The jobs around this one live in their own modules: folder names (`gridgnn.train.checkpoint.naming`), what a
checkpoint belongs to (`gridgnn.train.checkpoint.fingerprint`), the manifest and its hashes
(`gridgnn.train.checkpoint.manifest`), reading DCP's files without running code
(`gridgnn.train.checkpoint.safe_reader`) and the one-line failures (`gridgnn.train.checkpoint.errors`).

Atomic: every rank takes part in DCP's collective save into the partial folder (the weights and the
optimizer state are replicated, and DCP's planner writes each replicated entry once); rank 0 then hashes
the files, writes the manifest, fsyncs and renames the folder into place. A crash before the rename leaves
only a partial folder, which no reader looks at, so the previous checkpoint stays the newest valid one.
A multi-node run needs ``DIR`` on a file system all nodes see (as DCP itself does).

Safe: before DCP opens anything every file is checked against the manifest; DCP's pickled ``.metadata`` is
read by an allow-list unpickler, and its non-tensor entries with ``torch.load(weights_only=True)``, so a
tampered checkpoint cannot run code. Any problem is a `CheckpointError` (one line, exit status 2).

Resharding is a matter of loading: the state holds only replicated tensors, so a checkpoint taken on one
grid (any algorithm, P, replication) loads on any other.
"""

from __future__ import annotations

import os
import shutil
import warnings
from contextlib import contextmanager
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemWriter
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

from gridgnn.train.checkpoint.errors import failures_explained
from gridgnn.train.checkpoint.manifest import read_manifest, write_manifest
from gridgnn.train.checkpoint.naming import PARTIAL_GLOB, checkpoint_path, list_checkpoints, partial_path, replaced_path
from gridgnn.train.checkpoint.safe_reader import VerifiedReader, WeightsOnlyLoadPlanner

# --------------------------------------------------------------------------------------------------------
# Saving and loading (collective on the world when a process group exists)


def _state(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict:
    model_state, optim_state = get_state_dict(model, optimizer)
    return {"model": model_state, "optim": optim_state, "rng": torch.get_rng_state()}


@contextmanager
def _quiet_single_process():
    """DCP warns on every call without a process group that it assumes one process: that is intended."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        yield


def _distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


def _is_writer() -> bool:
    return not _distributed() or dist.get_rank() == 0


def _barrier() -> None:
    if _distributed():
        dist.barrier()


def save_checkpoint(directory: str | os.PathLike, epoch: int, model: torch.nn.Module,
                    optimizer: torch.optim.Optimizer, manifest: dict, keep: int) -> Path:
    """Save the state after ``epoch`` into ``DIR/epoch-%08d`` atomically; keep the newest ``keep``.

    ``manifest`` holds the JSON-ready entries rank 0 records (fingerprint, config, history); only rank 0's
    copy is used. Collective on the world (DCP save plus two barriers) when a process group exists.
    """
    root = Path(directory)
    final = checkpoint_path(root, epoch)
    with failures_explained("saving checkpoint", final):
        try:
            return _save(root, final, epoch, model, optimizer, manifest, keep)
        except Exception:
            if _is_writer():
                _drop_failed_save(final)
            raise


def _drop_failed_save(final: Path) -> None:
    """After a failed save (a full disk): put back an older copy of the same epoch if it was moved aside,
    and remove the partial folder, so the failure leaves what was there before and nothing else."""
    replaced = replaced_path(final)
    try:
        if replaced.is_dir() and not final.exists():
            os.rename(replaced, final)
    except OSError:
        return  # keep the partial too: nothing is removed that could be the only copy
    _remove_entry(partial_path(final))


def _save(root: Path, final: Path, epoch: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
          manifest: dict, keep: int) -> Path:
    partial = partial_path(final)
    if _is_writer():
        root.mkdir(parents=True, exist_ok=True)
        for stale in root.glob(PARTIAL_GLOB):  # saves a crash interrupted: never complete, never read
            _remove_entry(stale)
        os.mkdir(partial)  # new, never a planted link: DCP then writes only inside it
    _barrier()
    with _quiet_single_process():
        dcp.save(_state(model, optimizer), storage_writer=FileSystemWriter(partial), no_dist=not _distributed())
    if _is_writer():
        write_manifest(partial, epoch, manifest)
        replaced = replaced_path(final)
        if final.exists():  # the same epoch saved again (a resumed run): move the old copy aside first,
            _remove_entry(replaced)  # so that a complete copy exists at every moment
            os.rename(final, replaced)
        os.rename(partial, final)
        _fsync_folder(root)
        _remove_entry(replaced)
        for _, old in list_checkpoints(root)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    _barrier()
    return final


def _remove_entry(path: Path) -> None:
    """Remove a folder with its content, or a file or link (never what a link points to)."""
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path, ignore_errors=True)


def _fsync_folder(folder: Path) -> None:
    handle = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def load_checkpoint(path: str | os.PathLike, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                    manifest: dict | None = None) -> tuple[dict, torch.Tensor]:
    """Verify checkpoint ``path`` and load its weights and optimizer state into ``model`` and
    ``optimizer``; returns its manifest and the saved torch RNG state (the trainer restores it once it has
    seeded). Collective on the world when a process group exists.

    The caller checks the fingerprint (`check_compatible`) first; shapes are also checked by DCP. A
    ``manifest`` the caller already verified with `read_manifest` skips hashing the files again.
    """
    folder = Path(path)
    manifest = read_manifest(folder) if manifest is None else manifest  # given: verified by the caller
    state = _state(model, optimizer)
    with failures_explained("loading checkpoint", folder), _quiet_single_process():
        dcp.load(state, storage_reader=VerifiedReader(folder), planner=WeightsOnlyLoadPlanner(),
                 no_dist=not _distributed())
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
    return manifest, state["rng"]


def read_weights(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """The model weights of checkpoint ``path`` by parameter name (one process; for tests and tools)."""
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    folder = Path(path)
    read_manifest(folder)  # verifies every file before DCP opens any

    metadata = VerifiedReader(folder).read_metadata()
    state = {key: torch.empty(meta.size, dtype=meta.properties.dtype)
             for key, meta in metadata.state_dict_metadata.items()
             if key.startswith("model.") and isinstance(meta, TensorStorageMetadata)}
    nested = {"model": {key.removeprefix("model."): value for key, value in state.items()}}
    with failures_explained("loading checkpoint", folder), _quiet_single_process():
        dcp.load(nested, storage_reader=VerifiedReader(folder), planner=WeightsOnlyLoadPlanner(), no_dist=True)
    return nested["model"]
