"""Planetoid raw folders (``ind.<name>.{x,y,tx,ty,allx,ally,graph,test.index}``: Cora, CiteSeer, PubMed).

Node order and split follow Kipf & Welling's loader (and PyG's ``Planetoid``): rows of ``allx`` are nodes
0..len(allx)-1, row i of ``tx`` is node ``test.index[i]``; test ids missing from ``test.index`` inside its
range (CiteSeer's 15 isolated nodes) get zero features and label 0 and are in no mask. Split: train =
``range(len(y))``, val = ``range(len(y), len(y) + 500)``, test = the ids in ``test.index``. An edge
``key -> neighbour`` is stored for every entry of the ``graph`` dict (PyG's orientation).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp

from gridgnn.data.graph import Graph
from gridgnn.data.readers._common import (
    adjacency_from_edges,
    build_graph,
    is_symmetric,
    load_table,
    reading,
    require_file,
)
from gridgnn.data.readers.safe_pickle import as_array, as_csr, load_restricted
from gridgnn.data.splits import index_mask
from gridgnn.errors import DataError

PARTS = ("x", "y", "tx", "ty", "allx", "ally", "graph")
NUM_VAL = 500


def planetoid_prefix(folder: Path) -> str | None:
    """The ``<name>`` of the ``ind.<name>.graph`` file in `folder`, or None when there is none."""
    names = sorted(p.name[len("ind.") : -len(".graph")] for p in folder.glob("ind.*.graph"))
    if len(names) > 1:
        raise DataError(f"{folder}: several Planetoid datasets in one folder ({', '.join(names)})")
    return names[0] if names else None


def read_planetoid(folder: Path | str, name: str | None = None) -> Graph:
    """Read a Planetoid raw folder into a `Graph` (features: CSR float32 (n, f); labels int64 (n,))."""
    folder = Path(folder)
    name = name or planetoid_prefix(folder)
    if name is None:
        raise DataError(f"{folder}: no ind.<name>.graph file (not a Planetoid folder)")
    paths = {part: require_file(folder / f"ind.{name}.{part}") for part in (*PARTS, "test.index")}
    raw = {part: load_restricted(paths[part]) for part in PARTS}
    test_index = _read_test_index(paths["test.index"])
    features, labels, num_nodes = _assemble(raw, paths, test_index)
    adj = _adjacency(raw["graph"], num_nodes, paths["graph"])
    num_train = raw["y"].shape[0]
    if num_train + NUM_VAL > raw["allx"].shape[0]:
        raise DataError(f"{paths['allx']}: {raw['allx'].shape[0]} rows, too few for {num_train} train + 500 val")
    return build_graph(
        folder,
        adj=adj,
        features=features,
        labels=labels,
        train_mask=index_mask(num_nodes, np.arange(num_train)),
        val_mask=index_mask(num_nodes, np.arange(num_train, num_train + NUM_VAL)),
        test_mask=index_mask(num_nodes, test_index),
        num_classes=int(raw["ally"].shape[1]),
        name=name,
        directed=not is_symmetric(adj),
        meta={
            "source": str(folder),
            "format": "planetoid",
            "split": "planetoid-standard",
            "padded_nodes": int(num_nodes - raw["allx"].shape[0] - test_index.size),
        },
    )


def _read_test_index(path: Path) -> np.ndarray:
    """The test node ids, int64 of shape (num_test,), one per line in the file."""
    index = load_table(path, "test index", dtype=np.int64, ndmin=1)
    if index.size == 0:
        raise DataError(f"{path}: no test node ids")
    if index.min() < 0:
        raise DataError(f"{path}: negative test node id {int(index.min())}")
    if np.unique(index).size != index.size:
        raise DataError(f"{path}: repeated test node ids")
    return index


def _assemble(raw: dict, paths: dict, test_index: np.ndarray) -> tuple[sp.csr_matrix, np.ndarray, int]:
    """Place ``allx``/``tx`` rows and ``ally``/``ty`` labels at their node ids.

    Returns (features CSR float32 (n, f), labels int64 (n,), n).
    """
    allx, tx = as_csr(raw["allx"], paths["allx"]), as_csr(raw["tx"], paths["tx"])
    ally, ty, y = (as_array(raw[k], paths[k]) for k in ("ally", "ty", "y"))
    as_csr(raw["x"], paths["x"])
    _check_rows(paths, allx=allx, ally=ally, tx=tx, ty=ty, y=y, x=raw["x"], test_index=test_index)
    num_base = allx.shape[0]
    if test_index.min() < num_base:
        raise DataError(f"{paths['test.index']}: test id {int(test_index.min())} overlaps allx rows 0..{num_base - 1}")
    num_nodes = int(test_index.max()) + 1
    source_row = np.full(num_nodes, num_base + tx.shape[0], dtype=np.int64)  # the appended zero row
    source_row[:num_base] = np.arange(num_base)
    source_row[test_index] = num_base + np.arange(tx.shape[0])
    stacked = sp.vstack([allx, tx, sp.csr_matrix((1, allx.shape[1]), dtype=np.float32)], format="csr")
    one_hot = np.vstack([ally, ty, np.zeros((1, ally.shape[1]), dtype=ally.dtype)])
    labels = np.argmax(one_hot, axis=1).astype(np.int64)[source_row]
    return stacked[source_row].astype(np.float32), labels, num_nodes


def _check_rows(paths: dict, **parts: object) -> None:
    """Raise `DataError` when the Planetoid parts disagree in their row or column counts."""
    pairs = (("allx", "ally"), ("tx", "ty"), ("x", "y"), ("tx", "test_index"))
    for first, second in pairs:
        rows = (parts[first].shape[0], parts[second].shape[0])
        if rows[0] != rows[1]:
            where = paths.get(second, paths["test.index"])
            raise DataError(f"{where}: {rows[1]} rows but {first} has {rows[0]} (mismatched lengths)")
    for first, second in (("allx", "tx"), ("allx", "x"), ("ally", "ty"), ("ally", "y")):
        if parts[first].shape[1] != parts[second].shape[1]:
            raise DataError(
                f"{paths[second]}: {parts[second].shape[1]} columns but {first} has {parts[first].shape[1]}"
            )


def _check_expansion(graph: dict, entries: int, path: Path) -> None:
    """Refuse adjacency lists that are larger than the pickle that holds them could write out: a pickle
    can name one list from many keys (its memo), so a small file could expand to gigabytes here. Every
    neighbour of a list of its own costs at least one byte of the file."""
    if len({id(neighbours) for neighbours in graph.values()}) != len(graph):
        raise DataError(f"{path}: several nodes share one adjacency list object (a pickle that expands far "
                        "beyond its size); not a Planetoid graph")
    if entries > path.stat().st_size:
        raise DataError(f"{path}: {entries} neighbour entries cannot come from a {path.stat().st_size}-byte file")


def _adjacency(graph: object, num_nodes: int, path: Path) -> sp.csr_matrix:
    """CSR adjacency (n, n) from the ``{node: [neighbours]}`` dict, one edge node -> neighbour per entry."""
    if not isinstance(graph, dict):
        raise DataError(f"{path}: expected a dict of adjacency lists, got {type(graph).__name__}")
    with reading(path, "adjacency lists"):
        keys = np.fromiter(graph.keys(), dtype=np.int64, count=len(graph))
        lengths = np.fromiter((len(v) for v in graph.values()), dtype=np.int64, count=len(graph))
        _check_expansion(graph, int(lengths.sum()), path)
        flat = [int(j) for neighbours in graph.values() for j in neighbours]
        targets = np.asarray(flat, dtype=np.int64)
    return adjacency_from_edges(np.repeat(keys, lengths), targets, num_nodes, path)
