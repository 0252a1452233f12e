"""Readers on small files the tests write: native round trip, OGB, Matrix Market, edge lists, gnn-benchmark."""

from __future__ import annotations

import gzip
import zipfile
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from gridgnn.data import Graph, load_dataset, load_native, save_graph
from gridgnn.data.formats import read_path
from gridgnn.data.generators import csbm
from gridgnn.data.readers.edgelist import read_edgelist, read_edgelist_adjacency
from gridgnn.data.readers.gnn_benchmark import read_gnn_benchmark
from gridgnn.data.readers.mtx import read_mtx
from gridgnn.data.readers.ogb import read_ogb


def _assert_same_graph(a: Graph, b: Graph) -> None:
    assert (a.name, a.directed, a.num_classes, a.meta) == (b.name, b.directed, b.num_classes, b.meta)
    for attr in ("adj", "features"):
        x, y = getattr(a, attr), getattr(b, attr)
        assert sp.issparse(x) == sp.issparse(y)
        if sp.issparse(x):
            for part in ("data", "indices", "indptr"):
                assert getattr(x, part).dtype == getattr(y, part).dtype
                assert np.array_equal(getattr(x, part), getattr(y, part))
            assert x.shape == y.shape
        else:
            assert x.dtype == y.dtype and np.array_equal(x, y)
    for attr in ("labels", "train_mask", "val_mask", "test_mask"):
        assert getattr(a, attr).dtype == getattr(b, attr).dtype
        assert np.array_equal(getattr(a, attr), getattr(b, attr))


@pytest.mark.parametrize("sparse_features", [False, True])
@pytest.mark.parametrize("directed", [False, True])
def test_native_round_trip(tmp_path: Path, sparse_features: bool, directed: bool) -> None:
    graph = csbm(nodes=300, classes=3, features=8, directed=directed, seed=1)
    features = sp.csr_matrix(graph.features) if sparse_features else graph.features
    graph = Graph(**{**graph.__dict__, "features": features, "name": "tiny graph", "meta": {"k": [1, "x"]}})
    path = save_graph(graph, tmp_path / "g.npz")
    _assert_same_graph(graph, load_native(path))
    _assert_same_graph(graph, read_path(path))
    assert load_dataset(str(path), directed=directed).directed == directed


def _write_csv_gz(path: Path, rows: list) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as file:
        file.writelines(",".join(str(v) for v in np.atleast_1d(row)) + "\n" for row in rows)


def _write_ogb(folder: Path, with_split: bool = True) -> None:
    edges = [(0, 1), (1, 2), (2, 0), (3, 4), (4, 5), (5, 3), (1, 1)]
    _write_csv_gz(folder / "raw" / "edge.csv.gz", edges)
    _write_csv_gz(folder / "raw" / "node-feat.csv.gz", [[i, i * 0.5, -1.0] for i in range(7)])
    _write_csv_gz(folder / "raw" / "node-label.csv.gz", [0, 0, 0, 1, 1, 1, 2])
    _write_csv_gz(folder / "raw" / "num-node-list.csv.gz", [7])
    if with_split:
        split = folder / "split" / "time"
        for part, ids in (("train", [0, 3, 6]), ("valid", [1, 4]), ("test", [2, 5])):
            _write_csv_gz(split / f"{part}.csv.gz", ids)


def test_ogb_folder(tmp_path: Path) -> None:
    folder = tmp_path / "ogbn_tiny"
    _write_ogb(folder)
    graph = read_ogb(folder)
    assert graph.num_nodes == 7 and graph.num_classes == 3 and graph.directed
    assert graph.adj[1, 0] == 1 and graph.adj[0, 1] == 0  # edge 0 -> 1 is adj[dst=1, src=0]
    assert graph.features.shape == (7, 3) and graph.features[4, 1] == 2.0
    assert np.flatnonzero(graph.train_mask).tolist() == [0, 3, 6] and graph.meta["split"] == "time"
    assert np.diff(graph.adj.indptr)[6] == 0  # node 6 isolated, counted via num-node-list
    loaded = load_dataset(str(folder))
    assert not loaded.directed and loaded.adj.nnz == 12  # 6 undirected edges, self-loop removed


def test_ogb_folder_without_split_gets_random_split(tmp_path: Path) -> None:
    _write_ogb(tmp_path / "o", with_split=False)
    graph = read_ogb(tmp_path / "o", seed=2)
    assert graph.meta["split"] == "random-60-20-20"
    assert graph.train_mask.sum() + graph.val_mask.sum() + graph.test_mask.sum() == 7


