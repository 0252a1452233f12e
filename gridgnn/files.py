"""File modes that follow the user's umask, for files made private by `tempfile` and then published.

`tempfile.mkstemp` creates 0600 files and `tempfile.mkdtemp` 0700 folders whatever the umask; a file renamed
into place from one (the metrics file, a calibrated profile, a prepared graph) must get the mode an ordinary
``open``/``mkdir`` would have given it, so colleagues on a shared cluster can read it when the umask allows.
Not collective.
"""

from __future__ import annotations

import os


def current_umask() -> int:
    """This process's umask (read by setting it and putting it back at once)."""
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def publish_mode(path: str | os.PathLike, *, folder: bool = False) -> None:
    """Give ``path`` the mode a new file (0666) or folder (0777) gets under the current umask."""
    os.chmod(path, (0o777 if folder else 0o666) & ~current_umask())
