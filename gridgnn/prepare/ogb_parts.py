"""OGB's binary layout (``raw/data.npz``, as ogbn-papers100M ships it) prepared by P processes, each reading its part.

What one process reads whole (`gridgnn.data.readers.ogb_binary`), each process of a distributed preparation reads
by ranges of the compressed members (`gridgnn.data.readers.npz_rows.NpzMember`, streamed, never loaded):

- ``edge_index`` (2, E): its columns [E p / P, E (p + 1) / P), sources then targets (one forward pass);
- ``node_feat`` (n, f): its rows of the features (`gridgnn.prepare.node_data`, as a ``--features`` file);
- ``raw/node-label.npz`` ``node_label`` (n,) or (n, T): its rows, as float64 the way one process reads them;
- ``split/<kind>/``: the alphabetically first kind's index files, as a ``--split`` folder; none: a seeded
  60/20/20 split of the labelled vertices.

The vertex count is ``num_nodes_list``'s (OGB's ids are 0 to n - 1: no renumbering, an isolated vertex stays).
A folder without ``node_feat`` (placeholder features drawn from the whole graph) or with ``edge_feat`` is
prepared by one process (refused here with one line). The folder equals the one-process folder (tested).
"""

from __future__ import annotations

import zipfile
import zlib
from pathlib import Path

import numpy as np

from gridgnn.data.readers._common import check_inflation
from gridgnn.data.readers.npz_rows import NpzMember
from gridgnn.data.readers.ogb import split_folder
from gridgnn.data.readers.ogb_binary import DATA_FILE, LABEL_FILE
from gridgnn.errors import ConfigError, DataError

LABELS_AS = "float64"
"""How one process reads OGB's labels (`gridgnn.data.readers.ogb_binary.read_binary_raw`), and so each process."""


def is_ogb_binary(path: Path) -> bool:
    """True when ``path`` is an OGB folder in the binary layout."""
    return path.is_dir() and (path / "raw" / DATA_FILE).is_file()


def ogb_layout(folder: Path) -> tuple[dict, dict, dict]:
    """(the job's ``layout``: vertex and edge counts, the data file; its ``node_files``, as `gridgnn.prepare.
    node_data` reads them: the members (``{"npz", "member", "as"}``) and the split folder; the ``meta`` one process
    records). `ConfigError` for what one process must prepare, `DataError` for a broken file. Not collective."""
    raw = folder / "raw"
    data = raw / DATA_FILE
    for archive in (data, raw / LABEL_FILE):  # as one process refuses them, before anything is inflated
        if archive.is_file():
            check_inflation(archive, archive)
    try:
        with np.load(data, allow_pickle=False) as arrays:
            names = set(arrays.files)
            counts = np.asarray(arrays["num_nodes_list"] if "num_nodes_list" in names
                                else arrays["num_nodes"] if "num_nodes" in names else [])
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
        raise DataError(f"{data}: cannot read OGB binary graph: {exc}") from None
    if "edge_index" not in names:
        raise DataError(f"{data}: no 'edge_index' array (keys: {', '.join(sorted(names)[:8])})")
    if "edge_feat" in names:
        raise ConfigError(f"{data} has edge features (edge_feat), which --nprocs does not read by parts: prepare "
                          "without --nprocs")
    if "node_feat" not in names:
        raise ConfigError(f"{data} has no node_feat: its placeholder features need the whole graph; prepare "
                          "without --nprocs")
    counts = counts.reshape(-1)
    if counts.size != 1 or counts.dtype.kind not in "iu" or int(counts[0]) <= 0:
        raise DataError(f"{data}: num_nodes_list must hold one positive node count (one graph), got "
                        f"{counts[:4].tolist()}")
    with NpzMember(data, "edge_index") as edges:
        shape, dtype = edges.shape, edges.dtype
    if len(shape) != 2 or shape[0] != 2 or dtype.kind not in "iu":
        raise DataError(f"{data}: edge_index must be integers of shape (2, E), got {dtype} {shape}")
    if shape[1] == 0:
        raise DataError(f"{data}: edge_index holds no edge")
    _check_numbers(data, "node_feat", "node_feat")
    files = {"features": {"npz": str(data), "member": "node_feat", "as": None}}
    if (raw / LABEL_FILE).is_file():
        _check_numbers(raw / LABEL_FILE, "node_label", "node_label")
        files["labels"] = {"npz": str(raw / LABEL_FILE), "member": "node_label", "as": LABELS_AS}
    kind = split_folder(folder)  # as one process picks it
    if kind is not None:
        files["split"] = str(kind)
    layout = {"num_nodes": int(counts[0]), "num_edges": int(shape[1]), "data": str(data)}
    meta = {"source": str(folder), "format": "ogb", "split": kind.name if kind is not None else "random-60-20-20"}
    return layout, files, meta


def _check_numbers(path: Path, member: str, what: str) -> None:
    """`DataError` (one line, as one process prints it) unless the member holds numbers."""
    with NpzMember(path, member) as array:
        if array.dtype.kind not in "biuf":
            raise DataError(f"{path}: {what} must be numbers, got dtype {array.dtype}")


def read_edge_part(layout: dict, rank: int, size: int) -> tuple[np.ndarray, int]:
    """This process's edges (m, 2) int64 (source, target): columns [E p / P, E (p + 1) / P) of ``edge_index``,
    and the bytes of them it read. Every id must lie in [0, n) (`DataError` otherwise)."""
    count, n = layout["num_edges"], layout["num_nodes"]
    lo, hi = count * rank // size, count * (rank + 1) // size
    edges = np.empty((hi - lo, 2), dtype=np.int64)
    with NpzMember(layout["data"], "edge_index") as member:
        edges[:, 0] = member.flat(lo, hi - lo)  # the sources, then (further on in the stream) the targets
        edges[:, 1] = member.flat(count + lo, hi - lo)
        itemsize = member.dtype.itemsize
    if edges.size and (edges.min() < 0 or edges.max() >= n):
        bad = int(edges.min()) if edges.min() < 0 else int(edges.max())
        raise DataError(f"{layout['data']}: edge_index names vertex {bad}, outside the {n} nodes of num_nodes_list")
    return edges, 2 * (hi - lo) * itemsize
