"""Dataset specs, data-root resolution, preprocessing defaults, PyG interop and statistics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from gridgnn.data import graph_statistics, load_dataset, resolve_data_root
from gridgnn.data.generators import csbm
from gridgnn.data.interop import graph_from_pyg, graph_to_pyg
from gridgnn.data.registry import DATA_ROOT_ENV
from gridgnn.errors import DataError


def test_resolve_data_root_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DATA_ROOT_ENV, str(tmp_path / "env"))
    assert resolve_data_root(str(tmp_path / "flag")) == tmp_path / "flag"
    assert resolve_data_root(None) == tmp_path / "env"
    monkeypatch.delenv(DATA_ROOT_ENV)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "shared" / "datasets").mkdir(parents=True)
    (tmp_path / "repo").mkdir()
    monkeypatch.chdir(tmp_path / "repo")  # ../shared/datasets from here is no longer a data root
    assert resolve_data_root(None) == tmp_path / "home" / ".gridgnn" / "datasets"
    monkeypatch.chdir(tmp_path)
    assert resolve_data_root(None) == tmp_path / "home" / ".gridgnn" / "datasets"


def test_a_missing_named_dataset_names_where_it_looked_and_how_to_get_it(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv(DATA_ROOT_ENV, raising=False)
    for data_root, env, root, chosen in ((str(tmp_path / "flag"), None, tmp_path / "flag", "--data-root"),
                                         (None, str(tmp_path / "env"), tmp_path / "env", "$GRIDGNN_DATA_ROOT"),
                                         (None, None, tmp_path / "home" / ".gridgnn" / "datasets", "the default")):
        if env:
            monkeypatch.setenv(DATA_ROOT_ENV, env)
        else:
            monkeypatch.delenv(DATA_ROOT_ENV, raising=False)
        with pytest.raises(DataError) as info:
            load_dataset("amazon-photo", data_root=data_root)
        message = str(info.value)
        assert "\n" not in message and f"looked in {root / 'amazon-photo'}" in message, message
        assert chosen in message and "docs/datasets.md" in message and "--data-root" in message, message


def test_known_name_resolves_under_root(tmp_path: Path) -> None:
    folder = tmp_path / "cora"
    folder.mkdir()
    (folder / "graph.txt").write_text("1 2\n2 3\n")  # any readable content works under a known name
    graph = load_dataset("Cora", data_root=str(tmp_path))
    assert graph.name == "cora" and graph.num_nodes == 3
    with pytest.raises(DataError, match=r"dataset 'citeseer' not found under data root"):
        load_dataset("citeseer", data_root=str(tmp_path))


def test_generator_specs() -> None:
    default = load_dataset("csbm")
    assert (default.num_nodes, default.num_classes, default.num_features, default.name) == (2000, 5, 32, "csbm")
    graph = load_dataset("csbm:nodes=600, classes=3,features=4,homophily=0.9,seed=7")
    assert (graph.num_nodes, graph.num_classes, graph.num_features) == (600, 3, 4)
    same = csbm(nodes=600, classes=3, features=4, homophily=0.9, seed=7)
    assert (graph.adj != same.adj).nnz == 0  # the spec's seed wins over load_dataset's
    big = load_dataset("rmat:scale=8,edge_factor=4,features=3,classes=4", seed=1)
    assert big.num_nodes == 256 and big.num_features == 3 and big.num_classes == 4
    assert load_dataset("csbm:nodes=1e3").num_nodes == 1000


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("csbm:size=10", "unknown or malformed 'size=10'"),
        ("csbm:nodes", "unknown or malformed 'nodes'"),
        ("csbm:nodes=ten", "nodes='ten' is not a valid int"),
        ("csbm:nodes=10.5", "not a valid int"),
        ("csbm:homophily=nan", "not a valid float"),
        ("csbm:nodes=5,nodes=6", "'nodes' given twice"),
        ("csbm:homophily=1.5", "homophily must lie in"),
        ("csbm:p_in=0.1", "give both p_in and p_out"),
        ("rmat:scale=0", "scale must lie in"),
        ("rmat:a=0.9,b=0.2", r"a \+ b \+ c <= 1"),
        ("nope", "unknown dataset 'nope'.*cora, citeseer, amazon-photo"),
        ("  ", "empty dataset spec"),
    ],
)
def test_bad_specs(spec: str, message: str) -> None:
    with pytest.raises(DataError, match=message):
        load_dataset(spec)


def test_preprocessing_flags(tmp_path: Path) -> None:
    path = tmp_path / "g.txt"
    path.write_text("0 1\n1 2\n2 2\n1 2\n")
    undirected = load_dataset(str(path))
    assert not undirected.directed and undirected.adj.nnz == 4 and undirected.adj.diagonal().sum() == 0
    directed = load_dataset(str(path), directed=True)
    assert directed.directed and directed.adj.nnz == 2 and directed.adj[1, 0] == 1
    normalized = load_dataset(str(path), normalize_features=True)
    assert np.allclose(np.abs(normalized.features).sum(axis=1), 1.0)
    assert normalized.meta["feature_normalization"] == "l1-row" and undirected.meta["symmetrized"]


def test_pyg_round_trip() -> None:
    pytest.importorskip("torch_geometric")
    graph = csbm(nodes=200, classes=4, features=6, seed=3, directed=True)
    data = graph_to_pyg(graph)
    back = graph_from_pyg(data, name="back", directed=True)
    assert (back.adj != graph.adj).nnz == 0 and back.directed
    raw = graph_from_pyg(data, name="raw", preprocess=False)
    assert (raw.adj != graph.adj).nnz == 0 and raw.directed and "symmetrized" not in raw.meta
    assert np.array_equal(back.features, graph.features) and np.array_equal(back.labels, graph.labels)
    assert np.array_equal(back.test_mask, graph.test_mask) and back.num_classes == 4


def test_graph_from_pyg_variants() -> None:
    torch = pytest.importorskip("torch")
    data_cls = pytest.importorskip("torch_geometric.data").Data
    edge_index = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    masks = torch.zeros(3, 2, dtype=torch.bool)
    masks[0, 1] = True
    data = data_cls(edge_index=edge_index, num_nodes=3, y=torch.tensor([[0], [2], [1]]))
    data.train_mask, data.val_mask, data.test_mask = masks, ~masks, masks
    graph = graph_from_pyg(data, split=1)
    assert graph.num_classes == 3 and not graph.directed and graph.features.shape == (3, 16)
    assert graph.train_mask.tolist() == [True, False, False]
    with pytest.raises(DataError, match="split 5 not in the 2 columns"):
        graph_from_pyg(data, split=5)
    bad = data_cls(edge_index=torch.tensor([[0, 3], [1, 0]]), num_nodes=3)
    with pytest.raises(DataError, match="vertex id 3 is outside"):
        graph_from_pyg(bad)


def test_statistics_small() -> None:
    adj = sp.csr_matrix(np.array([[0, 1, 0, 0], [1, 1, 0, 0], [0, 0, 0, 0], [0, 0, 1, 0]], dtype=np.float32))
    graph = csbm(nodes=4, classes=2, features=3, seed=0)
    graph = type(graph)(**{**graph.__dict__, "adj": adj, "directed": True})
    stats = graph_statistics(graph)
    assert stats["stored_edges"] == 4 and stats["self_loops"] == 1 and stats["isolated_nodes"] == 0
    assert (stats["in_degree_min"], stats["in_degree_max"], stats["in_degree_mean"]) == (0, 2, 1.0)
    assert "undirected_edges" not in stats and stats["feature_density"] == 1.0
