"""A checkpoint's manifest, ``gridgnn-checkpoint.json``: writing it (the size and SHA-256 of every file)
and reading it back with every file verified (not collective).

The manifest is written last, into the partial folder, so that a folder with a manifest is complete. It
holds: format, epoch, run fingerprint (`gridgnn.train.checkpoint.fingerprint`), resolved configuration,
history (epoch records, communication; schema in `gridgnn.train.checkpoint.history_schema`), and the size and SHA-256
of every other file; NaN and infinities of a diverged run are null there, listed under "nonfinite"
(`gridgnn.train.loop.nonfinite`).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from gridgnn.errors import CheckpointError
from gridgnn.train.checkpoint.history_schema import history_problem
from gridgnn.train.checkpoint.naming import epoch_of
from gridgnn.train.loop.nonfinite import decode_nonfinite, encode_nonfinite

MANIFEST = "gridgnn-checkpoint.json"
FORMAT = "gridgnn-checkpoint/1"
_MAX_MANIFEST_BYTES = 64 << 20
_HASH_CHUNK = 1 << 20


def write_manifest(folder: Path, epoch: int, entries: dict) -> None:
    """Hash every file of ``folder`` and write its manifest there, fsynced: ``entries`` (fingerprint,
    config, history; JSON-ready) plus format, epoch and the files' sizes and SHA-256."""
    files = {entry.name: {"bytes": entry.stat().st_size, "sha256": file_sha256(entry)}
             for entry in sorted(folder.iterdir()) if entry.is_file()}
    document = encode_nonfinite({"format": FORMAT, "epoch": epoch, **entries, "files": files})
    with open(folder / MANIFEST, "w", encoding="utf-8") as stream:
        json.dump(document, stream, indent=1, allow_nan=False)
        stream.write("\n")
        stream.flush()
        os.fsync(stream.fileno())


def read_manifest(path: str | os.PathLike) -> dict:
    """The manifest of checkpoint folder ``path`` after checking every file it lists (size and SHA-256).

    Raises `CheckpointError` when the manifest is missing, unreadable, of another format, or a file is
    missing, truncated or altered.
    """
    folder = Path(path)
    where = f"checkpoint '{folder}'"
    manifest = _load_manifest(folder, where)
    _check_manifest_shape(manifest, where)
    named = epoch_of(folder)
    if named is not None and named != manifest["epoch"]:
        raise CheckpointError(f"{where}: the folder name says epoch {named}, the manifest {manifest['epoch']}")
    for name, entry in manifest["files"].items():
        _check_file(folder / name, name, entry, where)
    return manifest


def _load_manifest(folder: Path, where: str) -> object:
    """The decoded JSON of ``folder``'s manifest (NaN and infinities restored), not yet shape-checked."""
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
    return manifest


def _check_file(file: Path, name: str, entry: dict, where: str) -> None:
    """``file`` exists with the size and SHA-256 its manifest ``entry`` records."""
    if not file.is_file():
        raise CheckpointError(f"{where} is damaged: file {name} is missing")
    size = file.stat().st_size
    if size != entry["bytes"]:
        raise CheckpointError(f"{where} is damaged: {name} has {size} bytes, the manifest says "
                              f"{entry['bytes']} (truncated or altered)")
    if file_sha256(file) != entry["sha256"]:
        raise CheckpointError(f"{where} is damaged: {name} does not match its SHA-256 (altered)")


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


def file_sha256(file: Path) -> str:
    """The SHA-256 of ``file`` in hex, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with file.open("rb") as stream:
        while chunk := stream.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
