"""Plain-text edge lists (``.txt``, ``.edges``, ``.edgelist``, ``.el``, ``.csv``, ``.tsv``; ``.gz`` allowed), and
binary edge arrays (``.npy``: an (E, 2) integer array, one edge (source, target) per row, read as the lines).

One edge ``u v`` per line, whitespace- or comma-separated; anything after the first two fields (weights,
networkx ``{}`` attribute dicts) is ignored; lines starting with ``#`` or ``%`` are comments; a first data
line whose ids are not integers (``source,target``) is skipped as a header. A line ``u v`` is the edge
u -> v. Node ids (``id_base=None``, the default): the distinct ids in sorted order become 0..n-1, which
covers 0-based, 1-based and non-contiguous ids (nodes without edges do not exist). With ``id_base=0`` or
``1`` ids are used as given minus the base and n = max id + 1 - base, keeping isolated nodes. Features,
labels and split are the structure-only defaults of `gridgnn.data.synthetic`.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import IO

import numpy as np

from gridgnn.data.edge_features import edge_positions
from gridgnn.data.graph import Graph
from gridgnn.data.readers._common import adjacency_from_edges, is_symmetric, load_table, reading, require_file
from gridgnn.data.synthetic import structure_only_graph
from gridgnn.errors import DataError

COMMENTS = ("#", "%")


def _open_text(path: Path) -> IO[str]:
    return gzip.open(path, "rt") if path.name.endswith(".gz") else open(path)


def _sniff(path: Path) -> tuple[str | None, int]:
    """(delimiter, lines to skip): ',' if the first data line has a comma; skip a non-numeric header line."""
    with reading(path, "edge list"), _open_text(path) as file:
        for line_number, line in enumerate(file):
            text = line.strip()
            if not text or text.startswith(COMMENTS):
                continue
            delimiter = "," if "," in text else None
            fields = [f.strip() for f in text.split(delimiter)][:2]
            return delimiter, (0 if _numeric(fields) else line_number + 1)
    return None, 0


def _numeric(fields: list[str]) -> bool:
    """True when every field parses as a number (else the line is a header such as ``source,target``)."""
    try:
        [float(f) for f in fields]
    except ValueError:
        return False
    return True


EDGE_ARRAY_SUFFIXES = (".npy",)
"""Binary edge arrays: a NumPy file holding an (E, 2) integer array, one edge (source, target) per row (PyG's
``edge_index`` is its transpose: save ``edge_index.T``)."""


def is_edge_array(path: Path | str) -> bool:
    """Whether ``path`` names a binary edge array (`EDGE_ARRAY_SUFFIXES`) rather than a text edge list."""
    return Path(path).name.lower().endswith(EDGE_ARRAY_SUFFIXES)


def open_edge_array(path: Path | str) -> np.ndarray:
    """The (E, 2) integer array of a ``.npy`` edge array, memory-mapped (nothing read beyond the header);
    `DataError` (one line) for another dtype or shape, or no edge."""
    path = require_file(Path(path))
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: cannot read it as a NumPy array ({exc})") from None
    if array.dtype.kind not in "iu" or array.ndim != 2 or array.shape[1] != 2:
        raise DataError(f"{path}: an edge array holds (E, 2) integers, one edge (source, target) per row; found "
                        f"{array.dtype} {array.shape} (for PyG's edge_index of shape (2, E), save its transpose)")
    if array.shape[0] == 0:
        raise DataError(f"{path}: the edge array is empty (no edge rows)")
    return array


def read_edge_array(path: Path | str) -> np.ndarray:
    """The raw (E, 2) int64 array of (source, target) ids in file order (a text edge list's lines, or a ``.npy``
    edge array's rows)."""
    if is_edge_array(path):
        return np.asarray(open_edge_array(path), dtype=np.int64)
    path = require_file(Path(path))
    delimiter, skip = _sniff(path)
    edges = load_table(
        path, "edge list", dtype=np.int64, comments=COMMENTS, delimiter=delimiter, usecols=(0, 1),
        skiprows=skip, ndmin=2,
    )  # fmt: skip
    if edges.shape[0] == 0:
        raise DataError(f"{path}: the edge list is empty (no edge lines)")
    return edges


def read_edgelist_adjacency(path: Path | str, id_base: int | None = None, *, with_ids: bool = False,
                            with_order: bool = False):
    """Binary CSR float32 adjacency (n, n) with ``adj[v, u] = 1`` for each line ``u v``; with ``with_ids``
    also the file's id of each row (int64 (n,), sorted) when ids were renumbered (``id_base=None``), else None;
    with ``with_order`` also the CSR entry of each line (`gridgnn.data.edge_features.edge_positions`)."""
    edges = read_edge_array(path)
    if edges.min() < 0:
        raise DataError(f"{path}: negative vertex id {int(edges.min())}")
    ids = None
    if id_base is None:
        ids, compact = np.unique(edges, return_inverse=True)
        edges = compact.reshape(edges.shape)
        num_nodes = int(ids.size)
    else:
        if id_base not in (0, 1):
            raise DataError(f"{path}: id_base must be 0, 1 or None, got {id_base}")
        edges = edges - id_base
        if edges.min() < 0:
            raise DataError(f"{path}: vertex id {int(edges.min()) + id_base} is below the id base {id_base}")
        num_nodes = int(edges.max()) + 1
    adj = adjacency_from_edges(edges[:, 0], edges[:, 1], num_nodes, path)
    out = (adj,) + ((ids,) if with_ids else ()) + \
        ((edge_positions(edges[:, 0], edges[:, 1], num_nodes),) if with_order else ())
    return out if len(out) > 1 else adj


def read_edgelist(path: Path | str, seed: int = 0, id_base: int | None = None) -> Graph:
    """Read an edge list into a `Graph` with placeholder features, one class and a 60/20/20 split."""
    adj, ids, order = read_edgelist_adjacency(path, id_base=id_base, with_ids=True, with_order=True)
    meta = {"source": str(path), "format": "edge-array" if is_edge_array(path) else "edge-list",
            "id_base": "compact" if id_base is None else id_base}
    if ids is not None:
        meta["vertex_ids"] = ids.astype(np.int64)  # the file's id of each row, for per-vertex outputs
    name = Path(path).name.split(".")[0]
    graph = structure_only_graph(adj, path, name, seed=seed, meta=meta, directed=not is_symmetric(adj))
    graph.edge_order = order  # --edge-features rows follow the file's lines
    return graph
