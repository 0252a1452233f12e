"""The hostile-output corpus of `test_hostile_outputs.py` (issue 40, classes 1-4): what gridgnn writes must
never harm what is already there.

1. ``outside``: a file outside the run destroyed: links, hard links, FIFOs and folders planted where gridgnn
   creates its lock, partials and prepared arrays.
2. ``merged``: outputs silently corrupted: CSV parts left by other runs, a file another live run is writing,
   a prepared folder whose vertex order or ids are not what they claim.
3. ``replaced``: outputs silently replacing things: a device, FIFO or link in an output's place, two outputs
   (or an output and an input) on one path.
4. ``crash``: full disks (a real small tmpfs; skipped where mounting is not allowed), FIFOs in prepared folders,
   names at the file system's limit.

A case is `Case`: ``build(tmp)`` makes the scene in the case's folder and returns the command line;
``keyword``: the one error line must contain it (exit status 2), or None: the run must succeed (exit 0);
``check(tmp)``: what must hold afterwards (the victim intact, nothing left behind); ``process``: run as a
real process (a hang or a SIGBUS must not take the test session down); ``slow``: starts workers (``-m slow``).
"""

from __future__ import annotations

import fcntl
import os
import stat
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

SMALL = "csbm:nodes=300"
"""300 vertices, 5 classes, 32 features: every output is a few KiB."""
PRECIOUS = "precious\n"
CLASSES = {1: "outside", 2: "merged", 3: "replaced", 4: "crash"}


@dataclass(frozen=True)
class Case:
    id: str
    cls: int
    build: Callable[[Path], list[str]]
    keyword: str | None
    check: Callable[[Path], None]
    process: bool = False
    slow: bool = False


def _train(*flags: str) -> list[str]:
    return ["train", "--dataset", SMALL, "--epochs", "2", "--quiet", *flags]


def _victim(tmp: Path) -> Path:
    victim = tmp / "victim.txt"
    victim.write_text(PRECIOUS)
    return victim


def _victim_intact(tmp: Path) -> None:
    victim = tmp / "victim.txt"
    assert victim.read_text() == PRECIOUS and not victim.is_symlink(), "a file outside the run was changed"


def _no_hidden(folder: Path) -> list[str]:
    """Names of hidden files left in ``folder`` (partials, parts)."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def _clean(*names: str) -> Callable[[Path], None]:
    """The case folder holds exactly ``names`` (besides the victim): nothing partial is left."""
    def check(tmp: Path) -> None:
        left = sorted(p.name for p in tmp.iterdir()
                      if p.name not in ("victim.txt", "model.pt", "prep", "fs", "sub"))
        assert left == sorted(names), f"left behind: {left}"
    return check


def _both(*checks: Callable[[Path], None]) -> Callable[[Path], None]:
    def check(tmp: Path) -> None:
        for each in checks:
            each(tmp)
    return check


# --- class 1: a file outside the run destroyed --------------------------------------------------------------


def _lock(kind: str) -> Callable[[Path], list[str]]:
    """``ck/.gridgnn-lock`` planted as ``kind``: symlink / dangling / hardlink (to the victim), dir, fifo."""
    def build(tmp: Path) -> list[str]:
        victim, ck = _victim(tmp), tmp / "ck"
        ck.mkdir()
        lock = ck / ".gridgnn-lock"
        if kind == "symlink":
            lock.symlink_to("../victim.txt")
        elif kind == "dangling":
            lock.symlink_to("../created-by-lock.txt")
        elif kind == "hardlink":
            os.link(victim, lock)
        elif kind == "dir":
            lock.mkdir()
        elif kind == "fifo":
            os.mkfifo(lock)
        return _train("--checkpoint-dir", str(ck))
    return build


def _not_created(name: str) -> Callable[[Path], None]:
    def check(tmp: Path) -> None:
        assert not (tmp / name).exists(), f"{name} was created through a link"
    return check


def _planted_partial(partial: str, *flags: str, link_to: str = "../victim.txt") -> Callable[[Path], list[str]]:
    """A link named like a partial gridgnn writes (in ``tmp``, or ``ck/`` when ``partial`` starts so)."""
    def build(tmp: Path) -> list[str]:
        _victim(tmp)
        where = tmp / partial
        where.parent.mkdir(exist_ok=True)
        where.symlink_to(link_to if "/" in partial else "victim.txt")
        return _train(*[flag.replace("{tmp}", str(tmp)) for flag in flags])
    return build


def _partial_folder_link(tmp: Path) -> list[str]:
    """``ck/.partial-epoch-0000000N`` is a link to a folder outside the run: DCP must not write into it."""
    (tmp / "outside").mkdir()
    (tmp / "ck").mkdir()
    for epoch in (1, 2):  # whichever epoch the run saves
        (tmp / "ck" / f".partial-epoch-{epoch:08d}").symlink_to("../outside")
    return _train("--checkpoint-dir", str(tmp / "ck"))


def _outside_empty(tmp: Path) -> None:
    assert list((tmp / "outside").iterdir()) == [], "a checkpoint was written outside the run"


def _prepared_over_link(tmp: Path) -> list[str]:
    """`prepare_graph` into an existing folder whose labels.npy is a link to the victim (Python API)."""
    _victim(tmp)
    (tmp / "api").mkdir()
    (tmp / "api" / "labels.npy").symlink_to("../victim.txt")
    return ["@prepare", str(tmp / "api")]


# --- class 2: outputs silently corrupted ---------------------------------------------------------------------


def _old_parts(tmp: Path, rows: tuple[int, ...] = (0, 150)) -> list[str]:
    """Parts a killed run left under the names of the previous release (``.p.csv.partial.<first row>``)."""
    for row in rows:
        (tmp / f".p.csv.partial.{row:015d}").write_text("".join(f"{9000 + i},0,1,0,0,0,0\n" for i in range(100)))
    return _train("--predictions-out", str(tmp / "p.csv"))


def _old_parts_then_grid(tmp: Path) -> list[str]:
    """The issue's example: parts a killed 3-process ``predict`` left, then a clean ``predict --nprocs 2``."""
    _old_parts(tmp, (0, 100, 200))
    return ["predict", "--model", str(tmp / "model.pt"), "--dataset", SMALL, "--algo", "1d", "--nprocs", "2",
            "--quiet", "--predictions-out", str(tmp / "p.csv")]


