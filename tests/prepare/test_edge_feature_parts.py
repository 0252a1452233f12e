"""``prepare EDGES --nprocs P --edge-features F.npy`` (`gridgnn.prepare.edge_rows`): each process reads the rows of
its own edges, the rows travel with their entries, and the folder equals the one-process folder, its edge
features included (duplicates averaged, reverse entries copying their edge's row, self-loops dropped, GAT's
loops the mean of their vertex's entries, a random order), on an edge list and an edge array, undirected and
directed; a file that does not fit stops every process with the line one process prints."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from prepare_workers import job_args, prepare_worker
from test_distributed_prepare import assert_same_graph, assert_same_reordered_graph, distributed

from gridgnn.data.attach import NodeFiles
from gridgnn.data.prepared import open_prepared, prepare_graph
from gridgnn.data.registry import load_dataset
from gridgnn.data.reorder import reorder_graph
from gridgnn.errors import DataError
from gridgnn.launch.spawn import WorkerError, run_workers
from gridgnn.nn.models import operator_of
from gridgnn.prepare.launch import plan_job


def edge_list(tmp_path: Path, *, array: bool = False, one_column: bool = False) -> tuple[str, str]:
    """An edge list (or ``.npy`` edge array) with duplicate edges, edges given both ways and self-loops, and its
    edge features (one row per edge, in its order)."""
    rng = np.random.default_rng(7)
    edges = rng.integers(0, 400, size=(2500, 2)) * 3 + 2
    edges[:40] = edges[40:80]  # duplicates: averaged
    edges[100:140] = edges[140:180][:, ::-1]  # both directions: each keeps its own
    edges[200:210, 1] = edges[200:210, 0]  # self-loops: dropped with their rows
    if array:
        source = tmp_path / "edges.npy"
        np.save(source, edges)
    else:
        source = tmp_path / "edges.txt"
        source.write_text("# source target\n" + "\n".join(f"{a} {b}" for a, b in edges) + "\n")
    values = rng.normal(size=2500) if one_column else rng.normal(size=(2500, 3)).astype(np.float32)
    np.save(tmp_path / "ef.npy", values)
    return str(source), str(tmp_path / "ef.npy")


def one_process(tmp_path: Path, source: str, features: str, model: str, reorder: str | None = None,
                **flags) -> Path:
    graph = load_dataset(source, directed=flags.get("directed", False), seed=flags.get("seed", 0),
                         node_files=NodeFiles(edge_features=features))
    if reorder:
        graph = reorder_graph(graph, reorder, flags.get("parts", 1), flags.get("seed", 0))
    return prepare_graph(graph, tmp_path / "one", operator=operator_of(model))


def assert_same_edge_rows(expected: Path, actual: Path) -> None:
    a, b = open_prepared(expected), open_prepared(actual)
    assert a.edge_attr is not None and b.edge_attr is not None
    x, y = np.asarray(a.edge_attr), np.asarray(b.edge_attr)
    assert x.dtype == y.dtype == np.float32 and np.array_equal(x, y)
    assert json.loads((actual / "prepared.json").read_text())["num_edge_features"] == x.shape[1]


@pytest.mark.parametrize("nprocs, shards, model, directed, array, one_column", [
    (2, 2, "gcn", False, False, False),
    (3, 5, "gat", False, False, True),  # loops: their vertex's mean; a 1-D float64 file: one feature
    (2, 3, "sage", True, False, False),  # directed: the reverse entries only count the placeholder degree
    (3, 3, "gin", False, True, False),  # an edge array
])
def test_edge_features_prepared_by_p_processes_equal_the_one_process_folder(tmp_path, nprocs, shards, model,
                                                                           directed, array, one_column):
    source, features = edge_list(tmp_path, array=array, one_column=one_column)
    expected = one_process(tmp_path, source, features, model, directed=directed)
    actual = distributed(tmp_path, source, model, nprocs, shards, directed=directed, edge_features=features)
    assert_same_graph(expected, actual)
    assert_same_edge_rows(expected, actual)


def test_edge_features_in_a_random_order(tmp_path):
    source, features = edge_list(tmp_path)
    expected = one_process(tmp_path, source, features, "gat", reorder="random", parts=2, seed=3)
    actual = distributed(tmp_path, source, "gat", 2, 3, edge_features=features, reorder="random", parts=2, seed=3)
    assert_same_reordered_graph(expected, actual)
    assert_same_edge_rows(expected, actual)


@pytest.mark.parametrize("damage", ["rows", "nan"])
def test_a_file_that_does_not_fit_stops_every_process_with_the_one_process_line(tmp_path, damage):
    source, features = edge_list(tmp_path)
    values = np.load(features)
    if damage == "rows":
        values = values[:-3]
    else:
        values[2400] = np.nan  # in the last process's edges only
    np.save(features, values)
    with pytest.raises(DataError) as one:
        load_dataset(source, node_files=NodeFiles(edge_features=features))
    folder = tmp_path / "many"
    folder.mkdir()
    job = plan_job(job_args(source, edge_features=features), "gcn", 2, str(folder))
    with pytest.raises(WorkerError) as many:
        run_workers(prepare_worker, 2, vars(job) | {"command": "prepare"}, timeout_s=120)
    assert str(one.value) in str(many.value)
    assert not (folder / "prepared.json").exists()


@pytest.mark.parametrize("directed", [False, True])
def test_duplicates_spread_over_processes_are_summed_in_the_one_process_order(tmp_path, monkeypatch, directed):
    """An edge given four times, on lines that three processes read, with values whose float64 sum depends on
    the order (1e30 + 1 - 1e30), routed in rounds of 100 edges (so a later line of one process arrives before an
    earlier line of the next): the mean is the one process's to the bit; directed too, where the rows travel with
    the edges alone, beside the entries that only count a degree."""
    from gridgnn.prepare import pipeline

    monkeypatch.setattr(pipeline, "ROUND_EDGES", 100)  # forked workers inherit it
    rng = np.random.default_rng(3)
    edges = rng.integers(0, 300, size=(2400, 2)) * 2 + 1
    lines = [5, 790, 850, 1650]  # rounds 0 and 7 of process 0, round 0 of processes 1 and 2: they arrive
    # 5, 850, 1650, 790, and the file's order gives another float64 sum
    edges[lines] = [7, 9]
    edges[1000] = [9, 7]  # its reverse given once: the entry (7, 9) keeps the edges' own mean
    values = rng.normal(size=(2400, 2)).astype(np.float32)
    values[lines] = np.array([[1e30, 3.0], [1.0, -1e30], [-1e30, 1.0], [3.0, 1e30]], dtype=np.float32)
    source = tmp_path / "edges.npy"  # rows [800 p, 800 (p + 1)) per process, exactly
    np.save(source, edges)
    np.save(tmp_path / "ef.npy", values)
    features = str(tmp_path / "ef.npy")
    expected = one_process(tmp_path, str(source), features, "gin", directed=directed)  # the sum operator: A
    actual = distributed(tmp_path, str(source), "gin", 3, 3, edge_features=features, directed=directed)
    assert_same_edge_rows(expected, actual)
