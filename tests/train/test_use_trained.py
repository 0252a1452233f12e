"""Using what was trained (issue 16): model files and their PyG mapping, predictions and embeddings out of
train and predict (one process and grids other than the training grid), best/last weights, the bad-input
contract of model files and output paths, and the memory guard."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import numpy as np
import products_workers as pw
import pytest
import torch

import gridgnn
from gridgnn.cli.main import main
from gridgnn.data.interop import graph_to_pyg
from gridgnn.launch.spawn import run_workers
from gridgnn.nn.export import FORMAT

SMALL = "csbm:nodes=120,classes=3,features=12"


def _read_csv(path: Path) -> tuple[list[str], np.ndarray]:
    header = path.read_text().splitlines()[0].split(",")
    return header, np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)


def _one_error(status: int, capsys, keyword: str) -> str:
    out, err = capsys.readouterr()
    assert status == 2 and out == "" and "Traceback" not in err, (status, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gridgnn: error: "), err
    assert keyword.lower() in lines[0].lower(), lines[0]
    return lines[0]


# --- model files and PyG -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def directed_fit():
    """A 3-layer model trained 4 epochs on a directed graph (one process)."""
    graph = gridgnn.as_graph("csbm:nodes=150,classes=4,features=10", directed=True)
    return gridgnn.fit(graph, epochs=4, layers=3, hidden=8), graph


def test_model_file_loads_weights_only_and_pyg_reproduces_predictions(directed_fit, tmp_path):
    pytest.importorskip("torch_geometric")
    result, graph = directed_fit
    assert (graph.adj != graph.adj.T).nnz > 0  # directed: Â is not symmetric
    path = result.save(tmp_path / "model.pt")
    document = torch.load(path, weights_only=True)
    assert document["format"] == FORMAT and document["model"] == "gcn"
    assert document["config"]["num_layers"] == 3 and document["state"]["layers.0.weight"].shape == (10, 8)
    loaded = gridgnn.load_model(path)
    expected = result.predict()
    again = gridgnn.predict(loaded, graph)
    assert torch.equal(again.probabilities, expected.probabilities)
    data = graph_to_pyg(graph)
    pyg_log_probs = gridgnn.to_pyg(loaded)(data.x, data.edge_index)
    assert (pyg_log_probs.exp() - expected.probabilities).abs().max().item() < 1e-5
    assert torch.equal(pyg_log_probs.argmax(1), expected.predicted)


def test_embeddings_are_layer_outputs(directed_fit):
    result, graph = directed_fit
    logits = result.embed(layer=3)
    probabilities = result.predict().probabilities
    assert torch.allclose(torch.softmax(logits, 1), probabilities, atol=1e-6)
    hidden = result.embed()  # default: the last hidden layer (2 of 3), after ReLU
    assert hidden.shape == (graph.num_nodes, 8) and hidden.min() >= 0
    layer3 = result.model.layers[2]
    from gridgnn.train.run.inference import local_inputs

    _, agg = local_inputs(graph)
    with torch.no_grad():
        assert torch.allclose(layer3(hidden, agg), logits, atol=1e-6)


def test_best_weights_are_the_best_epochs(tmp_path):
    """--weights best (the default) keeps the weights after the best-validation epoch, bit for bit, also
    when the run resumed from a checkpoint taken after that epoch."""
    options = dict(epochs=6, lr=0.5, hidden=8)
    best = gridgnn.fit("csbm:nodes=120", **options)
    epoch = best.metrics["final"]["best_epoch"]
    assert 1 < epoch < 5, "the test needs a best epoch before the checkpoint"
    short = gridgnn.fit("csbm:nodes=120", **{**options, "epochs": epoch})
    last = gridgnn.fit("csbm:nodes=120", **options, weights="last")
    ckpt = dict(checkpoint_dir=str(tmp_path / "ck"), checkpoint_every=5)
    gridgnn.fit("csbm:nodes=120", **{**options, "epochs": 5}, **ckpt)
    resumed = gridgnn.fit("csbm:nodes=120", **options, **ckpt, resume=True)
    assert resumed.metrics["resumed_from"]["epoch"] == 5
    for a, b, c, d in zip(best.model.parameters(), short.model.parameters(), last.model.parameters(),
                          resumed.model.parameters(), strict=True):
        assert torch.equal(a, b) and torch.equal(a, d) and not torch.equal(a, c)
    (tmp_path / "ck" / "best-weights.pt").unlink()  # without it the best weights are gone: said, not guessed
    with pytest.raises(gridgnn.errors.ConfigError, match="use --weights last"):
        gridgnn.fit("csbm:nodes=120", **options, **ckpt, resume=True,
                    save_model=str(tmp_path / "m.pt"))
    assert not (tmp_path / "m.pt").exists()


def test_original_vertex_ids_of_a_renumbered_edge_list(tmp_path, capsys):
    from gridgnn.data import load_native, save_graph
    from gridgnn.data.prepared import open_prepared, prepare_graph

    ids = np.array([5, 17, 42, 100, 230, 231, 999, 1234, 2000, 2007])
    edges = np.column_stack([ids, np.roll(ids, 1)])
    np.savetxt(tmp_path / "g.edges", edges, fmt="%d")
    assert main(["train", "--dataset", str(tmp_path / "g.edges"), "--epochs", "1", "--quiet",
                 "--predictions-out", str(tmp_path / "p.csv")]) == 0
    assert np.array_equal(_read_csv(tmp_path / "p.csv")[1][:, 0], ids)
    graph = gridgnn.as_graph(str(tmp_path / "g.edges"))  # the ids survive the prepared graph and native files
    assert np.array_equal(open_prepared(prepare_graph(graph, tmp_path / "prep")).meta["vertex_ids"], ids)
    assert np.array_equal(load_native(save_graph(graph, tmp_path / "g.npz")).meta["vertex_ids"], ids)


# --- train and predict from the command line (one process) ---------------------------------------------------


def test_train_outputs_and_predict_agree(tmp_path, capsys):
    pred, emb, model = tmp_path / "p.csv", tmp_path / "e.npy", tmp_path / "m.pt"
    assert main(["train", "--dataset", SMALL, "--epochs", "3", "--quiet", "--predictions-out", str(pred),
                 "--embeddings-out", str(emb), "--save-model", str(model)]) == 0
    header, table = _read_csv(pred)
    assert header == ["node", "predicted", "prob_0", "prob_1", "prob_2"] and table.shape == (120, 5)
    assert np.array_equal(table[:, 0], np.arange(120))
    np.testing.assert_allclose(table[:, 2:].sum(1), 1, atol=1e-6)
    assert np.array_equal(table[:, 1], table[:, 2:].argmax(1))
    assert np.load(emb).shape == (120, 16)
    again = tmp_path / "q.npy"
    assert main(["predict", "--model", str(model), "--dataset", SMALL, "--quiet", "--predictions-out",
                 str(again)]) == 0
    records = np.load(again)
    assert np.array_equal(records["predicted"], table[:, 1]) and np.array_equal(records["node"], table[:, 0])
    np.testing.assert_allclose(records["probabilities"], table[:, 2:], atol=1e-6)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.npy", "m.pt", "p.csv", "q.npy"]  # no partials


# --- distributed: train on one grid, predict on others ------------------------------------------------------


def test_distributed_train_and_predict_on_other_grids_match_one_process(tmp_path):
    kwargs = dict(dataset="csbm:nodes=90,classes=5,features=7", directed=True, epochs=3, hidden=6,
                  algo="2d", nprocs=4, predictions_out=str(tmp_path / "train-pred.npy"),
                  embeddings_out=str(tmp_path / "train-emb.npy"), save_model=str(tmp_path / "model.pt"))
    grids = [{"algo": "1.5d", "replication": 2}, {"algo": "1d"}]
    outs = run_workers(pw.train_then_predict, 4, kwargs, grids, str(tmp_path), timeout_s=240)
    local = {**kwargs, "algo": "local", "nprocs": 1, "predictions_out": None, "embeddings_out": None,
             "save_model": None}
    reference = gridgnn.fit(local.pop("dataset"), **local)
    expected, hidden = reference.predict(), reference.embed()
    trained = np.load(tmp_path / "train-pred.npy")
    assert np.array_equal(trained["node"], np.arange(90))
    assert np.array_equal(trained["predicted"], expected.predicted.numpy())
    np.testing.assert_allclose(trained["probabilities"], expected.probabilities.numpy(), atol=1e-6)
    np.testing.assert_allclose(np.load(tmp_path / "train-emb.npy"), hidden.numpy(), atol=1e-5)
    for spec in grids:
        other = np.load(tmp_path / f"{spec['algo']}-pred.npy")
        assert np.array_equal(other["predicted"], trained["predicted"])
        np.testing.assert_allclose(other["probabilities"], trained["probabilities"], atol=1e-6)
        header, table = _read_csv(tmp_path / f"{spec['algo']}-emb.csv")
        assert header[:2] == ["node", "dim_0"] and np.array_equal(table[:, 0], np.arange(90))
        np.testing.assert_allclose(table[:, 1:], np.load(tmp_path / "train-emb.npy"), atol=1e-5)
    assert not list(tmp_path.glob(".*partial*"))
    # the public building blocks (grid_aggregation, local_block) train as one process does
    alone = pw.custom_loop(reference.graph, "1d")
    for plain, deferred in outs:  # every rank; the deferred loop's weights whole again after its gather
        for mine, later, single in zip(plain, deferred, alone, strict=True):
            np.testing.assert_allclose(mine, single, rtol=1e-5, atol=1e-6)
            np.testing.assert_array_equal(later, mine)


# --- bad input: one line, exit 2, nothing written -----------------------------------------------------------


class _Payload:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        import os

        return os.system, (f"touch {self.marker}",)


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    folder = tmp_path_factory.mktemp("model")
    assert main(["train", "--dataset", SMALL, "--epochs", "1", "--quiet", "--save-model", str(folder / "m.pt")]) == 0
    return folder / "m.pt"


def _document(model_file: Path) -> dict:
    return torch.load(model_file, weights_only=True)


def _bad_models(model_file: Path, tmp: Path) -> list[tuple[Path, str]]:
    def save(name: str, obj) -> Path:
        torch.save(obj, tmp / name)
        return tmp / name

    corrupt = tmp / "corrupt.pt"
    corrupt.write_bytes(model_file.read_bytes()[:200])
    foreign = tmp / "foreign.pt"
    foreign.write_bytes(pickle.dumps(_Payload(tmp / "PWNED"), protocol=2))
    other_kind = {**_document(model_file), "model": "transformer"}
    other_shape = _document(model_file)
    other_shape["state"]["layers.0.weight"] = torch.zeros(12, 4)
    return [(corrupt, "not a readable gridgnn model file"), (foreign, "not a readable gridgnn model file"),
            (save("dict.pt", {"weights": torch.zeros(2)}), "not a gridgnn model file"),
            (save("kind.pt", other_kind), "unknown model kind 'transformer'"),
            (save("shape.pt", other_shape), "do not fit its configuration"),
            (tmp / "missing.pt", "does not exist")]


def test_bad_model_files_are_refused_before_work(model_file, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    for bad, keyword in _bad_models(model_file, tmp_path):
        status = main(["predict", "--model", str(bad), "--dataset", SMALL, "--predictions-out", str(out / "p.npy")])
        _one_error(status, capsys, keyword)
    status = main(["predict", "--model", str(model_file), "--dataset", "csbm:nodes=120,features=13",
                   "--predictions-out", str(out / "p.npy")])
    _one_error(status, capsys, "takes 12 input features, the dataset has 13")
    assert list(out.iterdir()) == [] and not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize(("flags", "keyword"), [
    (["--predictions-out", "{tmp}/p.txt"], "must end in .npy"),
    (["--embeddings-out", "{tmp}/missing/e.npy"], "does not exist"),
    (["--embedding-layer", "3"], "embedding_layer must be at most 2"),
    (["--memory-per-proc", "64KiB"], "not enough memory"),
    ([], "nothing to write"),
])
def test_bad_predict_flags(flags, keyword, model_file, tmp_path, capsys):
    flags = [f.replace("{tmp}", str(tmp_path)) for f in flags]
    if not any(f.endswith("-out") for f in flags) and flags:
        flags += ["--predictions-out", str(tmp_path / "p.npy")]
    status = main(["predict", "--model", str(model_file), "--dataset", SMALL, *flags])
    _one_error(status, capsys, keyword)
    assert list(tmp_path.iterdir()) == []


def test_memory_guard_names_sizes_and_what_fits(tmp_path, capsys):
    argv = ["train", "--dataset", "csbm:nodes=2000,features=64", "--epochs", "1", "--hidden", "64",
            "--metrics-out", str(tmp_path / "m.json")]
    line = _one_error(main([*argv, "--memory-per-proc", "262MiB"]), capsys, "not enough memory")
    assert ("per process (with 260.0 MiB for Python and torch) for one process, but --memory-per-proc is "
            "262.0 MiB") in line
    assert "configurations that fit (gridgnn plan): --layers 2 --hidden 64 --order auto --algo" in line
    assert "--no-memory-check" in line
    line = _one_error(main([*argv, "--memory-per-proc", "1KiB"]), capsys, "no configuration fits")
    assert not (tmp_path / "m.json").exists()
    assert main([*argv, "--memory-per-proc", "1KiB", "--no-memory-check", "--quiet"]) == 0


def test_import_is_cheap_and_public_names_resolve():
    import subprocess

    code = "import gridgnn, sys; assert 'torch' not in sys.modules; print(sorted(gridgnn.__all__)[:3])"
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    for name in gridgnn.__all__:
        assert getattr(gridgnn, name) is not None
        if callable(getattr(gridgnn, name)) and name != "__version__":
            assert getattr(gridgnn, name).__doc__, name


def test_predict_from_a_checkpoint_folder(tmp_path, capsys):
    ckpt = tmp_path / "ck"
    assert main(["train", "--dataset", SMALL, "--epochs", "2", "--quiet", "--checkpoint-dir", str(ckpt),
                 "--weights", "last", "--predictions-out", str(tmp_path / "train.npy")]) == 0
    assert main(["predict", "--model", str(ckpt / "epoch-00000002"), "--dataset", SMALL, "--quiet",
                 "--predictions-out", str(tmp_path / "pred.npy")]) == 0
    trained, predicted = np.load(tmp_path / "train.npy"), np.load(tmp_path / "pred.npy")
    assert np.array_equal(trained["predicted"], predicted["predicted"])
    np.testing.assert_allclose(trained["probabilities"], predicted["probabilities"], atol=1e-6)


@pytest.mark.slow
def test_cli_train_on_a_grid_then_predict_on_another(tmp_path, capsys):
    """Through the local launcher: train on 2d 2x2, predict on 1d with 3 workers and on 1.5d 2x2."""
    data = ["--dataset", "csbm:nodes=200,classes=4,features=9", "--threads", "1", "--quiet"]
    assert main(["train", *data, "--epochs", "3", "--algo", "2d", "--nprocs", "4", "--save-model",
                 str(tmp_path / "m.pt"), "--predictions-out", str(tmp_path / "train.csv")]) == 0
    _, table = _read_csv(tmp_path / "train.csv")
    for name, grid in (("a", ["--algo", "1d", "--nprocs", "3"]),
                       ("b", ["--algo", "1.5d", "--nprocs", "4", "--replication", "2"])):
        assert main(["predict", "--model", str(tmp_path / "m.pt"), *data, *grid, "--predictions-out",
                     str(tmp_path / f"{name}.npy")]) == 0
        records = np.load(tmp_path / f"{name}.npy")
        assert np.array_equal(records["predicted"], table[:, 1])
        np.testing.assert_allclose(records["probabilities"], table[:, 2:], atol=1e-6)


def test_fit_takes_a_pyg_data_object(directed_fit):
    pytest.importorskip("torch_geometric")
    _, graph = directed_fit
    data = graph_to_pyg(graph)
    result = gridgnn.fit(data, epochs=2, hidden=4, directed=True)
    assert len(result.history) == 2 and result.epoch in (1, 2)
    assert result.graph.num_nodes == graph.num_nodes and (result.graph.adj != graph.adj).nnz == 0
    assert result.predict().probabilities.shape == (graph.num_nodes, graph.num_classes)


# --- every model kind: checkpoints, predict on a grid (model files and PyG: tests/nn/test_pyg_parity.py) -------


def test_sage_checkpoint_and_model_file_predict_on_one_process_and_on_a_grid(tmp_path, capsys):
    """A GraphSAGE run's outputs equal predict from its model file, from its checkpoint folder, and from the
    model file on 2 workers (1d): the grid uses the model's operator (D⁻¹A), not GCN's."""
    data = ["--dataset", SMALL, "--quiet", "--threads", "1"]
    model = tmp_path / "m.pt"
    assert main(["train", *data, "--model", "sage", "--epochs", "2", "--weights", "last", "--save-model",
                 str(model), "--checkpoint-dir", str(tmp_path / "ck"), "--predictions-out",
                 str(tmp_path / "train.npy")]) == 0
    trained = np.load(tmp_path / "train.npy")
    sources = {"file": ["--model", str(model)], "checkpoint": ["--model", str(tmp_path / "ck" / "epoch-00000002")],
               "grid": ["--model", str(model), "--algo", "1d", "--nprocs", "2"]}
    for name, flags in sources.items():
        out = tmp_path / f"{name}.npy"
        assert main(["predict", *flags, *data, "--predictions-out", str(out)]) == 0, name
        records = np.load(out)
        assert np.array_equal(records["predicted"], trained["predicted"]), name
        np.testing.assert_allclose(records["probabilities"], trained["probabilities"], atol=1e-6, err_msg=name)
