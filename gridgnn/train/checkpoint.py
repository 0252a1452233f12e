"""Resumable training checkpoints: `torch.distributed.checkpoint` (DCP) files, made atomic and verifiable.

Layout of a checkpoint folder ``DIR``::

    DIR/epoch-00000010/            one complete checkpoint, taken after epoch 10
        .metadata, __0_0.distcp     DCP's files: model weights, Adam state (moments, step, param groups),
                                    torch RNG state
        gridgnn-checkpoint.json     the manifest, written last: format, epoch, run fingerprint, resolved
                                    configuration, history (epoch records, communication; schema in
                                    `gridgnn.train.history_schema`), and the size and SHA-256 of every
                                    other file; NaN and infinities of a diverged run are null there,
                                    listed under "nonfinite" (`gridgnn.train.nonfinite`)
    DIR/.partial-epoch-00000010/   a save in progress; never read, removed by the next save

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

import hashlib
import io
import json
import os
import pickle
import re
import shutil
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

from gridgnn.config import TrainConfig
from gridgnn.data.graph import Graph
from gridgnn.data.prepared import PreparedGraph, graph_digest
from gridgnn.errors import CheckpointError, CollectiveError
from gridgnn.grid.peer_failures import is_peer_failure
from gridgnn.train.history_schema import history_problem
from gridgnn.train.nonfinite import decode_nonfinite, encode_nonfinite

MANIFEST = "gridgnn-checkpoint.json"
FORMAT = "gridgnn-checkpoint/1"
_NAME = re.compile(r"^epoch-(\d{8})$")
_MAX_MANIFEST_BYTES = 64 << 20
_HASH_CHUNK = 1 << 20


def checkpoint_path(directory: str | os.PathLike, epoch: int) -> Path:
    """``DIR/epoch-%08d``: the folder of the checkpoint taken after ``epoch``."""
    return Path(directory) / f"epoch-{epoch:08d}"


def list_checkpoints(directory: str | os.PathLike) -> list[tuple[int, Path]]:
    """(epoch, folder) of every complete checkpoint in ``directory``, oldest first (partial saves excluded)."""
    root = Path(directory)
    if not root.is_dir():
        return []
    found = [(int(match.group(1)), entry) for entry in root.iterdir()
             if entry.is_dir() and (match := _NAME.match(entry.name))]
    return sorted(found)


def latest_checkpoint(directory: str | os.PathLike) -> Path | None:
    """The newest complete checkpoint folder in ``directory``, or None when there is none."""
    found = list_checkpoints(directory)
    return found[-1][1] if found else None


# --------------------------------------------------------------------------------------------------------
# What a checkpoint belongs to


def run_fingerprint(config: TrainConfig, graph: Graph | PreparedGraph) -> dict:
    """What a checkpoint must share with the run that resumes it: the dataset (sizes and a digest of the
    adjacency structure, labels and feature shape), the model (its kind, ``gcn``/``sage``/``gin``/``gat``, its widths
    and options) and the optimizer settings.

    The grid (algorithm, P, replication, shape), the product order and the number of epochs may change.
    """
    digest = graph.digest if isinstance(graph, PreparedGraph) else graph_digest(graph)
    return {
        "dataset": {"name": graph.name, "num_nodes": graph.num_nodes, "num_edges": graph.num_edges,
                    "num_features": graph.num_features, "num_classes": graph.num_classes,
                    "directed": graph.directed, "feature_normalization": graph.meta.get("feature_normalization"),
                    "digest": digest},
        "model": {"kind": config.model, "layers": config.layers, "hidden": config.hidden,
                  "dropout": config.dropout, "seed": config.seed, "sage_normalize": config.sage_normalize,
                  "gin_eps": config.gin_eps, "gin_train_eps": config.gin_train_eps, "heads": config.heads,
                  "output_heads": config.output_heads, "attn_dropout": config.attn_dropout},
        "optimizer": {"lr": config.lr, "weight_decay": config.weight_decay},
    }


_BEFORE_MODEL_KINDS = {("model", "kind"): "gcn", ("model", "sage_normalize"): False, ("model", "gin_eps"): 0.0,
                       ("model", "gin_train_eps"): False, ("model", "heads"): 1, ("model", "output_heads"): 1,
                       ("model", "attn_dropout"): 0.0}
"""What a checkpoint written before model kinds existed (no such fields) holds: a GCN."""


def check_compatible(manifest: dict, current: dict, path: Path) -> None:
    """Raise `CheckpointError` naming the first field where the checkpoint's fingerprint differs."""
    saved = manifest["fingerprint"]
    for group, fields in current.items():
        recorded = saved.get(group)
        if not isinstance(recorded, dict):
            raise CheckpointError(f"checkpoint '{path}': {MANIFEST} is malformed (fingerprint {group})")
        for name, value in fields.items():
            before = recorded.get(name, _BEFORE_MODEL_KINDS.get((group, name)))
            if before != value:
                what = "content" if name == "digest" else name
                raise CheckpointError(
                    f"checkpoint '{path}' belongs to another run: {group} {what} is {_show(before)} there and "
                    f"{_show(value)} here (the grid, order and epochs may change; the data and model may not)")