def _killed_run_leftovers(tmp: Path) -> list[str]:
    """A killed run's partial and parts under today's names (the partial unlocked: its holder is gone)."""
    (tmp / ".p.csv.partial").write_text("node,predicted\n")
    stem = _stem("p.csv")
    for row in (0, 150):
        (tmp / f"{stem}.0123456789abcdef.{row:015d}.part").write_text("9999,0,1,0,0,0,0\n" * 150)
    return _train("--predictions-out", str(tmp / "p.csv"))


def _stem(name: str) -> str:
    import hashlib

    return f".gridgnn-{hashlib.sha256(name.encode()).hexdigest()[:16]}"


def _csv_rows_exactly(name: str, rows: int) -> Callable[[Path], None]:
    def check(tmp: Path) -> None:
        lines = (tmp / name).read_text().splitlines()
        ids = [int(line.split(",")[0]) for line in lines[1:]]
        assert len(lines) == rows + 1 and sorted(ids) == list(range(rows)), f"{len(lines) - 1} rows"
    return check


HELD: list = []
"""Descriptors the corpus holds open for the length of a case (a live run's claim)."""


def _live_writer(tmp: Path) -> list[str]:
    """Another run is writing p.npy now: its partial exists and is locked."""
    handle = os.open(tmp / ".p.npy.partial", os.O_RDWR | os.O_CREAT, 0o644)
    os.write(handle, b"the other run's rows")
    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    HELD.append(handle)
    return _train("--predictions-out", str(tmp / "p.npy"))


def _other_run_intact(tmp: Path) -> None:
    assert (tmp / ".p.npy.partial").read_bytes() == b"the other run's rows" and not (tmp / "p.npy").exists()


def _prepared(change: Callable[[Path], None]) -> Callable[[Path], list[str]]:
    """A prepared folder (random order) with one array replaced, then ``predict`` with a saved model."""
    def build(tmp: Path) -> list[str]:
        change(tmp / "prep")
        return ["predict", "--model", str(tmp / "model.pt"), "--dataset", str(tmp / "prep"),
                "--predictions-out", str(tmp / "p.npy")]
    return build


def _order(values: Callable[[int], np.ndarray]) -> Callable[[Path], None]:
    return lambda prep: np.save(prep / "reorder_order.npy", values(300))


def _ids(values: Callable[[int], np.ndarray]) -> Callable[[Path], None]:
    return lambda prep: np.save(prep / "vertex_ids.npy", values(300))


def _swap_one(n: int) -> np.ndarray:
    order = np.arange(n, dtype=np.int64)
    order[5] = order[6]
    return order


