"""Distributed preparation: P processes each read their part of the input and write their shards, and the
folder holds the same graph as the one-process ``prepare`` (equal arrays, equal content digest), for several
P, shard counts, operators and directions, on the test graphs and on R-MAT; its workers read it for any grid."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from prepare_workers import job_args, prepare_worker, renumber_worker

from gridgnn.data.prepared import open_prepared, prepare_graph
from gridgnn.data.registry import load_dataset
from gridgnn.launch.spawn import run_workers
from gridgnn.nn.models import operator_of
from gridgnn.prepare.launch import plan_job

EDGE_LISTS = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "networkrepository-edgelists"
ARRAYS = ("features", "labels", "train_mask", "val_mask", "test_mask")


def one_process(tmp_path: Path, dataset: str, model: str, **flags) -> Path:
    from gridgnn.data.attach import NodeFiles

    graph = load_dataset(dataset, directed=flags.get("directed", False), seed=flags.get("seed", 0),
                         normalize_features=flags.get("normalize_features"),
                         node_files=NodeFiles(*(flags.get(k) for k in ("features", "labels", "split"))))
    return prepare_graph(graph, tmp_path / "one", operator=operator_of(model))


def distributed(tmp_path: Path, dataset: str, model: str, nprocs: int, shards: int, **flags) -> Path:
    folder = tmp_path / f"p{nprocs}-k{shards}{flags.get('reorder', '')}"
    folder.mkdir()
    job = plan_job(job_args(dataset, **flags), operator_of(model), shards, str(folder))
    summaries = run_workers(prepare_worker, nprocs, vars(job) | {"command": "prepare"}, timeout_s=240)
    assert summaries[0]["nprocs"] == nprocs and all(s is None for s in summaries[1:])
    return folder


def assert_same_graph(expected: Path, actual: Path) -> None:
    a, b = open_prepared(expected), open_prepared(actual)
    for name in ("indptr", "indices", "data"):
        x, y = np.asarray(getattr(a.norm_adj, name)), np.asarray(getattr(b.norm_adj, name))
        assert x.dtype == y.dtype and np.array_equal(x, y), name
    for name in ARRAYS:
        x, y = np.asarray(getattr(a, name)), np.asarray(getattr(b, name))
        assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), name
    if "vertex_ids" in a.meta:
        assert np.array_equal(np.asarray(a.meta["vertex_ids"]), np.asarray(b.meta["vertex_ids"]))
    one = json.loads((expected / "prepared.json").read_text())
    many = json.loads((actual / "prepared.json").read_text())
    for key in set(one) - {"files"}:
        assert one[key] == many[key], key  # the content digest and the meta included
    n = a.num_nodes
    for r0, r1 in [(0, n), (3, n // 3), (n // 3, n - 1), (n - 1, n)]:  # row blocks across shard boundaries
        assert (a.norm_adj[r0:r1] != b.norm_adj[r0:r1]).nnz == 0
        np.testing.assert_array_equal(a.features[r0:r1, 2:5], b.features[r0:r1, 2:5])


@pytest.mark.parametrize("nprocs, shards", [(1, 1), (2, 2), (3, 5)])
def test_an_edge_list_prepared_by_p_processes_equals_the_one_process_folder(tmp_path, nprocs, shards):
    source = str(EDGE_LISTS / "ca-HepPh.txt")
    expected = one_process(tmp_path, source, "gcn")
    assert_same_graph(expected, distributed(tmp_path, source, "gcn", nprocs, shards))


@pytest.mark.parametrize("model", ["sage", "gat"])
def test_a_directed_edge_list_with_normalized_features_and_other_operators(tmp_path, model):
    source = str(EDGE_LISTS / "soc-epinions.txt")
    flags = dict(directed=True, normalize_features=True, seed=4)
    expected = one_process(tmp_path, source, model, **flags)
    assert_same_graph(expected, distributed(tmp_path, source, model, 2, 3, **flags))


@pytest.mark.parametrize("model, directed", [("gcn", False), ("gin", True)])
def test_rmat_generates_the_same_graph_on_any_number_of_processes(tmp_path, model, directed):
    spec = "rmat:scale=11,edge_factor=8,features=6,classes=3,chunk_edges=3000"
    expected = one_process(tmp_path, spec, model, directed=directed, seed=2)
    assert_same_graph(expected, distributed(tmp_path, spec, model, 3, 4, directed=directed, seed=2))


def test_the_folder_is_byte_identical_for_every_p_that_shares_its_shards(tmp_path):
    source = str(EDGE_LISTS / "ca-CondMat.txt")
    folders = [distributed(tmp_path, source, "gcn", p, 4) for p in (1, 2, 4)]
    manifests = [(f / "prepared.json").read_bytes() for f in folders]
    assert manifests[0] == manifests[1] == manifests[2]  # files, sizes and SHA-256 digests listed in it
    names = sorted(p.name for p in folders[0].iterdir())
    for folder in folders[1:]:
        assert sorted(p.name for p in folder.iterdir()) == names
        for name in names:
            assert (folder / name).read_bytes() == (folders[0] / name).read_bytes(), name


def test_an_edge_list_with_lines_longer_than_a_block_and_a_header(tmp_path, monkeypatch):
    """Byte ranges cut at line starts: a header and comment lines, comments after fields, blank lines and a
    third column are read as the one-process reader reads them, for ranges smaller than a line."""
    import gridgnn.prepare.text_edges as text_edges

    rng = np.random.default_rng(0)
    edges = rng.integers(0, 400, size=(1500, 2)) * 7 + 3
    lines = ["% a comment", "source,target,weight"] + [f"{a},{b},1.5" for a, b in edges[:700]] + \
        ["", "# between"] + [f"{a},{b},2 # trailing" for a, b in edges[700:]]
    path = tmp_path / "g.csv"
    path.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(text_edges, "BLOCK_BYTES", 64)  # forked workers inherit the small block
    expected = one_process(tmp_path, str(path), "gcn")
    assert_same_graph(expected, distributed(tmp_path, str(path), "gcn", 3, 3))


def test_renumbering_a_sparse_64_bit_id_space_matches_np_unique():
    rng = np.random.default_rng(3)
    ids = (np.int64(1) << 40) + rng.integers(0, 1 << 20, size=(3, 500, 2)) * (np.int64(1) << 20)
    ids[1, :5] = np.iinfo(np.int64).max - np.arange(10).reshape(5, 2)  # near the top of int64
    parts = [ids[r] for r in range(3)]
    results = run_workers(renumber_worker, 3, parts, timeout_s=60)
    distinct, inverse = np.unique(np.concatenate(parts), return_inverse=True)
    assert results[0][2] == distinct.size > 1 << 10
    np.testing.assert_array_equal(np.concatenate([r[0] for r in results]).ravel(), inverse.ravel())
    np.testing.assert_array_equal(np.concatenate([r[1] for r in results]), distinct)


def one_process_reordered(tmp_path: Path, dataset: str, model: str, parts: int, method: str = "random",
                          **flags) -> Path:
    from gridgnn.data.attach import NodeFiles
    from gridgnn.data.reorder import reorder_graph

    graph = load_dataset(dataset, directed=flags.get("directed", False), seed=flags.get("seed", 0),
                         normalize_features=flags.get("normalize_features"),
                         node_files=NodeFiles(*(flags.get(k) for k in ("features", "labels", "split"))))
    graph = reorder_graph(graph, method, parts, flags.get("seed", 0))
    return prepare_graph(graph, tmp_path / f"one-{method}", operator=operator_of(model))


TIMED = {"reorder_seconds", "reorder_peak_rss_bytes"}
"""Meta keys of a reordering that measure the run (seconds, memory), not the graph."""


def assert_same_reordered_graph(expected: Path, actual: Path) -> None:
    """`assert_same_graph` for ``--reorder random`` folders: the arrays, the vertex order, the original ids, the
    digests of the new and the original order, and the reordering's statistics (all but its timings)."""
    a, b = open_prepared(expected), open_prepared(actual)
    np.testing.assert_array_equal(np.asarray(a.meta["reorder_order"]), np.asarray(b.meta["reorder_order"]))
    one = json.loads((expected / "prepared.json").read_text())
    many = json.loads((actual / "prepared.json").read_text())
    for key in TIMED:  # measured, so they differ; present in both
        assert key in one["meta"] and key in many["meta"]
        one["meta"].pop(key), many["meta"].pop(key)
    assert one["meta"] == many["meta"]
    assert one["digest"] == many["digest"]
    for name in ("indptr", "indices", "data"):
        assert np.array_equal(np.asarray(getattr(a.norm_adj, name)), np.asarray(getattr(b.norm_adj, name))), name
    for name in ARRAYS:
        x, y = np.asarray(getattr(a, name)), np.asarray(getattr(b, name))
        assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), name
    if "vertex_ids" in a.meta:
        assert np.array_equal(np.asarray(a.meta["vertex_ids"]), np.asarray(b.meta["vertex_ids"]))