def _show(value: object) -> str:
    return f"{value[:12]}…" if isinstance(value, str) and len(value) == 64 else repr(value)


# --------------------------------------------------------------------------------------------------------
# Reading and verifying


def read_manifest(path: str | os.PathLike) -> dict:
    """The manifest of checkpoint folder ``path`` after checking every file it lists (size and SHA-256).

    Raises `CheckpointError` when the manifest is missing, unreadable, of another format, or a file is
    missing, truncated or altered.
    """
    folder = Path(path)
    where = f"checkpoint '{folder}'"
    manifest_file = folder / MANIFEST
    if not folder.is_dir():
        raise CheckpointError(f"{where} is not a folder")
    if not manifest_file.is_file():
        raise CheckpointError(f"{where} has no {MANIFEST}: it is incomplete or not a gridgnn checkpoint")
    if manifest_file.stat().st_size > _MAX_MANIFEST_BYTES:
        raise CheckpointError(f"{where}: {MANIFEST} is larger than {_MAX_MANIFEST_BYTES >> 20} MiB")
    try:
        manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise CheckpointError(f"{where}: {MANIFEST} is not valid JSON ({exc})") from None
    if isinstance(manifest, dict):
        try:
            manifest = decode_nonfinite(manifest)  # NaN and infinities of a diverged run's history
        except (ValueError, TypeError) as exc:
            raise CheckpointError(f"{where}: {MANIFEST} is malformed ({exc})") from None
    _check_manifest_shape(manifest, where)
    match = _NAME.match(folder.name)
    if match and int(match.group(1)) != manifest["epoch"]:
        raise CheckpointError(f"{where}: the folder name says epoch {int(match.group(1))}, the manifest "
                              f"{manifest['epoch']}")
    for name, entry in manifest["files"].items():
        file = folder / name
        if not file.is_file():
            raise CheckpointError(f"{where} is damaged: file {name} is missing")
        size = file.stat().st_size
        if size != entry["bytes"]:
            raise CheckpointError(f"{where} is damaged: {name} has {size} bytes, the manifest says "
                                  f"{entry['bytes']} (truncated or altered)")
        if _sha256(file) != entry["sha256"]:
            raise CheckpointError(f"{where} is damaged: {name} does not match its SHA-256 (altered)")
    return manifest


