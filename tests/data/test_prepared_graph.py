"""The prepared graph: written once, memory-mapped by every worker, cut into row blocks without reading
the rest; its fingerprint equals the in-memory graph's."""

from __future__ import annotations

import os

import numpy as np
import pytest
import scipy.sparse as sp

from gridgnn.config import TrainConfig
from gridgnn.data.prepared import RowBlockCSR, graph_digest, open_prepared, prepare_graph
from gridgnn.errors import DataError
from gridgnn.sparse.adjacency import gcn_normalize
from gridgnn.train.checkpoint.fingerprint import run_fingerprint
from gridgnn.train.run.training import load_graph


@pytest.mark.parametrize("dataset", ["cora", "csbm:nodes=300"])
def test_prepared_graph_round_trips(tmp_path, dataset):
    config = TrainConfig(dataset=dataset, data_root="../shared/datasets")
    graph = load_graph(config)
    prepared = open_prepared(prepare_graph(graph, tmp_path))
    norm = gcn_normalize(graph.adj)
    assert (prepared.num_nodes, prepared.num_edges, prepared.num_features, prepared.num_classes) == (
        graph.num_nodes, graph.num_edges, graph.num_features, graph.num_classes)
    for r0, r1 in [(0, 7), (5, 5), (100, graph.num_nodes)]:
        block = prepared.norm_adj[r0:r1]
        assert isinstance(block, sp.csr_matrix) and (block != norm[r0:r1]).nnz == 0
        features = prepared.features[r0:r1, 3:9]
        expected = graph.features[r0:r1, 3:9]
        np.testing.assert_array_equal(features.toarray() if sp.issparse(features) else features,
                                      expected.toarray() if sp.issparse(expected) else expected)
    np.testing.assert_array_equal(prepared.labels, graph.labels)
    np.testing.assert_array_equal(prepared.test_mask, graph.test_mask)
    assert prepared.digest == graph_digest(graph)
    assert run_fingerprint(config, prepared) == run_fingerprint(config, graph)  # checkpoints move between them


def test_row_block_checks_column_ids_of_the_rows_it_cuts():
    indptr = np.array([0, 1, 2], dtype=np.int64)
    matrix = RowBlockCSR(indptr, np.array([0, 9], dtype=np.int32), np.ones(2, np.float32), (2, 2), "m")
    assert matrix[0:1].nnz == 1
    with pytest.raises(DataError, match="column ids outside"):
        matrix[1:2]


def test_a_damaged_prepared_folder_is_one_line(tmp_path):
    graph = load_graph(TrainConfig(dataset="csbm:nodes=100"))
    folder = prepare_graph(graph, tmp_path)
    (folder / "labels.npy").write_bytes(b"\x93NUMPY garbage")
    with pytest.raises(DataError, match="labels.npy"):
        open_prepared(folder)
    (folder / "prepared.json").write_text("{")
    with pytest.raises(DataError, match="cannot read prepared.json"):
        open_prepared(folder)


def test_gridgnn_prepare_then_train_on_the_folder(tmp_path, capsys):
    import json
    import subprocess
    import sys

    from gridgnn.cli.main import main
    from gridgnn.train.run.training import run_training

    folder = tmp_path / "prepared"
    assert main(["prepare", "csbm:nodes=300", "--out", str(folder)]) == 0
    assert main(["prepare", "csbm:nodes=300", "--out", str(folder)]) == 2  # never overwrites
    assert "exists" in capsys.readouterr().err
    assert main(["train", "--dataset", str(folder), "--epochs", "2"]) == 2  # local runs need the original
    out = tmp_path / "m.json"
    done = subprocess.run([sys.executable, "-m", "gridgnn", "train", "--dataset", str(folder), "--algo", "2d",
                           "--nprocs", "2", "--grid", "1x2", "--epochs", "3", "--quiet", "--metrics-out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    metrics = json.loads(out.read_text())
    local = run_training(TrainConfig(dataset="csbm:nodes=300", epochs=3, quiet=True))
    np.testing.assert_allclose([e["loss"] for e in metrics["epochs"]], [r.loss for r in local.result.epochs],
                               rtol=1e-5)
    assert metrics["setup"]["prepared_graph"] and metrics["dataset"]["num_nodes"] == 300


def _rss_file_kib() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("RssFile:"))


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads the resident set from /proc (Linux)")
def test_release_pages_drops_the_mapped_rows_from_the_resident_set_and_keeps_the_data(tmp_path):
    graph = load_graph(TrainConfig(dataset="rmat:scale=15,edge_factor=16,features=64"))
    prepared = open_prepared(prepare_graph(graph, tmp_path))
    expected = int(np.asarray(prepared.norm_adj.indices, dtype=np.int64).sum()), float(prepared.features.sum())
    before = _rss_file_kib()  # indices, data and the 8 MiB feature matrix are resident after those reads
    mapped_kib = (prepared.norm_adj.indices.nbytes + prepared.features.nbytes) // 1024
    prepared.release_pages()
    assert before - _rss_file_kib() > 0.8 * mapped_kib
    assert (int(np.asarray(prepared.norm_adj.indices, dtype=np.int64).sum()), float(prepared.features.sum())) \
        == expected  # read back from the page cache
