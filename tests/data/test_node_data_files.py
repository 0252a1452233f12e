"""Node data from files (issue 33, item 3): ``--features``, ``--labels``, ``--split`` on any graph source, OGB's
binary layout read as its CSV layout, and bad node data refused with one line, exit 2, nothing written."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp
from node_data_layouts import (
    CLASSES,
    LABELLED,
    NODES,
    SPLIT,
    hidden_labels,
    write_files,
    write_ogb_binary,
    write_ogb_csv,
)

from gridgnn.cli.main import main
from gridgnn.data import load_dataset
from gridgnn.data.attach import NodeFiles
from gridgnn.errors import DataError


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    """The hidden-label graph in its three layouts: (data, edge list files, OGB CSV folder, OGB binary folder)."""
    root = tmp_path_factory.mktemp("layouts")
    data = hidden_labels()
    return data, write_files(data, root / "files"), write_ogb_csv(data, root / "csv"), \
        write_ogb_binary(data, root / "binary")


def _from_files(files, **overrides):
    named = {key: str(files[key]) for key in ("features", "labels", "split")} | overrides
    return load_dataset(str(files["dataset"]), node_files=NodeFiles(**named))


def test_every_layout_reads_as_the_same_graph(layouts):
    data, files, csv, binary = layouts
    graphs = [_from_files(files), load_dataset(str(csv)), load_dataset(str(binary))]
    for graph in graphs:
        assert graph.num_nodes == NODES and graph.task == "multiclass" and graph.num_classes == CLASSES
        assert int(graph.labelled().sum()) == LABELLED
        np.testing.assert_array_equal(np.flatnonzero(graph.labelled()), data.labelled)
        assert [int(m.sum()) for m in (graph.train_mask, graph.val_mask, graph.test_mask)] == list(SPLIT)
        for mask, ids in zip((graph.train_mask, graph.val_mask, graph.test_mask), data.split, strict=True):
            np.testing.assert_array_equal(np.flatnonzero(mask), ids)
    first = graphs[0]
    for other in graphs[1:]:
        assert (first.adj != other.adj).nnz == 0
        np.testing.assert_array_equal(first.dense_features(), other.dense_features())
        np.testing.assert_array_equal(first.labels, other.labels)
    strip = {"source"}
    assert {k: v for k, v in graphs[1].meta.items() if k not in strip} == \
        {k: v for k, v in graphs[2].meta.items() if k not in strip}
    meta = first.meta
    assert meta["features_file"] == str(files["features"]) and len(meta["features_sha256"]) == 64
    assert meta["labels_file"] == str(files["labels"]) and meta["split"] == "files"


def test_labels_without_split_draw_a_split_among_labelled_vertices(layouts, tmp_path):
    data, files, _, _ = layouts
    graph = _from_files(files, split=None)
    masks = graph.train_mask | graph.val_mask | graph.test_mask
    np.testing.assert_array_equal(np.flatnonzero(masks), data.labelled)  # every labelled vertex, no other
    assert [int(m.sum()) for m in (graph.train_mask, graph.val_mask, graph.test_mask)] == [6, 2, 2]
    assert graph.meta["split"] == "random-60-20-20"
    # labels as CSV, several columns of 0/1 with empty fields: a multilabel task; a sparse features .npz
    rows = ["1,0", ",", "0,1"] * (NODES // 3) + ["1,1"] * (NODES % 3)
    (tmp_path / "y.csv").write_text("a,b\n" + "\n".join(rows) + "\n")
    sp.save_npz(tmp_path / "x.npz", sp.csr_matrix(data.features))
    multi = _from_files(files, labels=str(tmp_path / "y.csv"), split=None, features=str(tmp_path / "x.npz"))
    assert multi.task == "multilabel" and multi.num_classes == 2 and sp.issparse(multi.features)
    assert int(multi.labelled().sum()) == NODES - NODES // 3


def test_an_ogb_folder_without_labels_takes_a_label_file_and_keeps_its_split(layouts, tmp_path):
    data, files, csv, _ = layouts
    folder = tmp_path / "nolabels"
    write_ogb_csv(data, folder)
    (folder / "raw" / "node-label.csv.gz").unlink()
    graph = load_dataset(str(folder), node_files=NodeFiles(labels=str(files["labels"])))
    assert graph.meta["split"] == "random"  # the folder's own split stays
    np.testing.assert_array_equal(np.flatnonzero(graph.train_mask), data.split[0])
    np.testing.assert_array_equal(graph.labels, load_dataset(str(csv)).labels)
    np.save(tmp_path / "fewer.npy", np.where(np.arange(NODES) == data.split[0][0], np.nan, data.labels))
    with pytest.raises(DataError, match=r"train_mask names 1 vertices without a target .*give --split DIR"):
        load_dataset(str(folder), node_files=NodeFiles(labels=str(tmp_path / "fewer.npy")))


def test_train_on_an_edge_list_with_node_data_files(layouts, tmp_path):
    data, files, _, _ = layouts
    out = tmp_path / "m.json"
    argv = ["train", "--dataset", str(files["dataset"]), "--features", str(files["features"]), "--labels",
            str(files["labels"]), "--split", str(files["split"]), "--epochs", "3", "--quiet", "--metrics-out",
            str(out)]
    assert main(argv) == 0
    metrics = json.loads(out.read_text())
    dataset = metrics["dataset"]
    assert dataset["split"] == dict(zip(("train", "val", "test"), SPLIT, strict=True))
    assert dataset["num_nodes"] == NODES and dataset["num_classes"] == CLASSES
    assert dataset["num_features"] == data.features.shape[1]
    assert dataset["meta"]["labels_file"] == str(files["labels"]) and dataset["meta"]["split"] == "files"
    assert metrics["config"]["labels"] == str(files["labels"]) and len(metrics["epochs"]) == 3


def _bad_cases(data, files, tmp):
    """(name, extra flags, message fragment) of node data that does not fit the graph."""
    tmp.mkdir()
    np.save(tmp / "short_labels.npy", data.labels[:-1])
    np.save(tmp / "short_features.npy", data.features[:-3])
    np.save(tmp / "nan_labels.npy", np.full(NODES, np.nan))
    (tmp / "broken.npy").write_bytes(b"\x93NUMPY not really")
    np.save(tmp / "text_labels.npy", np.array(["a"] * NODES))
    np.save(tmp / "cube_labels.npy", np.zeros((NODES, 2, 2)))
    for name, ids in (("outside", np.array([1, NODES])), ("unlabelled", np.arange(20))):
        folder = tmp / f"split_{name}"
        folder.mkdir()
        np.save(folder / "train.npy", ids)
        np.save(folder / "valid.npy", data.split[1])
        np.save(folder / "test.npy", data.split[2])
    return [
        ("labels of another length", ["--labels", str(tmp / "short_labels.npy")], "499 label rows for the 500"),
        ("features of another length", ["--features", str(tmp / "short_features.npy")], "497 feature rows"),
        ("all-NaN labels", ["--labels", str(tmp / "nan_labels.npy")], "no vertex has a target"),
        ("unreadable file", ["--features", str(tmp / "broken.npy")], "cannot read features"),
        ("labels of text", ["--labels", str(tmp / "text_labels.npy")], "targets must be numbers"),
        ("labels of three axes", ["--labels", str(tmp / "cube_labels.npy")], "shape (n,) or (n, T)"),
        ("missing file", ["--labels", str(tmp / "absent.npy")], "labels file not found"),
        ("split out of range", ["--labels", str(files["labels"]), "--split", str(tmp / "split_outside")],
         f"node id {NODES} outside [0, {NODES})"),
        ("split names unlabelled", ["--labels", str(files["labels"]), "--split", str(tmp / "split_unlabelled")],
         "without a label"),
        ("split folder missing", ["--split", str(tmp / "nowhere")], "split folder not found"),
    ]


@pytest.mark.parametrize("command", ["train", "prepare"])
def test_bad_node_data_gives_one_line_exit_2_and_writes_nothing(layouts, tmp_path, capsys, command):
    data, files, _, _ = layouts
    for name, flags, fragment in _bad_cases(data, files, tmp_path / "bad"):
        out = tmp_path / f"out-{command}-{name.replace(' ', '-')}"
        if command == "train":
            argv = ["train", "--dataset", str(files["dataset"]), *flags, "--epochs", "1", "--metrics-out", str(out)]
        else:
            argv = ["prepare", str(files["dataset"]), *flags, "--out", str(out)]
        assert main(argv) == 2, name
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("gridgnn: error: "), (name, lines)
        assert fragment in lines[0], (name, lines[0])
        assert not out.exists(), name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad"]


def test_node_files_with_a_prepared_folder_are_refused(layouts, tmp_path, capsys):
    _, files, _, _ = layouts
    folder = tmp_path / "prepared"
    assert main(["prepare", str(files["dataset"]), "--features", str(files["features"]), "--labels",
                 str(files["labels"]), "--split", str(files["split"]), "--out", str(folder)]) == 0
    capsys.readouterr()
    assert main(["info", str(folder), "--labels", str(files["labels"])]) == 2
    assert "prepared graph" in capsys.readouterr().err
    assert main(["info", str(folder)]) == 0
    assert "500" in capsys.readouterr().out


def test_a_split_file_layout_of_csv_and_text(layouts, tmp_path):
    data, files, _, _ = layouts
    folder = tmp_path / "split"
    folder.mkdir()
    np.savetxt(folder / "train.csv", data.split[0], fmt="%d")
    (folder / "val.txt").write_text(" ".join(map(str, data.split[1])).replace(" ", "\n") + "\n")
    np.save(folder / "test.npy", data.split[2].reshape(1, -1))
    graph = _from_files(files, split=str(folder))
    for mask, ids in zip((graph.train_mask, graph.val_mask, graph.test_mask), data.split, strict=True):
        np.testing.assert_array_equal(np.flatnonzero(mask), ids)
    mask = np.zeros(NODES, dtype=bool)
    mask[data.split[2]] = True
    np.save(folder / "test.npy", mask)  # a bool mask of n entries names its true entries
    np.testing.assert_array_equal(np.flatnonzero(_from_files(files, split=str(folder)).test_mask), data.split[2])
    with pytest.raises(DataError, match="missing test.csv.gz"):
        (folder / "test.npy").unlink()
        _from_files(files, split=str(folder))


@pytest.mark.slow
def test_two_workers_train_exactly_what_one_process_trains(layouts, tmp_path):
    """The launcher prepares the graph with its node data (unlabelled vertices: -1) for its workers."""
    _, files, _, _ = layouts
    base = ["train", "--dataset", str(files["dataset"]), "--features", str(files["features"]), "--labels",
            str(files["labels"]), "--split", str(files["split"]), "--epochs", "2", "--quiet", "--threads", "1"]
    assert main([*base, "--metrics-out", str(tmp_path / "one.json")]) == 0
    assert main([*base, "--nprocs", "2", "--algo", "1d", "--metrics-out", str(tmp_path / "two.json")]) == 0
    one, two = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("one", "two"))
    assert two["dataset"]["split"] == one["dataset"]["split"]
    assert two["dataset"]["meta"]["labels_sha256"] == one["dataset"]["meta"]["labels_sha256"]
    np.testing.assert_allclose([e["loss"] for e in two["epochs"]], [e["loss"] for e in one["epochs"]], rtol=1e-5)


def test_a_resume_on_other_node_data_files_is_refused(layouts, tmp_path):
    from gridgnn.config import TrainConfig
    from gridgnn.train.checkpoint.fingerprint import run_fingerprint

    data, files, _, _ = layouts
    np.save(tmp_path / "other.npy", data.features[::-1].copy())  # same shape: the graph digest cannot tell
    config = TrainConfig(dataset=str(files["dataset"]))
    same = run_fingerprint(config, _from_files(files))
    assert run_fingerprint(config, _from_files(files)) == same
    other = run_fingerprint(config, _from_files(files, features=str(tmp_path / "other.npy")))
    assert other["dataset"]["digest"] == same["dataset"]["digest"]
    assert other["dataset"]["node_data"] != same["dataset"]["node_data"]
    assert run_fingerprint(config, load_dataset(str(files["dataset"])))["dataset"]["node_data"] is None


def test_plan_prices_the_attached_data_and_its_hint_names_the_files(layouts, capsys):
    _, files, _, _ = layouts
    flags = ["--features", str(files["features"]), "--labels", str(files["labels"]), "--split", str(files["split"])]
    assert main(["plan", "--dataset", str(files["dataset"]), *flags, "--nprocs", "2"]) == 0
    hint = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("train with:"))
    assert " ".join(flags) in hint
    assert main(["plan", "--num-nodes", "10", "--num-edges", "20", "--num-features", "2", "--num-classes", "2",
                 "--labels", str(files["labels"]), "--nprocs", "2"]) == 2
    assert "give --dataset too" in capsys.readouterr().err


def test_fit_and_as_graph_attach_node_data_files_to_any_source(layouts):
    import gridgnn
    from gridgnn.data.interop import graph_to_pyg

    data, files, _, _ = layouts
    named = {key: str(files[key]) for key in ("features", "labels", "split")}
    from_path = gridgnn.as_graph(str(files["dataset"]), **named)
    bare = load_dataset(str(files["dataset"]))
    for source in (bare, graph_to_pyg(bare)):
        graph = gridgnn.as_graph(source, **named)
        np.testing.assert_array_equal(graph.labels, from_path.labels)
        np.testing.assert_array_equal(graph.train_mask, from_path.train_mask)
    result = gridgnn.fit(str(files["dataset"]), epochs=1, **named)
    assert result.metrics["dataset"]["split"] == dict(zip(("train", "val", "test"), SPLIT, strict=True))
    assert result.metrics["config"]["features"] == named["features"]


def test_a_matrix_market_graph_takes_the_same_node_data(layouts, tmp_path):
    import scipy.io

    data, files, _, _ = layouts
    matrix = sp.coo_matrix((np.ones(len(data.edges)), (data.edges[:, 0], data.edges[:, 1])), shape=(NODES, NODES))
    scipy.io.mmwrite(tmp_path / "graph.mtx", matrix)
    named = {key: str(files[key]) for key in ("features", "labels", "split")}
    graph = load_dataset(str(tmp_path / "graph.mtx"), node_files=NodeFiles(**named))
    reference = _from_files(files)
    assert graph.task == "multiclass" and graph.num_classes == CLASSES and (graph.adj != reference.adj).nnz == 0
    np.testing.assert_array_equal(graph.labels, reference.labels)
    np.testing.assert_array_equal(graph.dense_features(), reference.dense_features())


@pytest.mark.parametrize(("arrays", "fragment"), [
    ({"edge_ids": np.zeros((2, 3), np.int64)}, "no 'edge_index' array"),
    ({"edge_index": np.zeros((3, 3), np.int64)}, "must be integers of shape (2, E)"),
    ({"edge_index": np.array([[0, 1], [1, 2]]), "num_nodes_list": np.array([2, 1])}, "one positive node count"),
    ({"edge_index": np.array([[0, 1], [1, 9]]), "num_nodes_list": np.array([3])}, "vertex id 9 is outside"),
    ({"edge_index": np.array([[0, 1], [1, 2]]), "node_feat": np.ones((2, 2))}, "features have shape (2, 2)"),
])
def test_a_bad_ogb_binary_folder_is_one_line(tmp_path, arrays, fragment):
    (tmp_path / "ogbn" / "raw").mkdir(parents=True)
    np.savez(tmp_path / "ogbn" / "raw" / "data.npz", **arrays)
    with pytest.raises(DataError) as info:
        load_dataset(str(tmp_path / "ogbn"))
    assert fragment in str(info.value) and "\n" not in str(info.value), str(info.value)


@pytest.mark.parametrize("labels", ["hidden", "regression", "multilabel"])
def test_a_prepared_folder_keeps_the_task_and_its_targets(layouts, tmp_path, labels):
    from gridgnn.data.prepared import graph_of_prepared, open_prepared, prepare_graph

    data, files, _, _ = layouts
    rng = np.random.default_rng(5)
    values = {"hidden": data.labels, "regression": rng.standard_normal((NODES, 2)),
              "multilabel": (rng.random((NODES, 3)) < 0.5).astype(float)}[labels]
    if labels != "hidden":
        values[::7] = np.nan
    np.save(tmp_path / "y.npy", values)
    graph = _from_files(files, labels=str(tmp_path / "y.npy"), split=None)
    prepared = open_prepared(prepare_graph(graph, tmp_path / "prepared"))
    assert prepared.task == graph.task
    back = graph_of_prepared(prepared)
    assert back.task == graph.task and back.num_classes == graph.num_classes
    np.testing.assert_array_equal(back.labels, graph.labels)  # NaN where NaN
    np.testing.assert_array_equal(back.train_mask, graph.train_mask)
