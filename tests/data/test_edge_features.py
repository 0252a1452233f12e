"""Edge features through the data layer (`gridgnn.data.edge_features`): every source that carries them, and what
each loading step does to them (documented in docs/edge-features.md), with one-line refusals of bad files."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
import torch

from gridgnn.cli.main import main
from gridgnn.data.attach import NodeFiles
from gridgnn.data.interop import graph_from_pyg
from gridgnn.data.prepared import graph_of_prepared, open_prepared, prepare_graph
from gridgnn.data.readers.native import load_native, save_graph
from gridgnn.data.registry import load_dataset
from gridgnn.data.reorder import permute
from gridgnn.errors import DataError

Data = pytest.importorskip("torch_geometric.data").Data


def _by_edge(graph) -> dict[tuple[int, int], list[float]]:
    """(src, dst) -> the edge's feature row, for every stored edge."""
    coo = graph.adj.tocoo()
    pairs = zip(coo.col, coo.row, strict=True)
    return {(int(s), int(d)): graph.edge_attr[k].tolist() for k, (s, d) in enumerate(pairs)}


def _pyg_graph(directed: bool):
    # edges src -> dst: 0->1 (1), 1->2 twice (2 and 4), 2->0 (5), 2->3 (7), 0->2 (9: 2->0 exists too), 3->3 (self-loop)
    edge_index = torch.tensor([[0, 1, 1, 2, 2, 0, 3], [1, 2, 2, 0, 3, 2, 3]])
    edge_attr = torch.tensor([[1.0], [2.0], [4.0], [5.0], [7.0], [9.0], [11.0]])
    return graph_from_pyg(Data(edge_index=edge_index, edge_attr=edge_attr, num_nodes=4), directed=directed)


def test_undirected_loading_copies_a_missing_reverse_keeps_both_directions_averages_duplicates_and_drops_loops():
    edges = _by_edge(_pyg_graph(directed=False))
    assert edges[(0, 1)] == [1.0] and edges[(1, 0)] == [1.0]  # added reverse: a copy of its forward edge
    assert edges[(1, 2)] == [3.0] and edges[(2, 1)] == [3.0]  # 1->2 given twice: the mean, then copied
    assert edges[(2, 0)] == [5.0] and edges[(0, 2)] == [9.0]  # stored both ways: each keeps its own
    assert edges[(2, 3)] == [7.0] and edges[(3, 2)] == [7.0]
    assert (3, 3) not in edges and len(edges) == 8  # the self-loop and its features are gone


def test_directed_loading_keeps_the_stored_edges_only():
    assert _by_edge(_pyg_graph(directed=True)) == {(0, 1): [1.0], (1, 2): [3.0], (2, 0): [5.0], (2, 3): [7.0],
                                                    (0, 2): [9.0]}


def test_reordering_moves_each_row_with_its_edge():
    graph = _pyg_graph(directed=True)
    order = np.array([2, 0, 3, 1])  # new vertex v is old vertex order[v]
    moved = _by_edge(permute(graph, order))
    new_of = {int(old): new for new, old in enumerate(order)}
    assert moved == {(new_of[s], new_of[d]): row for (s, d), row in _by_edge(graph).items()}