@pytest.mark.parametrize(
    ("header", "body", "expected_nnz"),
    [
        ("pattern general", "3 3 3\n1 2\n2 3\n3 3\n", 3),
        ("real general", "3 3 3\n1 2 0.5\n2 3 -2\n3 1 0\n", 2),  # explicit zero is no edge
        ("integer symmetric", "3 3 2\n2 1 4\n3 2 1\n", 4),
        ("pattern symmetric", "3 3 2\n2 1\n3 3\n", 3),
    ],
)
def test_matrix_market_variants(tmp_path: Path, header: str, body: str, expected_nnz: int) -> None:
    path = tmp_path / "m.mtx"
    path.write_text(f"%%MatrixMarket matrix coordinate {header}\n% a comment\n{body}")
    graph = read_mtx(path)
    assert graph.num_nodes == 3 and graph.adj.nnz == expected_nnz
    assert set(graph.adj.data) == {1.0}
    if header.endswith("general") and expected_nnz == 3:
        assert graph.adj[1, 0] == 1 and graph.adj[0, 1] == 0 and graph.directed  # entry (1,2) = edge 0 -> 1


@pytest.mark.parametrize(
    ("text", "nodes", "edges"),
    [
        ("# comment\n% other\n1 2 {}\n2 3 {'weight': 3}\n\n3 1 {}\n", 3, [(0, 1), (1, 2), (2, 0)]),
        ("0,1\n1 , 2\n", 3, [(0, 1), (1, 2)]),
        ("source,target\n10,30\n30,20\n", 3, [(0, 2), (2, 1)]),
        ("5\t7\t1.5\n7\t5\t2.5\n7 5\n", 2, [(0, 1), (1, 0)]),
    ],
)
def test_edge_lists(tmp_path: Path, text: str, nodes: int, edges: list) -> None:
    path = tmp_path / "e.txt"
    path.write_text(text)
    graph = read_edgelist(path)
    assert graph.num_nodes == nodes and graph.adj.nnz == len(edges)
    for src, dst in edges:
        assert graph.adj[dst, src] == 1.0
    assert graph.num_classes == 1 and np.all(graph.labels == 0)


def test_edge_list_id_base_and_gzip(tmp_path: Path) -> None:
    path = tmp_path / "e.edges.gz"
    with gzip.open(path, "wt") as file:
        file.write("1 2\n2 5\n")
    assert read_edgelist_adjacency(path).shape == (3, 3)
    assert read_edgelist_adjacency(path, id_base=1).shape == (5, 5)
    assert read_edgelist_adjacency(path, id_base=0).shape == (6, 6)


def test_placeholder_features_are_deterministic(tmp_path: Path) -> None:
    path = tmp_path / "e.txt"
    path.write_text("1 2\n2 3\n3 1\n3 4\n")
    first, again, other = read_edgelist(path, seed=5), read_edgelist(path, seed=5), read_edgelist(path, seed=6)
    assert np.array_equal(first.features, again.features) and not np.array_equal(first.features, other.features)
    assert np.all(first.features[:, 0] == 1) and np.allclose(first.features[:, 1], np.log1p([2, 2, 3, 1]))


def _gnn_benchmark_arrays() -> dict:
    adj = sp.csr_matrix(np.array([[0, 1, 0, 0], [0, 0, 1, 0], [1, 0, 0, 1], [0, 0, 1, 1]], dtype=np.float32))
    attr = sp.csr_matrix(np.eye(4, 3, dtype=np.float32))
    arrays = {f"adj_{k}": getattr(adj, k) for k in ("data", "indices", "indptr")}
    arrays.update({f"attr_{k}": getattr(attr, k) for k in ("data", "indices", "indptr")})
    arrays.update(adj_shape=np.array(adj.shape), attr_shape=np.array(attr.shape), labels=np.array([0, 1, 1, 0]))
    arrays["class_names"] = np.array(["a", "b"], dtype=object)  # never read (needs pickle)
    return arrays


def test_gnn_benchmark_npz_and_zip(tmp_path: Path) -> None:
    npz = tmp_path / "tiny.npz"
    np.savez(npz, **_gnn_benchmark_arrays())
    archive = tmp_path / "zipped" / "tiny.zip"
    archive.parent.mkdir()
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.write(npz, "tiny.npz")
    for path in (npz, archive, archive.parent):
        graph = read_path(path)
        assert graph.num_nodes == 4 and graph.adj[1, 0] == 1 and graph.adj[0, 1] == 0
        assert graph.name == "tiny" and sp.issparse(graph.features) and graph.num_classes == 2
        assert graph.train_mask.sum() == 4  # classes smaller than 20 give all their nodes to training
    assert read_gnn_benchmark(npz).meta["format"] == "gnn-benchmark"