@pytest.mark.parametrize("nprocs, shards", [(2, 2), (3, 5)])
def test_a_random_order_computed_by_p_processes_equals_the_one_process_reordering(tmp_path, nprocs, shards):
    source = str(EDGE_LISTS / "ca-HepPh.txt")
    expected = one_process_reordered(tmp_path, source, "gcn", 4, seed=3)
    actual = distributed(tmp_path, source, "gcn", nprocs, shards, reorder="random", parts=4, seed=3)
    assert_same_reordered_graph(expected, actual)
    meta = json.loads((actual / "prepared.json").read_text())["meta"]
    unordered = json.loads((one_process(tmp_path, source, "gcn", seed=3) / "prepared.json").read_text())
    assert meta["content_digest"] == unordered["digest"]  # the original order's: checkpoints move between them
    assert meta["cut_fraction_after"] > meta["cut_fraction_before"]  # a random order destroys the locality


def test_a_double_random_order_computed_by_p_processes_equals_the_one_process_reordering(tmp_path):
    """``--reorder double-random``: the vertex order of ``random``, and the seed of Â's second column order that
    2D and 3D training computes vertex by vertex (`gridgnn.cost.column_order`), in the folder's meta."""
    source = str(EDGE_LISTS / "ca-HepPh.txt")
    expected = one_process_reordered(tmp_path, source, "gcn", 4, method="double-random", seed=3)
    actual = distributed(tmp_path, source, "gcn", 2, 3, reorder="double-random", parts=4, seed=3)
    assert_same_reordered_graph(expected, actual)
    meta = json.loads((actual / "prepared.json").read_text())["meta"]
    assert meta["reorder"] == "double-random" and meta["column_seed"] == 3