# --- class 3: outputs silently replacing things --------------------------------------------------------------


def _device(path: Path) -> None:
    """A character device like /dev/null at ``path`` (root only; else the case is skipped)."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except OSError:
        pytest.skip("cannot make a character device here (not root)")


def _special_output(kind: str, flag: str, name: str) -> Callable[[Path], list[str]]:
    def build(tmp: Path) -> list[str]:
        path = tmp / name
        if kind == "device":
            _device(path)
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "link":
            _victim(tmp)
            path.symlink_to("victim.txt")
        return _train(flag, str(path))
    return build


def _calibrate_onto(kind: str, name: str) -> Callable[[Path], list[str]]:
    """``gridgnn calibrate --out`` onto a link or FIFO: refused before measuring."""
    def build(tmp: Path) -> list[str]:
        _special_output(kind, "--out", name)(tmp)
        return ["calibrate", "--nprocs", "2", "--repeats", "1", "--out", str(tmp / name)]
    return build


def _still(kind: str, name: str) -> Callable[[Path], None]:
    test = {"device": stat.S_ISCHR, "fifo": stat.S_ISFIFO, "link": stat.S_ISLNK}[kind]

    def check(tmp: Path) -> None:
        assert test(os.lstat(tmp / name).st_mode), f"{name} was replaced"
        assert _no_hidden(tmp) == [], _no_hidden(tmp)
        if kind == "link":
            _victim_intact(tmp)
    return check


def _pair(*flags_and_names: str) -> Callable[[Path], list[str]]:
    """Outputs given as flag, name pairs ({tmp} in a name is the case folder)."""
    def build(tmp: Path) -> list[str]:
        (tmp / "sub").mkdir()
        pairs = list(flags_and_names)
        return _train(*[part.replace("{tmp}", str(tmp)) for part in pairs])
    return build


def _predict_over(target: str) -> Callable[[Path], list[str]]:
    """``predict`` writing its predictions onto one of its own inputs (the model, a prepared array)."""
    def build(tmp: Path) -> list[str]:
        model = tmp / "model.npy"
        model.write_bytes((tmp / "model.pt").read_bytes())
        out = {"model": model, "labels": tmp / "prep" / "labels.npy"}[target]
        return ["predict", "--model", str(model), "--dataset", str(tmp / "prep"), "--algo", "1d",
                "--predictions-out", str(out)]
    return build


def _inputs_intact(tmp: Path) -> None:
    assert (tmp / "model.npy").read_bytes() == (tmp / "model.pt").read_bytes()
    assert np.load(tmp / "prep" / "labels.npy").shape == (300,)


# --- class 4: crashes without a line, and a hang -------------------------------------------------------------


FULL_DISK = "fs"
"""The case folder's small tmpfs, full but for one page."""


def _full_disk(*flags: str) -> Callable[[Path], list[str]]:
    """Mount a 1 MiB tmpfs at ``tmp/fs`` (skipped where not allowed), fill it to one free page, return the
    command with {fs} in ``flags`` replaced."""
    def build(tmp: Path) -> list[str]:
        fs = tmp / FULL_DISK
        fs.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(fs)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
        (fs / ".slack").write_bytes(b"x" * 4096)
        with open(fs / ".filler", "wb", buffering=0) as filler:
            try:
                while True:
                    filler.write(b"\1" * 4096)
            except OSError:
                pass
        (fs / ".slack").unlink()
        return _train(*[flag.replace("{fs}", str(fs)) for flag in flags])
    return build


def unmount(tmp: Path) -> None:
    fs = tmp / FULL_DISK
    if fs.is_dir() and os.path.ismount(fs):
        subprocess.run(["umount", "-l", str(fs)], check=False)


def _disk_left_only(*names: str) -> Callable[[Path], None]:
    def check(tmp: Path) -> None:
        fs = tmp / FULL_DISK
        left = sorted(p.name for p in fs.rglob("*") if p.name != ".filler")
        assert left == sorted(names), f"left behind on the full disk: {left}"
    return check


def _fifo_in_prepared(name: str) -> Callable[[Path], None]:
    def change(prep: Path) -> None:
        (prep / name).unlink()
        os.mkfifo(prep / name)
    return change


LONG = "o" * 246
"""With a 4-byte suffix: a 250-byte name, legal everywhere (255 is the limit)."""


def _long(tmp: Path, suffix: str) -> Path:
    path = tmp / f"{LONG}{suffix}"
    assert len(path.name.encode()) == 250
    return path