def test_the_native_file_and_a_prepared_folder_keep_them_and_a_self_loop_gets_its_in_edges_mean(tmp_path):
    graph = load_dataset("mesh:nodes=80")
    assert graph.edge_attr.shape == (graph.num_edges, 3)
    again = load_native(save_graph(graph, tmp_path / "mesh.npz"))
    np.testing.assert_array_equal(again.edge_attr, graph.edge_attr)
    prepared = open_prepared(prepare_graph(graph, tmp_path / "prepared", operator="sum"))
    assert prepared.num_edge_features == 3
    np.testing.assert_array_equal(graph_of_prepared(prepared).edge_attr, graph.edge_attr)
    with_loops = open_prepared(prepare_graph(graph, tmp_path / "gcn", operator="gcn"))  # A + I
    assert with_loops.edge_attr.shape == (graph.num_edges + graph.num_nodes, 3)
    np.testing.assert_array_equal(graph_of_prepared(with_loops).edge_attr, graph.edge_attr)
    norm = with_loops.norm_adj[0:graph.num_nodes]
    first = graph.adj.indptr[1]  # vertex 0's in-edges; its loop's row is their mean (PyG's fill_value="mean")
    loop = norm.indptr[0] + int(np.flatnonzero(norm.indices[norm.indptr[0]:norm.indptr[1]] == 0)[0])
    np.testing.assert_allclose(with_loops.edge_attr[loop], graph.edge_attr[:first].mean(axis=0), rtol=1e-6)


def test_an_edge_list_takes_edge_features_in_its_line_order(tmp_path):
    (tmp_path / "g.edges").write_text("10 20\n20 30\n10 20\n30 10\n")  # a duplicate line, ids renumbered
    np.save(tmp_path / "e.npy", np.array([[1.0, 0.0], [2.0, 0.0], [3.0, 1.0], [4.0, 0.0]], dtype=np.float32))
    graph = load_dataset(str(tmp_path / "g.edges"), directed=True, node_files=NodeFiles(edge_features=str(
        tmp_path / "e.npy")))
    assert _by_edge(graph) == {(0, 1): [2.0, 0.5], (1, 2): [2.0, 0.0], (2, 0): [4.0, 0.0]}
    assert graph.meta["edge_features_sha256"]


def test_ogb_csv_and_binary_folders_read_their_edge_features(tmp_path):
    raw = tmp_path / "csv" / "raw"
    raw.mkdir(parents=True)
    for name, text in (("edge", "0,1\n1,2\n2,0\n"), ("edge-feat", "0.5,1\n1.5,2\n2.5,3\n")):
        with gzip.open(raw / f"{name}.csv.gz", "wt") as stream:
            stream.write(text)
    csv = load_dataset(str(tmp_path / "csv"), directed=True)
    assert _by_edge(csv) == {(0, 1): [0.5, 1.0], (1, 2): [1.5, 2.0], (2, 0): [2.5, 3.0]}
    binary = tmp_path / "bin" / "raw"
    binary.mkdir(parents=True)
    np.savez(binary / "data.npz", edge_index=np.array([[0, 1, 2], [1, 2, 0]]), num_nodes_list=np.array([3]),
             edge_feat=np.array([[0.5, 1], [1.5, 2], [2.5, 3]], dtype=np.float32))
    assert _by_edge(load_dataset(str(tmp_path / "bin"), directed=True)) == _by_edge(csv)


@pytest.mark.parametrize(("rows", "message"), [
    (np.ones((5, 2), dtype=np.float32), "5 edge-feature rows for 4 edges"),
    (np.array([[1.0], [np.nan], [1.0], [1.0]], dtype=np.float32), "edge features contain NaN or inf"),
    (np.ones((4, 2, 2), dtype=np.float32), "edge features must be (E, d)"),
])
def test_a_bad_edge_features_file_is_one_line_and_exit_2(tmp_path, capsys, rows, message):
    (tmp_path / "g.edges").write_text("0 1\n1 2\n2 0\n0 2\n")
    np.save(tmp_path / "e.npy", rows)
    with pytest.raises(DataError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_dataset(str(tmp_path / "g.edges"), directed=True, node_files=NodeFiles(edge_features=str(
            tmp_path / "e.npy")))
    assert main(["info", str(tmp_path / "g.edges"), "--directed", "--edge-features", str(tmp_path / "e.npy")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_info_reports_them(capsys):
    assert main(["info", "mesh:nodes=60", "--json"]) == 0
    import json

    stats = json.loads(capsys.readouterr().out)
    assert stats["edge_features"] == 3 and stats["edge_feature_bytes"] == 12 * stats["stored_edges"]
