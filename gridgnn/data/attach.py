"""Node data from files attached to any graph source (``--features``, ``--labels``, ``--split``).

Row i of every file is vertex i of the graph as its reader numbers it (an edge list with compact ids: the
i-th smallest id of the file; `gridgnn.data.readers.edgelist`). The rules:

- ``features`` replace the source's features (placeholders for structure-only formats);
- ``labels`` replace its targets, laid out by `gridgnn.data.targets.canonical_targets` with the task inferred
  (NaN or -1: unlabelled; several 0/1 columns: multilabel; real values: regression);
- ``edge_features`` (a ``.npy`` of (E, d), or (E,) for one feature) replace the source's edge features: row e
  is the source's e-th edge in its own order (an edge list's e-th line, OGB's e-th edge row, PyG's e-th
  ``edge_index`` column: `Graph.edge_order`), else its e-th stored edge in CSR order (by target, then source);
  an edge given twice gets the mean of its rows;
- ``split`` (a folder of train/valid/test index files) replaces its split. Without it, a split the source
  *drew* (``random-...``, ``per-class-...``: structure-only formats, gnn-benchmark, generators) is drawn again
  when labels are attached: a seeded 60/20/20 random split among the labelled vertices; a split the source
  *read* from its files (an OGB ``split/`` folder, Planetoid's standard split) stays.

A split that names an unlabelled vertex or an id outside the graph, and a file of another length, are refused
with one `gridgnn.errors.DataError` line. The graph's ``meta`` records each file and the SHA-256 of its bytes
(``features_file``/``features_sha256``, ``labels_file``/``labels_sha256``, ``split_dir``/``split_sha256`` over
the three index files), so a resume on other files is refused (`gridgnn.train.checkpoint.fingerprint`).
Not collective.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gridgnn.data.edge_features import check_edge_rows, collapse_rows
from gridgnn.data.file_digest import file_digest
from gridgnn.data.graph import Graph
from gridgnn.data.node_files import read_features_file, read_labels_file, read_split_dir
from gridgnn.data.readers._common import reading
from gridgnn.data.splits import random_split
from gridgnn.data.targets import canonical_targets, labelled_vertices
from gridgnn.errors import ConfigError, DataError

NODE_DATA_KEYS = ("features_sha256", "labels_sha256", "split_sha256", "edge_features_sha256")
"""The ``meta`` entries that identify attached node data (read by the checkpoint fingerprint)."""


@dataclass(frozen=True)
class NodeFiles:
    """The files named by ``--features FILE``, ``--labels FILE``, ``--split DIR`` and ``--edge-features FILE``
    (None: not given)."""

    features: str | None = None
    labels: str | None = None
    split: str | None = None
    edge_features: str | None = None

    def __bool__(self) -> bool:
        return any((self.features, self.labels, self.split, self.edge_features))

    @classmethod
    def of(cls, config: object) -> NodeFiles:
        """The files a `gridgnn.config.TrainConfig` (or any object with ``features``, ``labels``, ``split``)
        names."""
        return cls(getattr(config, "features", None), getattr(config, "labels", None), getattr(config, "split", None),
                   getattr(config, "edge_features", None))

    def flags(self) -> list[str]:
        """The command-line flags that name these files (for messages and hints)."""
        return [f"--{name.replace('_', '-')}" for name in ("features", "labels", "split", "edge_features")
                if getattr(self, name)]


def refuse_on_prepared(dataset: str, files: NodeFiles) -> None:
    """Raise `ConfigError` when node data files are given with a prepared folder (`gridgnn prepare`), whose node
    data was fixed when it was written."""
    if files:
        raise ConfigError(f"'{dataset}' is a prepared graph (gridgnn prepare): its node data was attached when it "
                          f"was prepared; drop {', '.join(files.flags())}, or prepare it again with them")


def _numbering(graph: Graph) -> str:
    """A hint for a row count that does not fit a graph whose reader renumbered its vertices (an edge list)."""
    ids = graph.meta.get("vertex_ids")
    if ids is None or len(ids) == 0:
        return ""
    return (f" (its vertices are the {len(ids)} distinct ids of the edge list, ids {int(ids[0])} to {int(ids[-1])}, "
            "in sorted order: an id on no edge is no vertex)")


def _drawn(split: object) -> bool:
    """Whether a source's split was drawn at random (not read from its files)."""
    return isinstance(split, str) and split.startswith(("random-", "per-class-"))