def _long_names(tmp: Path) -> list[str]:
    return _train("--save-model", str(_long(tmp, ".mpt")), "--predictions-out", str(_long(tmp, ".npy")),
                  "--embeddings-out", str(_long(tmp, ".csv")))


def _long_written(tmp: Path) -> None:
    assert np.load(_long(tmp, ".npy")).shape == (300,)
    assert len(_long(tmp, ".csv").read_text().splitlines()) == 301 and _long(tmp, ".mpt").stat().st_size > 0
    assert _no_hidden(tmp) == []


def _long_prepared(tmp: Path) -> list[str]:
    return ["prepare", SMALL, "--out", str(tmp / ("d" * 250))]


def _long_prepared_written(tmp: Path) -> None:
    assert (tmp / ("d" * 250) / "prepared.json").is_file() and _no_hidden(tmp) == []


CASES: list[Case] = [
    # 1. a file outside the run destroyed
    Case("lock-symlink-to-a-file", 1, _lock("symlink"), "symbolic link", _victim_intact),
    Case("lock-dangling-symlink", 1, _lock("dangling"), "symbolic link", _not_created("created-by-lock.txt")),
    Case("lock-hard-link-to-a-file", 1, _lock("hardlink"), "hard links", _victim_intact),
    Case("lock-is-a-directory", 1, _lock("dir"), "directory", lambda tmp: None),
    Case("lock-is-a-fifo", 1, _lock("fifo"), "FIFO", lambda tmp: None, process=True),
    Case("checkpoint-partial-folder-links-outside", 1, _partial_folder_link, None, _outside_empty),
    Case("best-weights-partial-links-outside", 1,
         _planted_partial("ck/.best-weights.pt.partial", "--checkpoint-dir", "{tmp}/ck"), None, _victim_intact),
    Case("model-partial-links-outside", 1, _planted_partial(".m.pt.partial", "--save-model", "{tmp}/m.pt"), None,
         _victim_intact),
    Case("npy-partial-links-outside", 1, _planted_partial(".p.npy.partial", "--predictions-out", "{tmp}/p.npy"),
         None, _victim_intact),
    Case("csv-part-links-outside", 1,
         _planted_partial(".p.csv.partial.000000000000000", "--predictions-out", "{tmp}/p.csv"), None,
         _victim_intact),
    Case("prepare-over-a-linked-array", 1, _prepared_over_link, None, _victim_intact),
    # 2. outputs silently corrupted
    Case("csv-parts-of-a-killed-run-old-names", 2, _old_parts, None,
         _both(_csv_rows_exactly("p.csv", 300), _clean("p.csv"))),
    Case("csv-parts-of-a-killed-run-then-a-grid", 2, _old_parts_then_grid, None, _csv_rows_exactly("p.csv", 300),
         process=True, slow=True),
    Case("csv-partial-and-parts-of-a-killed-run", 2, _killed_run_leftovers, None,
         _both(_csv_rows_exactly("p.csv", 300), _clean("p.csv"))),
    Case("npy-another-run-is-writing", 2, _live_writer, "another run", _other_run_intact),
    Case("prepared-order-all-zeros", 2, _prepared(_order(lambda n: np.zeros(n, np.int64))), "permutation",
         _clean()),
    Case("prepared-order-out-of-range", 2, _prepared(_order(lambda n: np.arange(n, dtype=np.int64) + 1)),
         "outside", _clean()),
    Case("prepared-order-one-vertex-twice", 2, _prepared(_order(_swap_one)), "permutation", _clean()),
    Case("prepared-order-negative", 2, _prepared(_order(lambda n: -np.arange(n, dtype=np.int64))), "outside",
         _clean()),
    Case("prepared-ids-repeated", 2, _prepared(_ids(lambda n: np.arange(n, dtype=np.int64) // 2)), "vertex id",
         _clean()),
    # 3. outputs silently replacing things
    Case("save-model-onto-a-device", 3, _special_output("device", "--save-model", "null"), "character device",
         _still("device", "null")),
    Case("predictions-onto-a-device", 3, _special_output("device", "--predictions-out", "null.npy"),
         "character device", _still("device", "null.npy")),
    Case("predictions-onto-a-fifo", 3, _special_output("fifo", "--predictions-out", "pipe.npy"), "FIFO",
         _still("fifo", "pipe.npy")),
    Case("embeddings-onto-a-fifo", 3, _special_output("fifo", "--embeddings-out", "pipe.csv"), "FIFO",
         _still("fifo", "pipe.csv")),
    Case("save-model-onto-a-fifo", 3, _special_output("fifo", "--save-model", "pipe.pt"), "FIFO",
         _still("fifo", "pipe.pt")),
    Case("embeddings-onto-a-symlink", 3, _special_output("link", "--embeddings-out", "link.csv"),
         "symbolic link", _still("link", "link.csv")),
    Case("log-csv-onto-a-fifo", 3, _special_output("fifo", "--log-csv", "pipe.csv"), "FIFO",
         _still("fifo", "pipe.csv")),
    Case("log-csv-onto-a-symlink", 3, _special_output("link", "--log-csv", "link.csv"), "symbolic link",
         _still("link", "link.csv")),
    Case("log-csv-on-the-metrics", 3, _pair("--log-csv", "{tmp}/x.csv", "--metrics-out", "{tmp}/x.csv"),
         "same file", _clean()),
    Case("calibrate-profile-onto-a-symlink", 3, _calibrate_onto("link", "p.json"), "symbolic link",
         _still("link", "p.json")),
    Case("calibrate-profile-onto-a-fifo", 3, _calibrate_onto("fifo", "p.json"), "FIFO", _still("fifo", "p.json"),
         process=True),
    Case("predictions-and-embeddings-one-path", 3,
         _pair("--predictions-out", "{tmp}/x.npy", "--embeddings-out", "{tmp}/x.npy"), "same file", _clean()),
    Case("model-and-predictions-one-path", 3,
         _pair("--save-model", "{tmp}/x.npy", "--predictions-out", "{tmp}/x.npy"), "same file", _clean()),
    Case("metrics-on-the-predictions", 3,
         _pair("--predictions-out", "{tmp}/x.csv", "--metrics-out", "{tmp}/x.csv"), "same file", _clean()),
    Case("one-path-spelt-two-ways", 3,
         _pair("--predictions-out", "{tmp}/sub/../x.npy", "--embeddings-out", "{tmp}/x.npy"), "same file",
         _clean()),
    Case("model-over-the-checkpoints-best-weights", 3,
         _pair("--checkpoint-dir", "{tmp}/ck", "--save-model", "{tmp}/ck/best-weights.pt"), "--checkpoint-dir",
         _clean()),
    Case("predict-over-its-model-file", 3, _predict_over("model"), "same file", _inputs_intact),
    Case("predict-over-its-prepared-labels", 3, _predict_over("labels"), "same file", _inputs_intact),
    # 4. crashes without a line, and a hang
    Case("npy-onto-a-full-disk", 4, _full_disk("--predictions-out", "{fs}/p.npy"), "No space left",
         _disk_left_only(), process=True, slow=True),  # the row writer; a full disk in the default tier: below
    Case("csv-onto-a-full-disk", 4, _full_disk("--embeddings-out", "{fs}/e.csv"), "No space left",
         _disk_left_only(), process=True, slow=True),
    Case("save-model-onto-a-full-disk", 4, _full_disk("--save-model", "{fs}/m.pt"), "No space left",
         _disk_left_only(), process=True, slow=True),  # a full disk in the default tier: the checkpoint case
    Case("checkpoint-onto-a-full-disk", 4, _full_disk("--checkpoint-dir", "{fs}/ck"), "No space left",
         _disk_left_only(), process=True),
    Case("npy-onto-a-full-disk-on-a-grid", 4,
         _full_disk("--predictions-out", "{fs}/p.npy", "--algo", "1d", "--nprocs", "2"), "No space left",
         _disk_left_only(), process=True, slow=True),
    Case("save-model-onto-a-full-disk-on-a-grid", 4,
         _full_disk("--save-model", "{fs}/m.pt", "--algo", "1d", "--nprocs", "2"), "No space left",
         _disk_left_only(), process=True, slow=True),
    Case("fifo-for-a-prepared-array", 4, _prepared(_fifo_in_prepared("labels.npy")), "FIFO", _clean(),
         process=True),
    Case("fifo-for-the-prepared-row-pointers", 4, _prepared(_fifo_in_prepared("adj_indptr.npy")), "FIFO",
         _clean(), process=True, slow=True),  # a FIFO among the prepared arrays: the case above
    Case("250-byte-output-names", 4, _long_names, None, _long_written),
    Case("250-byte-prepared-folder-name", 4, _long_prepared, None, _long_prepared_written),
]