def _check_manifest_shape(manifest: object, where: str) -> None:
    """The manifest's fields exist and have the right types (it is data from disk)."""
    def bad(what: str) -> CheckpointError:
        return CheckpointError(f"{where}: {MANIFEST} is malformed ({what})")

    if not isinstance(manifest, dict):
        raise bad("not an object")
    if manifest.get("format") != FORMAT:
        raise CheckpointError(f"{where}: unknown checkpoint format {manifest.get('format')!r} "
                              f"(this gridgnn reads {FORMAT})")
    epoch = manifest.get("epoch")
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 1:
        raise bad("epoch")
    files = manifest.get("files")
    if not isinstance(files, dict) or ".metadata" not in files:
        raise bad("files")
    for name, entry in files.items():
        if not isinstance(name, str) or Path(name).name != name or name in ("", ".", ".."):
            raise bad(f"file name {name!r}")
        if (not isinstance(entry, dict) or not isinstance(entry.get("bytes"), int)
                or not isinstance(entry.get("sha256"), str)):
            raise bad(f"entry of {name}")
    if not isinstance(manifest.get("fingerprint"), dict):
        raise bad("fingerprint")
    problem = history_problem(manifest.get("history"), epoch)
    if problem is not None:
        raise bad(problem)


def _sha256(file: Path) -> str:
    digest = hashlib.sha256()
    with file.open("rb") as stream:
        while chunk := stream.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _metadata_globals() -> dict[tuple[str, str], object]:
    """The only globals DCP's ``.metadata`` pickle may name: its own metadata classes, torch sizes, dtypes,
    layouts and paths."""
    from torch.distributed.checkpoint import filesystem, metadata

    allowed: dict[tuple[str, str], object] = {
        ("torch", "Size"): torch.Size,
        ("torch.serialization", "_get_layout"): torch.serialization._get_layout,
        ("torch.distributed.checkpoint.filesystem", "_StorageInfo"): filesystem._StorageInfo,
        ("collections", "OrderedDict"): __import__("collections").OrderedDict,
        ("pathlib", "PosixPath"): Path,
        ("pathlib", "Path"): Path,
    }
    for name in ("Metadata", "TensorStorageMetadata", "TensorProperties", "_MEM_FORMAT_ENCODING",
                 "ChunkStorageMetadata", "BytesStorageMetadata", "MetadataIndex", "StorageMeta"):
        if hasattr(metadata, name):
            allowed[("torch.distributed.checkpoint.metadata", name)] = getattr(metadata, name)
    for name in dir(torch):
        if isinstance(getattr(torch, name, None), torch.dtype):
            allowed[("torch", name)] = getattr(torch, name)
    return allowed


class _MetadataUnpickler(pickle.Unpickler):
    def __init__(self, stream: io.BufferedIOBase) -> None:
        super().__init__(stream)
        self._allowed = _metadata_globals()

    def find_class(self, module: str, name: str) -> object:
        try:
            return self._allowed[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"forbidden global {module}.{name} in checkpoint metadata") from None


class _VerifiedReader(FileSystemReader):
    """DCP's file reader with an allow-list unpickler for ``.metadata`` (DCP uses plain `pickle.load`)."""

    def read_metadata(self, *args: Any, **kwargs: Any):
        from torch.distributed.checkpoint.metadata import Metadata, StorageMeta

        rank = kwargs.get("rank")
        with open(self._get_metadata_path(rank), "rb") as stream:
            metadata = _MetadataUnpickler(stream).load()
        if not isinstance(metadata, Metadata):
            raise pickle.UnpicklingError("checkpoint metadata is not DCP metadata")
        for info in (metadata.storage_data or {}).values():  # data files must lie in the checkpoint folder
            relative = str(getattr(info, "relative_path", ""))
            if Path(relative).name != relative or relative in ("", ".", ".."):
                raise pickle.UnpicklingError(f"checkpoint metadata points outside its folder: {relative!r}")
        if getattr(metadata, "storage_meta", None) is None:
            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata


class _WeightsOnlyLoadPlanner(DefaultLoadPlanner):
    """DCP's load planner, but non-tensor entries (optimizer param groups) load with ``weights_only=True``."""

    def load_bytes(self, read_item, value: io.BytesIO) -> None:
        # Same placement as DefaultLoadPlanner.load_bytes, only the unpickling is restricted.
        from torch.distributed.checkpoint._nested_dict import set_element

        obj = torch.load(value, weights_only=True)
        if self.flatten_state_dict:
            set_element(self.original_state_dict, self.mappings[read_item.dest_index.fqn], obj)
        else:
            self.state_dict[read_item.dest_index.fqn] = obj


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


