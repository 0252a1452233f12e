"""Creating files without harming anything already there: every file gridgnn writes goes through here.

The rules, for the outputs a user names (model file, predictions, embeddings), the files gridgnn keeps
(checkpoint lock, best weights, prepared arrays) and their hidden partials:

* a target is a regular file or absent: a directory, FIFO, device, socket or symbolic link in its place is
  refused (`check_target`), never replaced, never written through, never opened (a FIFO would block);
* a new file is created with ``O_CREAT | O_EXCL | O_NOFOLLOW``, so a link planted at its name is never
  followed (`create_new`); an in-place file (the lock) is opened with ``O_NOFOLLOW`` and checked by `fstat`
  to be a regular file with one link before anything is written to it;
* a whole file is written to a hidden partial beside the target and renamed into place (`atomic_write`); the
  partial's name is short enough for any legal target name (`hidden_partial`);
* a failed write ("No space left on device") is one `ConfigError` naming the target, and the partial is
  removed (`write_failed`).

Not collective.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from gridgnn.errors import ConfigError

NAME_MAX = 255
"""Bytes in one file name on the file systems gridgnn runs on (ext4, xfs, tmpfs, NFS)."""

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def kind_of(mode: int) -> str:
    """``a directory``, ``a FIFO``, ... for an `os.stat` mode that is not a regular file's."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def existing_kind(path: str | os.PathLike) -> str | None:
    """None when ``path`` is absent or a regular file, else what it is (``a FIFO``, ...); links not followed.
    A path that cannot be looked at (its folder missing or a file) counts as absent: the write reports it."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    return None if stat.S_ISREG(mode) else kind_of(mode)


def check_target(path: str | os.PathLike, what: str) -> None:
    """Raise `ConfigError` (one line) when ``path`` exists and is not a regular file (links not followed)."""
    kind = existing_kind(path)
    if kind is not None:
        raise ConfigError(f"cannot write {what} '{path}': it is {kind}, not a regular file; gridgnn never "
                          "replaces or writes through one (name a new or regular file)")


def short_name(name: str, suffix: str, prefix: str = ".", reserve: int = 0) -> str:
    """``PREFIX + name + suffix`` when it fits in a file name with ``reserve`` bytes to spare (a random tail
    `tempfile` adds), else ``.gridgnn-<hash of name>`` + suffix."""
    full = f"{prefix}{name}{suffix}"
    if len(os.fsencode(full)) + reserve <= NAME_MAX:
        return full
    return f".gridgnn-{hashlib.sha256(os.fsencode(name)).hexdigest()[:24]}{suffix}"


def hidden_partial(target: str | os.PathLike, suffix: str = ".partial") -> Path:
    """``.NAME.partial`` beside ``target`` (a hashed short name when NAME is too long for that)."""
    path = Path(target)
    return path.with_name(short_name(path.name, suffix))


def remove_quietly(path: str | os.PathLike) -> None:
    """Unlink ``path`` (a file or a link, never what a link points to) if it is there."""
    try:
        os.unlink(path)
    except OSError:
        pass


def create_new(path: str | os.PathLike, *, replace_stale: bool = True, mode: int = 0o666) -> int:
    """A write-only descriptor of a file newly created at ``path`` (``O_EXCL | O_NOFOLLOW``; the umask applies).

    With ``replace_stale`` a file or link already at ``path`` (a partial left by a killed run) is unlinked
    first; a directory there is an error. Raises OSError."""
    try:
        there = os.lstat(path).st_mode
    except FileNotFoundError:
        there = None
    if there is not None and stat.S_ISDIR(there):
        raise IsADirectoryError(errno.EISDIR, f"a folder is in the way at '{path}'; remove it")
    if there is not None and replace_stale:
        os.unlink(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.open(path, flags, mode)


def open_regular(path: str | os.PathLike, flags: int, what: str, mode: int = 0o644) -> int:
    """A descriptor of the regular file at ``path`` (created when absent), opened without following a link
    and without blocking on a FIFO; raises `ConfigError` (one line) when ``path`` is anything else or a file
    with more than one link (writing to it would change another name's content). Other failures: OSError."""
    try:
        handle = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO, errno.ENODEV, errno.ENOTDIR):
            kind = existing_kind(path) or "not a regular file"
            raise ConfigError(f"cannot use {what} '{path}': it is {kind}, not a regular file; remove it") from None
        raise
    info = os.fstat(handle)
    problem = None if stat.S_ISREG(info.st_mode) else kind_of(info.st_mode)
    if problem is None and info.st_nlink != 1:
        problem = f"a file with {info.st_nlink} hard links"
    if problem is not None:
        os.close(handle)
        raise ConfigError(f"cannot use {what} '{path}': it is {problem}, not a regular file of its own; remove it")
    os.set_blocking(handle, True)
    return handle


def regular_or_fail(path: str | os.PathLike, what: str, error: type[Exception]) -> None:
    """Raise ``error`` (one line) unless ``path`` is a regular file (a link to one counts): a FIFO or device is
    never opened for reading (it could block forever or never end)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise error(f"{what} '{path}': {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise error(f"{what} '{path}' is {kind_of(mode)}, not a regular file")


def write_failed(what: str, path: str | os.PathLike, exc: OSError) -> ConfigError:
    """The one-line error of a failed write (``cannot write model file 'm.pt': No space left on device``)."""
    return ConfigError(f"cannot write {what} '{path}': {exc.strerror or exc}")


def publish(partial: Path, target: Path, what: str) -> None:
    """Rename the complete ``partial`` onto ``target``, checking again that ``target`` is a regular file or
    absent (something may have appeared there since the run began)."""
    check_target(target, what)
    os.replace(partial, target)


@contextmanager
def atomic_write(target: str | os.PathLike, what: str, *, mode: int = 0o666) -> Iterator[BinaryIO]:
    """A binary stream onto a new hidden partial of ``target``; on a clean exit it is flushed, synced and
    renamed into place. Any failure removes the partial; an OSError becomes `write_failed` naming ``target``.
    """
    path = Path(target)
    check_target(path, what)
    partial = hidden_partial(path)
    try:
        handle = create_new(partial, mode=mode)
    except OSError as exc:
        raise write_failed(what, path, exc) from None
    try:
        with os.fdopen(handle, "wb") as stream:
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
        publish(partial, path, what)
    except OSError as exc:
        remove_quietly(partial)
        raise write_failed(what, path, exc) from None
    except BaseException:
        remove_quietly(partial)
        raise


def partial_folder(target: Path) -> Path:
    """A new, empty sibling of ``target`` for a folder written whole and then renamed onto ``target``
    (created by ``mkdtemp``, then given the permissions ``mkdir`` would: the umask's)."""
    import tempfile

    from gridgnn.files import publish_mode

    partial = Path(tempfile.mkdtemp(prefix=short_name(target.name, ".", reserve=8), dir=target.parent))
    publish_mode(partial, folder=True)
    return partial
