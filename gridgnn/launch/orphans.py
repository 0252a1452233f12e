"""Nothing outlives the local launcher: not its workers, not the folder of the graph it prepared.

A worker started by `gridgnn.launch.local` finds the launcher's pid in its run spec (`gridgnn.run_spec`). As
it starts (before importing torch) it asks Linux to SIGKILL it when its parent dies (``prctl(PR_SET_PDEATHSIG)``)
and then checks that its parent is still the launcher, which covers a launcher that died before the request.
Elsewhere the request is skipped (the launcher's own SIGTERM/SIGHUP handling still stops the workers).

The launcher's prepared-graph folder (``<tmp>/gridgnn-prepared-*``) holds a marker ``gridgnn-launcher.json``
with the launcher's pid, host and process start time. A launcher killed by SIGKILL cannot remove its folder,
so every launch first removes the folders whose marker names a launcher on this host that is gone. Only
folders with that marker, owned by this user, are ever removed. Not collective; imports no torch.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
from pathlib import Path

PREPARED_PREFIX = "gridgnn-prepared-"
"""Name prefix of the launcher's prepared-graph folders in the temporary directory."""
MARKER = "gridgnn-launcher.json"
"""The marker file inside a prepared-graph folder: ``{"pid", "host", "start_time"}`` of its launcher."""
_PR_SET_PDEATHSIG = 1
EXIT_LAUNCHER_GONE = 3
"""A worker's status when its launcher was gone before it started (nobody reads it)."""


def die_with_launcher(launcher: int | None) -> None:
    """In a worker of the local launcher whose pid is ``launcher``: be killed when the launcher dies, and
    exit at once if it is already gone. Does nothing with None (any other process)."""
    if launcher is None:
        return
    set_parent_death_signal(signal.SIGKILL)
    if os.getppid() != launcher:  # the launcher died before the request above: we were re-parented
        os._exit(EXIT_LAUNCHER_GONE)


def set_parent_death_signal(sig: int) -> bool:
    """Ask Linux to send ``sig`` to this process when its parent dies; False where that is not available."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def process_start_time(pid: int) -> str | None:
    """The start time of process ``pid`` in clock ticks since boot (/proc), or None when unknown."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def mark_prepared_folder(folder: str | os.PathLike) -> None:
    """Write the marker naming this process as the launcher that owns ``folder``."""
    marker = {"pid": os.getpid(), "host": socket.gethostname(), "start_time": process_start_time(os.getpid())}
    (Path(folder) / MARKER).write_text(json.dumps(marker) + "\n", encoding="utf-8")


def launcher_alive(marker: dict) -> bool:
    """True when the launcher a marker names may still run: another host's (not ours to judge), or a live
    process with that pid and, where /proc tells, the same start time (not a reused pid)."""
    pid = marker.get("pid")
    if marker.get("host") != socket.gethostname():
        return True
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    started = process_start_time(pid)
    return started is None or marker.get("start_time") in (None, started)


def remove_orphaned_folders(root: str | os.PathLike | None = None) -> list[Path]:
    """Remove the prepared-graph folders in ``root`` (default: the temporary directory) whose launcher is
    gone; returns them. Only this user's folders named ``gridgnn-prepared-*`` that hold a readable marker."""
    removed = []
    for folder in Path(root or tempfile.gettempdir()).glob(f"{PREPARED_PREFIX}*"):
        marker = _read_marker(folder)
        if marker is not None and not launcher_alive(marker):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def _read_marker(folder: Path) -> dict | None:
    try:
        if folder.is_symlink() or not folder.is_dir() or folder.stat().st_uid != os.getuid():
            return None
        marker = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) else None
