"""The real datasets of ../shared/datasets load with the counts their READMEs state."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from gridgnn.data import graph_statistics, load_dataset
from gridgnn.data.readers.planetoid import read_planetoid
from gridgnn.data.transforms import remove_self_loops, symmetrize

DATA = Path(__file__).resolve().parents[3] / "shared" / "datasets"
pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason=f"no shared datasets at {DATA}")

# name: (nodes, undirected edges without self-loops, features, classes), from the dataset READMEs.
KNOWN_COUNTS = {
    "cora": (2708, 5278, 1433, 7),
    "citeseer": (3327, 4552, 3703, 6),
    "amazon-photo": (7650, 119081, 745, 8),
    "amazon-computers": (13752, 245861, 767, 10),
    "coauthor-cs": (18333, 81894, 6805, 15),
    "coauthor-physics": (34493, 247962, 8415, 5),
}
# file under DATA: (nodes, undirected edges)
STRUCTURE_ONLY = {
    "suitesparse-mtx/ca-AstroPh.mtx": (18772, 198050),
    "suitesparse-mtx/ca-GrQc.mtx": (5242, 14484),
    "networkrepository-edgelists/soc-brightkite.txt": (56739, 212945),
    "networkrepository-edgelists/ca-HepPh.txt": (11203, 117618),
    "networkrepository-edgelists/soc-epinions.txt": (26588, 100120),
    "networkrepository-edgelists/ca-CondMat.txt": (21363, 91286),
}


@pytest.mark.parametrize("name", sorted(KNOWN_COUNTS))
def test_known_dataset_counts(name: str) -> None:
    graph = load_dataset(name, data_root=str(DATA))
    nodes, edges, features, classes = KNOWN_COUNTS[name]
    assert (graph.num_nodes, graph.adj.nnz // 2, graph.num_features, graph.num_classes) == (
        nodes, edges, features, classes,
    )  # fmt: skip
    assert graph.adj.nnz == 2 * edges and not graph.directed
    assert graph.adj.diagonal().sum() == 0 and (graph.adj != graph.adj.T).nnz == 0
    assert sp.issparse(graph.features) and graph.features.dtype == np.float32
    assert graph.name == name


@pytest.mark.parametrize("relative", sorted(STRUCTURE_ONLY))
def test_structure_only_counts(relative: str) -> None:
    graph = load_dataset(str(DATA / relative))
    nodes, edges = STRUCTURE_ONLY[relative]
    assert (graph.num_nodes, graph.adj.nnz // 2) == (nodes, edges)
    assert graph.num_classes == 1 and graph.features.shape == (nodes, 16)
    assert graph.train_mask.sum() == round(0.6 * nodes)


def test_cora_split_and_normalization() -> None:
    graph = load_dataset("cora", data_root=str(DATA))
    assert (graph.train_mask.sum(), graph.val_mask.sum(), graph.test_mask.sum()) == (140, 500, 1000)
    assert np.flatnonzero(graph.train_mask).tolist() == list(range(140))
    assert np.flatnonzero(graph.val_mask).tolist() == list(range(140, 640))
    row_sums = np.asarray(graph.features.sum(axis=1)).ravel()
    assert np.allclose(row_sums[row_sums > 0], 1.0) and graph.meta["feature_normalization"] == "l1-row"
    raw = load_dataset("cora", data_root=str(DATA), normalize_features=False)
    assert set(np.unique(raw.features.data)) == {1.0}


def test_citeseer_padded_isolated_test_nodes() -> None:
    graph = read_planetoid(DATA / "citeseer")
    padded = ~(graph.train_mask | graph.val_mask | graph.test_mask) & (np.arange(graph.num_nodes) >= 2312)
    assert padded.sum() == 15 == graph.meta["padded_nodes"]
    assert graph.features[np.flatnonzero(padded)].nnz == 0
    assert (graph.train_mask.sum(), graph.val_mask.sum(), graph.test_mask.sum()) == (120, 500, 1000)


@pytest.mark.parametrize(("folder", "pyg_name"), [("cora", "Cora"), ("citeseer", "CiteSeer")])
def test_planetoid_matches_pyg(tmp_path: Path, folder: str, pyg_name: str) -> None:
    planetoid = pytest.importorskip("torch_geometric.datasets").Planetoid
    raw = tmp_path / pyg_name / "raw"
    shutil.copytree(DATA / folder, raw, ignore=shutil.ignore_patterns("README.md"))
    data = planetoid(str(tmp_path), pyg_name)[0]
    graph = read_planetoid(DATA / folder)
    assert np.array_equal(graph.features.toarray(), data.x.numpy())
    assert np.array_equal(graph.labels, data.y.numpy())
    for mask in ("train_mask", "val_mask", "test_mask"):
        assert np.array_equal(getattr(graph, mask), getattr(data, mask).numpy())
    src, dst = data.edge_index.numpy()
    expected = sp.csr_matrix((np.ones(src.size), (dst, src)), shape=graph.adj.shape)
    assert (remove_self_loops(symmetrize(graph.adj)) != expected).nnz == 0


def test_gnn_benchmark_matches_pyg_amazon(tmp_path: Path) -> None:
    amazon = pytest.importorskip("torch_geometric.datasets").Amazon
    with zipfile.ZipFile(DATA / "amazon-photo" / "amazon-photo.zip") as archive:
        archive.extractall(tmp_path / "Photo" / "raw")
    data = amazon(str(tmp_path), "Photo")[0]
    graph = load_dataset("amazon-photo", data_root=str(DATA), normalize_features=False)  # raw, as PyG stores it
    assert np.array_equal(graph.features.toarray(), data.x.numpy())
    assert np.array_equal(graph.labels, data.y.numpy())
    src, dst = data.edge_index.numpy()
    expected = sp.csr_matrix((np.ones(src.size), (dst, src)), shape=graph.adj.shape)
    assert (graph.adj != expected).nnz == 0


def test_gnn_benchmark_split_is_per_class_and_seeded() -> None:
    first = load_dataset("coauthor-cs", data_root=str(DATA), seed=3)
    again = load_dataset("coauthor-cs", data_root=str(DATA), seed=3)
    other = load_dataset("coauthor-cs", data_root=str(DATA), seed=4)
    assert np.array_equal(first.train_mask, again.train_mask)
    assert not np.array_equal(first.train_mask, other.train_mask)
    assert np.all(np.bincount(first.labels[first.train_mask], minlength=15) == 20)
    assert np.all(np.bincount(first.labels[first.val_mask], minlength=15) == 30)
    assert not np.any(first.train_mask & first.val_mask) and first.test_mask.sum() == 18333 - 750


def test_statistics_of_cora() -> None:
    stats = graph_statistics(load_dataset("cora", data_root=str(DATA)))
    assert stats["nodes"] == 2708 and stats["undirected_edges"] == 5278 and stats["stored_edges"] == 10556
    assert stats["in_degree_min"] >= 1 and stats["in_degree_max"] == 168 and stats["isolated_nodes"] == 0
    assert (stats["train"], stats["val"], stats["test"]) == (140, 500, 1000)
    assert stats["features_sparse"] and 0.98 < stats["feature_sparsity"] < 1.0
    assert stats["density"] == pytest.approx(10556 / 2708**2)


def test_gnn_benchmark_features_default_to_l2_rows() -> None:
    graph = load_dataset("amazon-photo", data_root=str(DATA))
    norms = np.sqrt(np.asarray(graph.features.multiply(graph.features).sum(axis=1)).ravel())
    assert graph.meta["feature_normalization"] == "l2-row"
    assert np.allclose(norms[norms > 0], 1.0, atol=1e-5)