def split_digest(part_files: dict[str, Path]) -> str:
    """The SHA-256 that names a split folder: over the SHA-256 of its train, valid and test index files."""
    digest = hashlib.sha256()
    for part in ("train", "valid", "test"):
        digest.update(file_digest(part_files[part]).encode())
    return digest.hexdigest()


def read_edge_features_file(path: Path, graph: Graph) -> np.ndarray:
    """The (E, d) float32 edge features of ``graph``'s stored edges from the ``.npy`` at ``path`` (rows in the
    source's edge order, `Graph.edge_order`, else CSR order); `DataError` (one line) on another suffix, row
    count, a non-numeric dtype or NaN/inf."""
    if not path.is_file():
        raise DataError(f"{path}: edge features file not found")
    if not path.name.lower().endswith(".npy"):
        raise DataError(f"{path}: edge features must be a .npy file of shape (E, d)")
    with reading(path, "edge features"):
        rows = np.load(path, allow_pickle=False, mmap_mode="r")
    order = graph.edge_order
    if order is None:
        return check_edge_rows(rows, graph.num_edges, str(path))
    rows = check_edge_rows(rows, len(order), f"{path} (one row per edge of the source, in its order)")
    return collapse_rows(rows, order, graph.num_edges, str(path))


def attach_node_data(graph: Graph, files: NodeFiles, seed: int = 0) -> Graph:
    """``graph`` with the node data of ``files`` in place of its own (see the module docstring); ``seed``
    draws the random split. Raises `DataError` (one line) on a file that does not fit."""
    if not files:
        return graph
    n = graph.num_nodes
    changes: dict = {}
    meta = dict(graph.meta)
    if files.features:
        path = Path(files.features).expanduser()
        features = read_features_file(path)
        if features.shape[0] != n:
            raise DataError(f"{path}: {features.shape[0]} feature rows for the {n} vertices of graph "
                            f"'{graph.name}'{_numbering(graph)}")
        changes["features"] = features
        meta.update(features="file", features_file=str(path), features_sha256=file_digest(path))
    labels, task = graph.labels, graph.task
    if files.labels:
        path = Path(files.labels).expanduser()
        raw = read_labels_file(path)
        if raw.ndim >= 1 and raw.shape[0] != n:
            raise DataError(f"{path}: {raw.shape[0]} label rows for the {n} vertices of graph '{graph.name}'"
                            f"{_numbering(graph)}")
        targets = canonical_targets(raw, n, "auto", where=str(path))
        labels, task = targets.values, targets.task
        changes.update(labels=labels, task=task, num_classes=targets.num_outputs)
        meta.update(labels="file", labels_file=str(path), labels_sha256=file_digest(path))
    labelled = labelled_vertices(labels, task)
    if files.split:
        folder = Path(files.split).expanduser()
        masks, part_files = read_split_dir(folder, n)
        for part, mask in zip(("train", "valid", "test"), masks, strict=True):
            count = int((mask & ~labelled).sum())
            if count:
                raise DataError(f"{part_files[part]}: names {count} vertices without a label (unlabelled or all "
                                "NaN); a split names labelled vertices only")
        meta.update(split="files", split_dir=str(folder), split_sha256=split_digest(part_files))
    elif files.labels and _drawn(graph.meta.get("split")):
        masks = random_split(n, seed=seed, among=labelled)
        meta["split"] = "random-60-20-20"
    else:
        masks = (graph.train_mask, graph.val_mask, graph.test_mask)
    changes.update(train_mask=masks[0], val_mask=masks[1], test_mask=masks[2], meta=meta)
    if files.edge_features:
        path = Path(files.edge_features).expanduser()
        changes["edge_attr"] = read_edge_features_file(path, graph)
        meta.update(edge_features="file", edge_features_file=str(path), edge_features_sha256=file_digest(path))
    try:
        return dataclasses.replace(graph, **changes)
    except DataError as exc:
        flags = ", ".join(files.flags())
        hint = "" if files.split else "; give --split DIR naming labelled vertices"
        raise DataError(f"{exc} (with {flags}{hint})") from None
