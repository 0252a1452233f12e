"""Sizes and SHA-256 digests of files, for manifests that list what a folder holds (`gridgnn.data.prepared`)
and for the checks that every host reads the same bytes (`gridgnn.data.prepared_check`). Not collective."""

from __future__ import annotations

import hashlib
from pathlib import Path

_CHUNK = 1 << 22


def file_digest(path: Path) -> str:
    """SHA-256 of a file, read in 4 MiB pieces."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while piece := handle.read(_CHUNK):
            digest.update(piece)
    return digest.hexdigest()


def describe_files(folder: Path, names: list[str]) -> dict[str, dict]:
    """``{file name: {"bytes": size, "sha256": digest}}`` for the manifest's ``files`` entry."""
    return {name: {"bytes": (folder / name).stat().st_size, "sha256": file_digest(folder / name)}
            for name in sorted(names)}
