"""Detect the format of a dataset file or folder and read it with the matching reader.

Folders: a Planetoid raw folder (``ind.<name>.graph``), an OGB node-property folder (``raw/edge.csv.gz`` or
``raw/data.npz``), or a folder holding exactly one readable file. Files by suffix (``.gz`` allowed for text formats):
``.npz`` (gridgnn native or gnn-benchmark, told apart by their keys), ``.zip`` (one such ``.npz``
inside), ``.mtx`` (Matrix Market), ``.txt/.edges/.edgelist/.el/.csv/.tsv`` (edge list), ``.npy`` (an (E, 2)
integer edge array, read as an edge list). A file with
another suffix is read as npz/zip when it starts with the zip signature.
"""

from __future__ import annotations

from pathlib import Path

from gridgnn.data.graph import Graph
from gridgnn.data.readers.edgelist import EDGE_ARRAY_SUFFIXES, read_edgelist
from gridgnn.data.readers.gnn_benchmark import graph_from_gnn_benchmark, open_npz
from gridgnn.data.readers.mtx import read_mtx
from gridgnn.data.readers.native import graph_from_native, is_native
from gridgnn.data.readers.ogb import is_ogb_folder, read_ogb
from gridgnn.data.readers.planetoid import planetoid_prefix, read_planetoid
from gridgnn.errors import DataError

ARCHIVE_SUFFIXES = (".npz", ".zip")
EDGE_LIST_SUFFIXES = (".txt", ".edges", ".edgelist", ".el", ".csv", ".tsv")
MTX_SUFFIXES = (".mtx",)
SUPPORTED = "Planetoid folder, OGB folder, .npz, .zip, .mtx, .npy (an (E, 2) edge array), " + ", ".join(
    EDGE_LIST_SUFFIXES)
_ZIP_MAGIC = b"PK\x03\x04"


def _suffix(path: Path) -> str:
    """Lower-case suffix ignoring a trailing ``.gz`` (``graph.mtx.gz`` -> ``.mtx``)."""
    name = path.name.lower()
    if name.endswith(".gz"):
        name = name[: -len(".gz")]
    return Path(name).suffix


def _kind(path: Path) -> str:
    """What a path that is neither a file nor a folder is: a FIFO, a socket, a device."""
    for test, name in ((Path.is_fifo, "a FIFO"), (Path.is_socket, "a socket"), (Path.is_char_device,
                        "a character device"), (Path.is_block_device, "a block device")):
        if test(path):
            return name
    return "a special file"


def detect_format(path: Path) -> str:
    """One of "planetoid", "ogb", "archive", "mtx", "edge-list", or raise `DataError`."""
    if path.is_dir():
        if planetoid_prefix(path) is not None:
            return "planetoid"
        if is_ogb_folder(path):
            return "ogb"
        raise DataError(f"{path}: folder is neither a Planetoid nor an OGB dataset")
    if not path.exists():
        raise DataError(f"{path}: no such file or folder")
    if not path.is_file():
        raise DataError(f"{path}: not a regular file or folder ({_kind(path)}); give a dataset file or folder")
    suffix = _suffix(path)
    if suffix in ARCHIVE_SUFFIXES:
        return "archive"
    if suffix in MTX_SUFFIXES:
        return "mtx"
    if suffix in EDGE_LIST_SUFFIXES or suffix in EDGE_ARRAY_SUFFIXES:
        return "edge-list"
    with open(path, "rb") as file:
        if file.read(4) == _ZIP_MAGIC:
            return "archive"
    raise DataError(f"{path}: unknown dataset format (supported: {SUPPORTED})")


def _single_file(folder: Path) -> Path | None:
    """The one readable data file directly inside `folder`, None if there is none."""
    known = (*ARCHIVE_SUFFIXES, *MTX_SUFFIXES, *EDGE_LIST_SUFFIXES, *EDGE_ARRAY_SUFFIXES)
    found = sorted(p for p in folder.iterdir() if p.is_file() and _suffix(p) in known)
    if len(found) > 1:
        names = ", ".join(p.name for p in found)
        raise DataError(f"{folder}: several dataset files ({names}); name one of them")
    return found[0] if found else None


def read_path(path: Path | str, seed: int = 0) -> Graph:
    """Read the dataset at `path` (file or folder) as stored: no symmetrization or normalization.

    `seed` drives the random splits and placeholder features of formats that have none.
    """
    path = Path(path).expanduser()
    if path.is_dir() and planetoid_prefix(path) is None and not is_ogb_folder(path):
        inner = _single_file(path)
        if inner is None and (path / "raw").is_dir():
            raise DataError(f"{path}: OGB-style folder lacks raw/edge.csv(.gz) (CSV layout) and raw/data.npz "
                            "(binary layout)")
        if inner is None:
            raise DataError(f"{path}: no dataset found in folder (supported: {SUPPORTED})")
        path = inner
    kind = detect_format(path)
    if kind == "planetoid":
        return read_planetoid(path)
    if kind == "ogb":
        return read_ogb(path, seed=seed)
    if kind == "mtx":
        return read_mtx(path, seed=seed)
    if kind == "edge-list":
        return read_edgelist(path, seed=seed)
    arrays = open_npz(path)
    if is_native(arrays):
        return graph_from_native(arrays, path)
    if "adj_data" in arrays:
        return graph_from_gnn_benchmark(arrays, path, seed=seed)
    keys = ", ".join(sorted(arrays)[:8])
    raise DataError(f"{path}: npz is neither a gridgnn graph nor a gnn-benchmark graph (keys: {keys})")