def test_a_random_order_of_a_directed_list_and_of_rmat(tmp_path):
    source = str(EDGE_LISTS / "soc-epinions.txt")
    flags = dict(directed=True, normalize_features=True, seed=4)
    expected = one_process_reordered(tmp_path / "a", source, "gat", 3, **flags)
    assert_same_reordered_graph(expected, distributed(tmp_path, source, "gat", 2, 3, reorder="random", parts=3,
                                                      **flags))
    spec = "rmat:scale=11,edge_factor=8,features=6,classes=3,chunk_edges=3000"
    expected = one_process_reordered(tmp_path / "b", spec, "sage", 2, directed=True, seed=2)
    assert_same_reordered_graph(expected, distributed(tmp_path, spec, "sage", 3, 4, reorder="random", parts=2,
                                                      directed=True, seed=2))


@pytest.mark.parametrize("nprocs, shards, dtype", [(2, 2, np.int32), (3, 4, np.uint64)])
def test_a_npy_edge_array_prepared_by_p_processes_equals_the_one_process_folder(tmp_path, nprocs, shards, dtype):
    from gridgnn.data.readers.edgelist import read_edge_array

    source = tmp_path / "edges.npy"  # ca-HepPh's lines as rows of an (E, 2) array
    np.save(source, read_edge_array(EDGE_LISTS / "ca-HepPh.txt").astype(dtype))
    expected = one_process(tmp_path, str(source), "gcn")
    actual = distributed(tmp_path, str(source), "gcn", nprocs, shards)
    assert_same_graph(expected, actual)
    text = one_process(tmp_path / "text", str(EDGE_LISTS / "ca-HepPh.txt"), "gcn")
    assert open_prepared(actual).digest == open_prepared(text).digest  # the graph of the text edge list
    assert json.loads((actual / "prepared.json").read_text())["meta"]["format"] == "edge-array"


@pytest.mark.parametrize("array, says", [(np.zeros((5, 2), dtype=np.float32), "holds (E, 2) integers"),
                                         (np.zeros((2, 5), dtype=np.int64), "save its transpose"),
                                         (np.zeros((0, 2), dtype=np.int64), "the edge array is empty")])