def _causes(error: BaseException) -> list[BaseException]:
    """The per-rank exceptions inside DCP's `CheckpointException`, or the error itself."""
    if isinstance(error, CheckpointException):
        return [pair[0] for pair in error.failures.values()] or [error]
    return [error]


@contextmanager
def _failures_explained(what: str, folder: Path):
    """Turn what goes wrong inside a checkpoint step into one of our one-line errors: `CollectiveError`
    (exit 3) when a peer stopped answering, else `CheckpointError` (exit 2) naming the folder."""
    try:
        yield
    except (CheckpointError, CollectiveError):
        raise
    except (CheckpointException, RuntimeError, OSError, ValueError, KeyError, pickle.UnpicklingError) as error:
        causes = _causes(error)
        text = " ".join(str(causes[0]).split())[:300]
        first = f"{type(causes[0]).__name__}: {text}" if text else type(causes[0]).__name__
        if any(is_peer_failure(cause) for cause in causes):
            raise CollectiveError(f"{what} '{folder}' failed: another worker stopped or did not answer in "
                                  f"time ({first})") from None
        raise CheckpointError(f"{what} '{folder}' failed: {first}") from None


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
    with _failures_explained("saving checkpoint", final):
        return _save(root, final, epoch, model, optimizer, manifest, keep)


def _save(root: Path, final: Path, epoch: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
          manifest: dict, keep: int) -> Path:
    partial = root / f".partial-{final.name}"
    if _is_writer():
        root.mkdir(parents=True, exist_ok=True)
        for stale in root.glob(".partial-epoch-*"):  # saves a crash interrupted: never complete, never read
            shutil.rmtree(stale, ignore_errors=True)
    _barrier()
    with _quiet_single_process():
        dcp.save(_state(model, optimizer), storage_writer=FileSystemWriter(partial), no_dist=not _distributed())
    if _is_writer():
        files = {entry.name: {"bytes": entry.stat().st_size, "sha256": _sha256(entry)}
                 for entry in sorted(partial.iterdir()) if entry.is_file()}
        document = {"format": FORMAT, "epoch": epoch, **manifest, "files": files}
        _write_manifest(partial / MANIFEST, encode_nonfinite(document))
        replaced = root / f".replaced-{final.name}"
        if final.exists():  # the same epoch saved again (a resumed run): move the old copy aside first,
            shutil.rmtree(replaced, ignore_errors=True)  # so that a complete copy exists at every moment
            os.rename(final, replaced)
        os.rename(partial, final)
        _fsync_folder(root)
        shutil.rmtree(replaced, ignore_errors=True)
        for _, old in list_checkpoints(root)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    _barrier()
    return final


def _write_manifest(path: Path, document: dict) -> None:
    with open(path, "w", encoding="utf-8") as stream:
        json.dump(document, stream, indent=1, allow_nan=False)
        stream.write("\n")
        stream.flush()
        os.fsync(stream.fileno())


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
    with _failures_explained("loading checkpoint", folder), _quiet_single_process():
        dcp.load(state, storage_reader=_VerifiedReader(folder), planner=_WeightsOnlyLoadPlanner(),
                 no_dist=not _distributed())
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
    return manifest, state["rng"]


def read_weights(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """The model weights of checkpoint ``path`` by parameter name (one process; for tests and tools)."""
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    folder = Path(path)
    read_manifest(folder)  # verifies every file before DCP opens any

    metadata = _VerifiedReader(folder).read_metadata()
    state = {key: torch.empty(meta.size, dtype=meta.properties.dtype)
             for key, meta in metadata.state_dict_metadata.items()
             if key.startswith("model.") and isinstance(meta, TensorStorageMetadata)}
    nested = {"model": {key.removeprefix("model."): value for key, value in state.items()}}
    with _failures_explained("loading checkpoint", folder), _quiet_single_process():
        dcp.load(nested, storage_reader=_VerifiedReader(folder), planner=_WeightsOnlyLoadPlanner(), no_dist=True)
    return nested["model"]
