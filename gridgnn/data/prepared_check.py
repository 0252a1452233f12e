"""Is every host reading the same prepared graph? Fingerprints and file hashes of a `prepare_graph` folder.

``gridgnn prepare`` writes, in the manifest, the size and SHA-256 of every array file (``files``). The
folder's *fingerprint* is the SHA-256 of the manifest itself, so it covers every file's content. On a
multi-host run each host may read the folder from a shared file system or from its own copy: at set-up one
rank per host hashes the files against the manifest, and every rank compares its fingerprint with rank 0's.
A host whose copy is stale (another preparation) or different (a file changed or cut short) is refused with
one line that names it, before any training.
"""

from __future__ import annotations

import hashlib
import json
import stat
from pathlib import Path

import torch.distributed as dist

from gridgnn.data.file_digest import file_digest
from gridgnn.data.prepared import MANIFEST
from gridgnn.errors import DataError
from gridgnn.safe_files import regular_or_fail


def folder_fingerprint(folder: str | Path) -> str:
    """SHA-256 of the folder's manifest file (raises `DataError` when it cannot be read)."""
    path = Path(folder) / MANIFEST
    regular_or_fail(path, f"prepared graph '{folder}': file", DataError)  # a FIFO would block forever
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise DataError(f"prepared graph '{folder}': cannot read {MANIFEST} ({exc.strerror or exc})") from None


def verify_files(folder: str | Path) -> str | None:
    """None when every file the manifest lists has its recorded size and SHA-256, else what differs.
    Folders written before the manifest listed its files are not checked (None)."""
    root = Path(folder)
    try:
        files = json.loads((root / MANIFEST).read_text(encoding="utf-8")).get("files")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
        return f"{MANIFEST} cannot be read"
    if not isinstance(files, dict):
        return None
    for name, entry in sorted(files.items()):
        path = root / Path(name).name
        try:
            if not stat.S_ISREG(path.stat().st_mode):
                return f"{name} is not a regular file"
            if path.stat().st_size != entry["bytes"]:
                return f"{name} has {path.stat().st_size} bytes, the manifest says {entry['bytes']}"
            if file_digest(path) != entry["sha256"]:
                return f"{name} differs from the manifest (SHA-256)"
        except OSError as exc:
            return f"{name}: {exc.strerror or exc}"
        except (KeyError, TypeError):
            return f"{MANIFEST} lists {name} without its size and SHA-256"
    return None


def check_same_prepared_graph(folder: str | Path, host_labels: tuple[str, ...]) -> None:
    """Collective on the world: the first rank of each host verifies the files; every rank compares the
    fingerprint with rank 0's. Raises the same one-line `DataError` on every rank when a host differs."""
    rank = dist.get_rank() if dist.is_initialized() else 0
    fingerprint = folder_fingerprint(folder)
    first_on_host = host_labels.index(host_labels[rank]) == rank
    problem = verify_files(folder) if first_on_host else None
    mine = (fingerprint, problem, str(folder))
    everyone = [mine] * len(host_labels)
    if dist.is_initialized() and dist.get_world_size() > 1:
        from gridgnn.grid.peer_failures import peer_failures_explained

        with peer_failures_explained(f"comparing prepared graphs (rank {rank})"):
            dist.all_gather_object(everyone, mine)
    message = _first_difference(everyone, host_labels)
    if message is not None:
        raise DataError(message)


def _first_difference(everyone: list[tuple[str, str | None, str]], host_labels: tuple[str, ...]) -> str | None:
    reference = everyone[0][0]
    for rank, (fingerprint, problem, folder) in enumerate(everyone):
        where = f"prepared graph '{folder}' on host {host_labels[rank]} (rank {rank})"
        if problem is not None:
            return f"{where} is damaged or partly copied: {problem}; copy the folder again from the host that " \
                   "prepared it, or put it on a file system every host shares"
        if fingerprint != reference:
            return f"{where} is not the one rank 0 reads on host {host_labels[0]} (fingerprint " \
                   f"{fingerprint[:12]} vs {reference[:12]}): a stale or different copy; copy the folder again " \
                   "from the host that prepared it, or put it on a file system every host shares"
    return None