def test_a_bad_edge_array_is_one_line_for_train_and_for_prepare(tmp_path, capsys, array, says):
    from gridgnn.cli.main import main

    source = tmp_path / "bad.npy"
    np.save(source, array)
    for argv in (["train", "--dataset", str(source), "--epochs", "1"],
                 ["prepare", str(source), "--out", str(tmp_path / "out"), "--nprocs", "2"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert says in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()


HEPPH = EDGE_LISTS / "ca-HepPh.txt"


def write_node_files(folder: Path, n: int, task: str, split: bool = False) -> dict:
    """``--features`` (n, 6) float64, ``--labels`` for ``task`` with unlabelled vertices or missing entries, and
    with ``split`` a ``--split`` folder of .npy index files naming labelled vertices only."""
    rng = np.random.default_rng(7)
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "features.npy", rng.normal(size=(n, 6)))
    if task == "multiclass":
        labels = rng.integers(0, 4, n)
        labels[rng.random(n) < 0.2] = -1
        labelled = labels >= 0
    else:
        labels = rng.integers(0, 2, (n, 3)).astype(np.float32) if task == "multilabel" else rng.normal(size=(n, 2))
        labels[rng.random(labels.shape) < 0.3] = np.nan
        labelled = ~np.all(np.isnan(labels), axis=1)
    np.save(folder / "labels.npy", labels)
    files = {"features": str(folder / "features.npy"), "labels": str(folder / "labels.npy")}
    if split:
        ids = rng.permutation(np.flatnonzero(labelled))
        (folder / "split").mkdir()
        for part, chunk in zip(("train", "valid", "test"), np.array_split(ids, [len(ids) // 2, 3 * len(ids) // 4]),
                               strict=True):
            np.save(folder / "split" / f"{part}.npy", np.sort(chunk))
        files["split"] = str(folder / "split")
    return files


@pytest.mark.parametrize("task, split, nprocs, shards", [("multiclass", False, 2, 3), ("multilabel", True, 3, 4),
                                                         ("regression", False, 3, 3)])
def test_node_files_read_by_rows_give_the_one_process_folder(tmp_path, task, split, nprocs, shards):
    """--features, --labels (every task, inferred) and --split, each process reading its rows: the folder of
    one process attaching the files (arrays, task, class count, the files' digests in the meta)."""
    n = load_dataset(str(HEPPH)).num_nodes
    files = write_node_files(tmp_path / "node", n, task, split)
    expected = one_process(tmp_path, str(HEPPH), "gcn", seed=3, **files)
    actual = distributed(tmp_path, str(HEPPH), "gcn", nprocs, shards, seed=3, **files)
    assert_same_graph(expected, actual)
    manifest = json.loads((actual / "prepared.json").read_text())
    assert manifest["task"] == task and manifest["num_features"] == 6
    assert manifest["meta"]["labels_sha256"] and manifest["meta"]["split"] == ("files" if split else "random-60-20-20")
    prepared = open_prepared(actual)
    assert prepared.num_classes == (4 if task == "multiclass" else 3 if task == "multilabel" else 2)


def test_node_files_with_a_random_order_and_normalized_features(tmp_path):
    n = load_dataset(str(HEPPH)).num_nodes
    files = write_node_files(tmp_path / "node", n, "multilabel")
    flags = dict(seed=2, normalize_features=True, **files)
    expected = one_process_reordered(tmp_path, str(HEPPH), "sage", 3, **flags)
    assert_same_reordered_graph(expected, distributed(tmp_path, str(HEPPH), "sage", 2, 3, reorder="random",
                                                      parts=3, **flags))


def test_node_files_that_do_not_fit_stop_every_process_alike(tmp_path):
    """A feature file of another row count, a label file with a negative class on one process's rows only, a
    split naming an unlabelled vertex: every process stops with the line one process prints, and nothing looks
    finished."""
    from prepare_workers import failing_worker

    from gridgnn.data.attach import NodeFiles
    from gridgnn.errors import DataError

    n = load_dataset(str(HEPPH)).num_nodes
    files = write_node_files(tmp_path / "node", n, "multiclass", split=True)
    np.save(tmp_path / "short.npy", np.zeros((n - 1, 3)))
    labels = np.load(files["labels"])
    labels[n - 2] = -3  # on the last process's rows: a class below -1
    np.save(tmp_path / "negative.npy", labels)
    unlabelled = np.flatnonzero(np.load(files["labels"]) < 0)[:1]
    bad_split = tmp_path / "bad_split"
    bad_split.mkdir()
    for part in ("train", "valid", "test"):
        np.save(bad_split / f"{part}.npy", np.load(Path(files["split"]) / f"{part}.npy"))
    np.save(bad_split / "test.npy", np.concatenate([np.load(bad_split / "test.npy"), unlabelled]))
    for index, (flags, says) in enumerate([
            (dict(features=str(tmp_path / "short.npy")), f"{n - 1} feature rows for the {n} vertices"),
            (dict(labels=str(tmp_path / "negative.npy")), "negative label -3"),
            (dict(labels=files["labels"], split=str(bad_split)), "names 1 vertices without a label")]):
        folder = tmp_path / f"out{index}"
        folder.mkdir()
        job = plan_job(job_args(str(HEPPH), **flags), "gcn", 3, str(folder))
        errors = run_workers(failing_worker, 3, vars(job), timeout_s=120)
        assert errors[0] == errors[1] == errors[2] and says in errors[0], errors
        assert "\n" not in errors[0] and not (folder / "prepared.json").exists()
        with pytest.raises(DataError) as one:  # the line one process prints
            load_dataset(str(HEPPH), node_files=NodeFiles(*(flags.get(k) for k in ("features", "labels", "split"))))
        assert str(one.value) == errors[0]
