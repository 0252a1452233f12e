"""The public Python API (``import gridgnn``): fit (train), predict, embed, save and load, and the building
blocks of a custom training loop. Every name here is re-exported lazily by `gridgnn.__init__`. Training is
called `fit` because ``gridgnn.train`` is the subpackage of the training loop.

Train and use::

    result = gridgnn.fit(data, epochs=100)              # data: Graph, PyG Data, dataset name/spec/path
    result.predict().predicted                         # (n,) classes; .probabilities (n, C)
    result.embed()                                     # (n, hidden) last hidden layer
    result.save("model.pt"); model = gridgnn.load_model("model.pt")

Custom loop (one process, or one rank under torchrun): `grid_aggregation` gives ``Â x`` with autograd on
this rank's block, `local_block` cuts a global array to the rows and columns the rank holds.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor, nn

from gridgnn.config import TrainConfig
from gridgnn.data.graph import Graph
from gridgnn.errors import ConfigError, DataError
from gridgnn.nn.export import check_fits
from gridgnn.nn.export import load_model as _load_model
from gridgnn.nn.export import save_model as _save_model
from gridgnn.train.loop.trainer import RECORD_FIELDS, EpochRecord


@dataclass
class Predictions:
    """Per-vertex predictions. Multiclass: ``probabilities`` (n, C) float32 and ``predicted`` (n,) int64 (the
    argmax); multilabel: ``probabilities`` (n, T) (sigmoid of the logits) and ``predicted`` (n, T) int64
    (probability > 0.5); regression: ``probabilities`` None and ``predicted`` (n, T) float32 values."""

    probabilities: Tensor
    predicted: Tensor


@dataclass
class TrainedModel:
    """What `fit` returns: ``model`` (eval mode) with the weights of the ``config.weights`` epoch (default
    the best validation accuracy's; the last epoch's when that epoch was trained before a resume and its
    weights are gone), ``epoch`` (the epoch those weights come from), ``history`` (one `EpochRecord` per
    epoch), ``metrics`` (the metrics document; None on ranks other than 0), the ``config`` it ran with and the
    ``graph`` it trained on."""

    model: nn.Module
    epoch: int
    history: list[EpochRecord]
    metrics: dict | None
    config: TrainConfig
    graph: Graph | None

    def predict(self, data=None) -> Predictions:
        """`predict` with this model on ``data`` (default: the training graph). Not collective."""
        return predict(self.model, self._data(data))

    def embed(self, data=None, layer: int | None = None) -> Tensor:
        """`embed` with this model on ``data`` (default: the training graph). Not collective."""
        return embed(self.model, self._data(data), layer)

    def save(self, path: str | os.PathLike) -> Path:
        """Write a model file (see `save_model`)."""
        return save_model(self.model, path)

    def _data(self, data):
        return self.graph if data is None else data


def as_graph(data, **options) -> Graph:
    """A `Graph` from a `Graph` (returned as is), a PyG ``Data`` (`graph_from_pyg`), or a dataset name,
    generator spec or path (loaded as ``gridgnn train --dataset`` does; ``options``: data_root, directed,
    normalize_features, seed, task, and features, labels, split: node data files attached to any of these,
    as ``--features``, ``--labels``, ``--split`` do, `gridgnn.data.attach`). ``task`` (``auto``,
    ``multiclass``, ``multilabel``, ``regression``) lays the targets out for that task (`gridgnn.data.targets`;
    ``auto``: as inferred)."""
    if "task" in options:
        from gridgnn.data.retarget import with_task

        task = options.pop("task")
        return with_task(as_graph(data, **options), task)
    if isinstance(data, (str, os.PathLike)):
        from gridgnn.train.run.training import load_graph

        return load_graph(TrainConfig(dataset=str(data), **options))
    from gridgnn.data.attach import NodeFiles, attach_node_data

    files = NodeFiles(*(options.pop(name, None) for name in ("features", "labels", "split", "edge_features")))
    if isinstance(data, Graph):
        return attach_node_data(data, files, seed=options.get("seed", 0))
    if hasattr(data, "edge_index"):
        from gridgnn.data.interop import graph_from_pyg

        graph = graph_from_pyg(data, seed=options.get("seed", 0), directed=bool(options.get("directed", False)))
        return attach_node_data(graph, files, seed=options.get("seed", 0))
    raise ConfigError(f"cannot use a {type(data).__name__} as a graph: give a gridgnn Graph, a PyG Data, a "
                      "dataset name or path, or build one with gridgnn.graph_from_arrays")


def graph_from_arrays(adjacency, features=None, labels=None, *, train_mask=None, val_mask=None,
                      test_mask=None, name: str = "arrays", seed: int = 0) -> Graph:
    """A `Graph` from arrays: ``adjacency`` a scipy sparse (n, n) matrix with ``adj[dst, src] != 0`` or an
    edge index (2, E) of (source, target) rows; ``features`` (n, f) (placeholders when None); ``labels`` (n,)
    int (one class when None); bool masks (n,) (a seeded 60/20/20 split when any is None)."""
    from gridgnn.data.interop import edge_ids, graph_from_pyg

    if sp.issparse(adjacency):
        if adjacency.ndim != 2 or adjacency.shape[0] != adjacency.shape[1]:
            raise DataError(f"adjacency must be a square (n, n) matrix, got shape {adjacency.shape}")
        coo = sp.coo_matrix(adjacency)
        if coo.data.dtype.kind not in "biuf" or not np.isfinite(coo.data).all():
            raise DataError("adjacency holds NaN, infinite or non-numeric values; give finite edge weights")
        edge_index, num_nodes = np.vstack([coo.col, coo.row]), adjacency.shape[0]
    else:
        edge_index = edge_ids(np.asarray(adjacency), "edge index")
        if edge_index.shape[1] == 0 and features is None:
            raise DataError("the edge index is empty: give features (n, f) to say how many vertices there are")
        num_nodes = features.shape[0] if features is not None else int(edge_index.max()) + 1
    data = SimpleNamespace(edge_index=edge_index, num_nodes=num_nodes, x=features, y=labels,
                           train_mask=train_mask, val_mask=val_mask, test_mask=test_mask)
    return graph_from_pyg(data, name=name, seed=seed)


def fit(data=None, *, nprocs: int = 1, threads: int | None = None, **options) -> TrainedModel:
    """Train a model (``model="gcn"``, ``"sage"``, ``"gin"`` or ``"gat"`` with ``heads``, ``output_heads``,
    ``attn_dropout``) full-graph on ``data`` (see `as_graph`; or name it ``dataset=`` as ``gridgnn train
    --dataset`` does) and return a `TrainedModel`.

    ``options``: any `TrainConfig` field (epochs, hidden, layers, dropout, lr, weight_decay, seed, order,
    algo, weights, predictions_out, embeddings_out, save_model, metrics_out, and the loop's patience,
    eval_every, lr_schedule, lr_step_size, lr_gamma, lr_min, lr_plateau_patience, log_csv, ...). `fit` prints nothing by
    default (``quiet=True``); ``progress=True`` prints one line per epoch and ``quiet=False`` what ``gridgnn
    train`` prints (per-epoch lines on a terminal, a line every few seconds in a log, and on a grid the
    workers' summary). In one process the default ``algo`` is ``local``; under torchrun give a distributed
    ``algo`` (1d, 1.5d, 2d, 3d, auto) and every rank calls `fit` (collective on the world; every rank gets
    the model). With ``nprocs`` > 1 outside torchrun, gridgnn starts ``nprocs`` local workers (``threads``
    compute threads each) on the grid ``algo`` names (default ``auto``), through the launcher ``gridgnn
    train --nprocs`` uses (`gridgnn.launch.workers.launch_workers`), and reads their model back; as there,
    every execution option not given (``comm``, ``reorder``, ``cache_panels``, ``full_feature_rows``,
    ``defer_weight_gather``) is the planner's choice (`gridgnn.plan.execution`).
    """
    graph, options = _fit_graph(data, options)
    options.setdefault("quiet", not options.get("progress"))
    if nprocs > 1 and "WORLD_SIZE" not in os.environ:
        return _train_on_workers(graph, nprocs, threads, options)
    from gridgnn.train.outputs.products import select_weights
    from gridgnn.train.outputs.progress import EpochPrinter
    from gridgnn.train.run.training import run_training

    config = TrainConfig(**options)
    rank0 = int(os.environ.get("RANK", "0")) == 0
    run = run_training(config, graph=graph, on_epoch=EpochPrinter(config) if rank0 else None)
    epoch = select_weights(run.model, run.result, config.weights, strict=False)
    return TrainedModel(run.model.eval(), epoch, run.result.epochs, run.metrics, config, run.graph)


def _fit_graph(data, options: dict) -> tuple[Graph, dict]:
    """The graph `fit` trains on and its `TrainConfig` fields, ``dataset`` set: ``data`` and ``dataset=`` may
    both name the data only when they agree; with a `Graph` or PyG ``Data``, ``dataset=`` is the name the run
    records."""
    named = options.get("dataset")
    if data is None and named is None:
        raise ConfigError("fit needs data: a Graph, a PyG Data, or a dataset name, generator spec or path "
                          "(as its first argument or dataset=)")
    if data is not None and named is not None and isinstance(data, (str, os.PathLike)) and str(data) != named:
        raise ConfigError(f"fit got two datasets, {str(data)!r} and dataset={named!r}: give one")
    graph_options = {k: options[k] for k in ("data_root", "directed", "normalize_features", "seed", "task",
                                             "features", "labels", "split") if k in options}
    graph = as_graph(named if data is None else data, **graph_options)
    return graph, {**options, "dataset": named or graph.name}


def _train_on_workers(graph: Graph, nprocs: int, threads: int | None, options: dict) -> TrainedModel:
    """Run ``options`` on ``nprocs`` local workers with ``graph`` (the launcher resolves the run once: grid,
    vertex order, auto choices; and prepares the graph for the workers), read the model and metrics back."""
    import json

    from gridgnn.launch.workers import launch_workers
    from gridgnn.nn.export import check_saves
    from gridgnn.plan.execution import UNSET
    from gridgnn.run_spec import ProcessOptions

    options = {"algo": "auto", **UNSET, **options, "nprocs": nprocs}  # unpinned options: the planner's
    if options["algo"] == "local":
        raise ConfigError(f"algo 'local' runs in one process; choose a grid for {nprocs} processes")
    with tempfile.TemporaryDirectory(prefix="gridgnn-api-") as folder:
        options.setdefault("save_model", str(Path(folder) / "model.pt"))
        options.setdefault("metrics_out", str(Path(folder) / "metrics.json"))
        config = TrainConfig(**options)
        check_saves(config.model, "fit(nprocs > 1)", "its workers hand the model back in a model file: train it "
                    "in one process or under torchrun")
        status = launch_workers(config, ProcessOptions(threads=threads), graph=graph)
        if status != 0:
            raise RuntimeError(f"gridgnn train on {nprocs} workers failed with status {status} (see its stderr)")
        model, info = _load_model(config.save_model)
        metrics = json.loads(Path(config.metrics_out).read_text(encoding="utf-8"))
    history = [EpochRecord.from_dict({k: e[k] for k in RECORD_FIELDS if k in e}) for e in metrics["epochs"]]
    return TrainedModel(model, int(info.get("epoch", len(history))), history, metrics, config, graph)


def _inputs(model: nn.Module, data) -> tuple:
    from gridgnn.nn.export import kind_of
    from gridgnn.nn.models import operator_of
    from gridgnn.train.run.inference import local_inputs

    graph = as_graph(data)
    check_fits(model, graph.num_features, "the model")
    return local_inputs(graph, operator_of(kind_of(model)))


def predict(model: nn.Module, data) -> Predictions:
    """Eval-mode predictions of ``model`` on every vertex of ``data`` (`as_graph`), in one process."""
    from gridgnn.train.outputs.per_vertex import infer

    features, agg = _inputs(model, data)
    output, _ = infer(model, features, agg)
    task = model.task
    if task == "multiclass":
        return Predictions(output.exp(), output.argmax(dim=1))
    if task == "multilabel":
        probabilities = torch.sigmoid(output)
        return Predictions(probabilities, (probabilities > 0.5).long())
    return Predictions(None, output)


def embed(model: nn.Module, data, layer: int | None = None) -> Tensor:
    """(n, width) output of layer ``layer`` (1 = first; default the last hidden layer; ReLU applied for
    hidden layers, the logits for the last) on every vertex of ``data``, in one process."""
    from gridgnn.train.outputs.per_vertex import check_embedding_layer, default_embedding_layer, infer

    check_embedding_layer(layer, len(model.layers))
    features, agg = _inputs(model, data)
    _, embedding = infer(model, features, agg, layer or default_embedding_layer(model))
    return embedding


def save_model(model: nn.Module, path: str | os.PathLike) -> Path:
    """Write ``model`` as a model file (`gridgnn.nn.export`): ``torch.load(path, weights_only=True)`` reads it."""
    return _save_model(model, path)


def load_model(path: str | os.PathLike) -> nn.Module:
    """The model of a model file (``--save-model``, `save_model`) or a checkpoint folder, in eval mode."""
    from gridgnn.train.run.inference import load_trained

    return load_trained(path)[0]


def to_pyg(model: nn.Module) -> nn.Module:
    """The PyTorch Geometric layers (``GCNConv``, ``SAGEConv`` or ``GINConv``) holding ``model``'s weights:
    ``to_pyg(model)(x, edge_index)`` gives gridgnn's log-probabilities within 1e-5 (see `gridgnn.nn.export`)."""
    from gridgnn.nn.export import to_pyg as _to_pyg

    return _to_pyg(model)
