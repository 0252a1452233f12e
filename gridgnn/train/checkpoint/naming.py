"""Where checkpoints live: the folder names of a checkpoint directory (pure path logic, not collective).

Layout of a checkpoint directory ``DIR`` (what each folder holds: `gridgnn.train.checkpoint.store`)::

    DIR/epoch-00000010/            one complete checkpoint, taken after epoch 10
    DIR/.partial-epoch-00000010/   a save in progress; never read, removed by the next save
    DIR/.replaced-epoch-00000010/  an older copy of the same epoch, moved aside while it is replaced
"""

from __future__ import annotations

import os
import re
from pathlib import Path

_NAME = re.compile(r"^epoch-(\d{8})$")
PARTIAL_GLOB = ".partial-epoch-*"
"""The folders of saves a crash interrupted: never complete, never read."""


def checkpoint_path(directory: str | os.PathLike, epoch: int) -> Path:
    """``DIR/epoch-%08d``: the folder of the checkpoint taken after ``epoch``."""
    return Path(directory) / f"epoch-{epoch:08d}"


def partial_path(final: Path) -> Path:
    """``DIR/.partial-epoch-%08d``: where the save of checkpoint folder ``final`` is written first."""
    return final.parent / f".partial-{final.name}"


def replaced_path(final: Path) -> Path:
    """``DIR/.replaced-epoch-%08d``: where an older copy of ``final`` waits while the new one moves in."""
    return final.parent / f".replaced-{final.name}"


def epoch_of(folder: Path) -> int | None:
    """The epoch a checkpoint folder's name says (``epoch-00000010`` -> 10), or None for another name."""
    match = _NAME.match(folder.name)
    return int(match.group(1)) if match else None


def list_checkpoints(directory: str | os.PathLike) -> list[tuple[int, Path]]:
    """(epoch, folder) of every complete checkpoint in ``directory``, oldest first (partial saves excluded)."""
    root = Path(directory)
    if not root.is_dir():
        return []
    found = [(epoch, entry) for entry in root.iterdir()
             if entry.is_dir() and (epoch := epoch_of(entry)) is not None]
    return sorted(found)


def latest_checkpoint(directory: str | os.PathLike) -> Path | None:
    """The newest complete checkpoint folder in ``directory``, or None when there is none."""
    found = list_checkpoints(directory)
    return found[-1][1] if found else None
