"""A small generated graph whose labels are hidden but for 2 % of its vertices, written in three layouts that
must read as the same graph: an edge list with node data files (``--features``, ``--labels``, ``--split``), an
OGB folder in its CSV layout and one in its binary layout (ogbn-papers100M's ``raw/data.npz``). `from_graph`
turns any multiclass `gridgnn.data.Graph` (e.g. ``csbm:labelled=0.02``) into the same data for the writers."""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path

import numpy as np

NODES = 500
CLASSES = 3
FEATURES = 6
LABELLED = 10  # 2 % of the vertices
SPLIT = (6, 2, 2)


@dataclass(frozen=True)
class HiddenLabels:
    """The generated graph: ``edges`` int64 (E, 2) (source, target), every vertex on an edge; ``features``
    float32 (n, f) of exact binary fractions (they survive text); ``labels`` float64 (n,) with NaN for the
    unlabelled; ``split``: the train, valid and test vertex ids (labelled vertices only)."""

    edges: np.ndarray
    features: np.ndarray
    labels: np.ndarray
    split: tuple[np.ndarray, np.ndarray, np.ndarray]

    @property
    def labelled(self) -> np.ndarray:
        return np.flatnonzero(~np.isnan(self.labels))


def hidden_labels(seed: int = 0) -> HiddenLabels:
    """The graph: a ring (no vertex without an edge) plus random chords, 2 % of the vertices labelled."""
    rng = np.random.default_rng(seed)
    ring = np.stack([np.arange(NODES), (np.arange(NODES) + 1) % NODES], axis=1)
    chords = rng.integers(0, NODES, size=(2 * NODES, 2))
    edges = np.concatenate([ring, chords[chords[:, 0] != chords[:, 1]]]).astype(np.int64)
    features = (rng.integers(0, 16, size=(NODES, FEATURES)) / 4).astype(np.float32)
    labels = np.full(NODES, np.nan)
    chosen = rng.choice(NODES, size=LABELLED, replace=False)
    labels[chosen] = np.arange(LABELLED) % CLASSES
    ends = np.cumsum(SPLIT)
    split = (np.sort(chosen[: ends[0]]), np.sort(chosen[ends[0] : ends[1]]), np.sort(chosen[ends[1] :]))
    return HiddenLabels(edges, features, labels, split)


def from_graph(graph) -> HiddenLabels:
    """A multiclass `gridgnn.data.Graph` as `HiddenLabels`: every stored edge of ``adj`` (row: target, column:
    source), dense features, -1 labels as NaN, the split's vertex ids."""
    coo = graph.adj.tocoo()
    labels = np.where(graph.labels >= 0, graph.labels, np.nan)
    split = tuple(np.flatnonzero(m) for m in (graph.train_mask, graph.val_mask, graph.test_mask))
    return HiddenLabels(np.stack([coo.col, coo.row], axis=1).astype(np.int64), graph.dense_features(), labels,
                        split)


def write_files(data: HiddenLabels, folder: Path) -> dict[str, Path]:
    """``edges.txt``, ``features.npy``, ``labels.npy`` and ``split/{train,valid,test}.npy`` under ``folder``;
    returns their paths by role (``dataset``, ``features``, ``labels``, ``split``)."""
    folder.mkdir(parents=True, exist_ok=True)
    np.savetxt(folder / "edges.txt", data.edges, fmt="%d")
    np.save(folder / "features.npy", data.features)
    np.save(folder / "labels.npy", data.labels)
    (folder / "split").mkdir(exist_ok=True)
    for part, ids in zip(("train", "valid", "test"), data.split, strict=True):
        np.save(folder / "split" / f"{part}.npy", ids)
    return {"dataset": folder / "edges.txt", "features": folder / "features.npy", "labels": folder / "labels.npy",
            "split": folder / "split"}


def _write_split(data: HiddenLabels, folder: Path) -> None:
    split = folder / "split" / "random"
    split.mkdir(parents=True)
    for part, ids in zip(("train", "valid", "test"), data.split, strict=True):
        _gz_text(split / f"{part}.csv.gz", "".join(f"{i}\n" for i in ids))


def _gz_text(path: Path, text: str) -> None:
    with gzip.open(path, "wt") as stream:
        stream.write(text)


def write_ogb_csv(data: HiddenLabels, folder: Path) -> Path:
    """An OGB node-property folder in the CSV layout (NaN labels written as ``nan``; features with 9 significant
    digits, which give float32 values back exactly)."""
    raw = folder / "raw"
    raw.mkdir(parents=True)
    _gz_text(raw / "edge.csv.gz", "".join(f"{s},{t}\n" for s, t in data.edges))
    _gz_text(raw / "node-feat.csv.gz", "".join(",".join(f"{v:.9g}" for v in row) + "\n" for row in data.features))
    _gz_text(raw / "node-label.csv.gz", "".join(f"{v:g}\n" for v in data.labels))
    _gz_text(raw / "num-node-list.csv.gz", f"{data.labels.shape[0]}\n")
    _write_split(data, folder)
    return folder


def write_ogb_binary(data: HiddenLabels, folder: Path) -> Path:
    """An OGB node-property folder in the binary layout: ``raw/data.npz`` and ``raw/node-label.npz``."""
    raw = folder / "raw"
    raw.mkdir(parents=True)
    np.savez_compressed(raw / "data.npz", edge_index=data.edges.T.copy(), node_feat=data.features,
                        num_nodes_list=np.array([data.labels.shape[0]]), num_edges_list=np.array([data.edges.shape[0]]))
    np.savez_compressed(raw / "node-label.npz", node_label=data.labels.reshape(-1, 1).astype(np.float32))
    _write_split(data, folder)
    return folder
