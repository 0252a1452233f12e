"""OGB node-property-prediction folders as the ``ogb`` package unpacks them (e.g. ``ogbn_arxiv/``).

CSV layout: ``raw/edge.csv.gz`` (one ``src,dst`` line per edge, 0-based), ``raw/node-feat.csv.gz`` (n rows
of f floats, optional: placeholders otherwise), ``raw/node-label.csv.gz`` (n rows of T values, NaN for
missing, optional: all 0 otherwise), ``raw/num-node-list.csv.gz`` (optional, the node count),
``raw/edge-feat.csv.gz`` (E rows of d floats in ``edge.csv.gz``'s order, optional: the edge features, as
ogbn-proteins ships them). Binary layout (ogbn-papers100M): ``raw/data.npz`` and ``raw/node-label.npz``
(`gridgnn.data.readers.ogb_binary`), read into the same tables, so both layouts of one dataset give the same
`Graph` and meta (but ``source``). Both:
``split/<kind>/{train,valid,test}.csv.gz`` (node ids; ``.csv`` and ``.npy`` too; without a split folder a
seeded 60/20/20 random split of the labelled vertices is used). With several split kinds the alphabetically
first is taken. Uncompressed ``.csv`` files are accepted too. Edges keep their direction (src -> dst).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gridgnn.data.edge_features import collapse_rows, edge_positions
from gridgnn.data.graph import Graph
from gridgnn.data.node_files import read_split_dir
from gridgnn.data.readers._common import (
    adjacency_from_edges,
    build_graph,
    check_features,
    is_symmetric,
    load_table,
)
from gridgnn.data.readers.ogb_binary import is_binary_raw, read_binary_edge_features, read_binary_raw
from gridgnn.data.splits import random_split
from gridgnn.data.synthetic import placeholder_features
from gridgnn.data.targets import canonical_targets, labelled_vertices
from gridgnn.errors import DataError


def csv_file(folder: Path, stem: str) -> Path | None:
    """``folder/<stem>.csv.gz`` or ``folder/<stem>.csv``, whichever exists, else None."""
    for name in (f"{stem}.csv.gz", f"{stem}.csv"):
        if (folder / name).is_file():
            return folder / name
    return None


def is_ogb_folder(folder: Path) -> bool:
    """True when `folder` has an OGB ``raw/edge.csv(.gz)`` or ``raw/data.npz``."""
    return csv_file(folder / "raw", "edge") is not None or is_binary_raw(folder / "raw")


def _load_csv(path: Path, dtype: type, what: str) -> np.ndarray:
    """A comma-separated numeric table as a 2-D array (rows, columns)."""
    return load_table(path, what, dtype=dtype, delimiter=",", ndmin=2)


def read_ogb(folder: Path | str, seed: int = 0) -> Graph:
    """Read an OGB node-property folder into a `Graph` (features dense float32 (n, f); targets as
    `gridgnn.data.targets.canonical_targets` infers them: NaN or -1 marks an unlabelled vertex, several 0/1
    columns are a multilabel task, real values a regression; without ``node-label`` every vertex is class 0).
    Without a ``split/`` folder the labelled vertices are split 60/20/20 at random."""
    folder = Path(folder)
    raw = folder / "raw"
    if is_binary_raw(raw):
        edges, feature_table, label_table, num_nodes = read_binary_raw(raw)
        edge_path = raw / "data.npz"
        tables = {"node-feat": (feature_table, edge_path), "node-label": (label_table, raw / "node-label.npz")}
    else:
        edge_path = csv_file(raw, "edge")
        if edge_path is None:
            raise DataError(f"{folder}: no raw/edge.csv.gz or raw/data.npz (not an OGB node-property folder)")
        edges = _load_csv(edge_path, np.int64, "edges")
        if edges.shape[0] == 0 or edges.shape[1] != 2:
            raise DataError(f"{edge_path}: expected one 'src,dst' pair per line, got shape {edges.shape}")
        tables = {stem: _optional_table(raw, stem) for stem in ("node-feat", "node-label")}
        num_nodes = _num_nodes(raw, edges, tables)
    adj = adjacency_from_edges(edges[:, 0], edges[:, 1], num_nodes, edge_path)
    order = edge_positions(edges[:, 0], edges[:, 1], num_nodes)
    edge_table, edge_feat_path = _edge_features(raw)
    edge_attr = None if edge_table is None else collapse_rows(edge_table, order, adj.nnz, str(edge_feat_path))
    features, feat_path = tables["node-feat"]
    if features is None:
        features = placeholder_features(adj, seed=seed)
    check_features(features, num_nodes, feat_path)
    label_table, label_path = tables["node-label"]
    targets = canonical_targets(np.zeros(num_nodes, np.int64) if label_table is None else label_table, num_nodes,
                                where=str(label_path))
    masks, split = _split(folder, num_nodes, seed, labelled_vertices(targets.values, targets.task))
    return build_graph(
        folder,
        adj=adj,
        features=features,
        labels=targets.values,
        task=targets.task,
        train_mask=masks[0],
        val_mask=masks[1],
        test_mask=masks[2],
        num_classes=targets.num_outputs,
        name=folder.name,
        directed=not is_symmetric(adj),
        meta={"source": str(folder), "format": "ogb", "split": split},
        edge_attr=edge_attr,
        edge_order=order,
    )


def _edge_features(raw: Path) -> tuple[np.ndarray | None, Path]:
    """(edge features (E, d) in the edge file's row order, or None; their file): ``raw/edge-feat.csv(.gz)``, or
    ``edge_feat`` of the binary ``raw/data.npz``."""
    if is_binary_raw(raw):
        return read_binary_edge_features(raw), raw / "data.npz"
    path = csv_file(raw, "edge-feat")
    return (None, raw / "edge-feat.csv.gz") if path is None else (_load_csv(path, np.float32, "edge features"), path)


def _optional_table(raw: Path, stem: str) -> tuple[np.ndarray | None, Path]:
    """(table, path) for ``raw/<stem>.csv(.gz)``: features as float32, labels as float64 (NaN-aware)."""
    path = csv_file(raw, stem)
    if path is None:
        return None, raw / f"{stem}.csv.gz"
    return _load_csv(path, np.float32 if stem == "node-feat" else np.float64, stem), path


def _num_nodes(raw: Path, edges: np.ndarray, tables: dict) -> int:
    """Node count from num-node-list, else node-feat/node-label row counts, else max edge id + 1."""
    count_path = csv_file(raw, "num-node-list")
    if count_path is not None:
        counts = _load_csv(count_path, np.int64, "node count").ravel()
        if counts.size != 1 or counts[0] <= 0:
            raise DataError(f"{count_path}: expected one positive node count, got {counts.tolist()}")
        return int(counts[0])
    for table, _ in tables.values():
        if table is not None:
            return int(table.shape[0])
    return int(edges.max()) + 1


def _split(folder: Path, num_nodes: int, seed: int, labelled: np.ndarray) -> tuple[tuple[np.ndarray, ...], str]:
    """(train, val, test) masks of shape (n,) from split/<kind>/, and the split's name; without one a random
    split of the ``labelled`` vertices (bool (n,))."""
    kind = split_folder(folder)
    if kind is None:
        return random_split(num_nodes, seed=seed, among=labelled), "random-60-20-20"
    masks, _ = read_split_dir(kind, num_nodes)
    return masks, kind.name


def split_folder(folder: Path) -> Path | None:
    """The split an OGB folder ships: ``split/<kind>/`` of the alphabetically first kind, or None."""
    root = folder / "split"
    kinds = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    return root / kinds[0] if kinds else None
