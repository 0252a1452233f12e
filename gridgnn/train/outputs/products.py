"""What a run leaves besides its metrics: predictions, embeddings and the model file (fields
``predictions_out``, ``embeddings_out``, ``embedding_layer``, ``save_model``, ``weights`` of its
`OutputOptions`)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch
from torch import nn

from gridgnn.config import OutputOptions, TrainConfig
from gridgnn.errors import ConfigError
from gridgnn.nn.export import check_saves, save_model
from gridgnn.nn.layout import as_layout
from gridgnn.safe_files import check_target
from gridgnn.train.loop.trainer import Trainer, TrainResult
from gridgnn.train.outputs.per_vertex import (
    check_embedding_layer,
    check_output_path,
    default_embedding_layer,
    infer,
    prediction_records,
    vertex_ids,
    write_rows,
)
from gridgnn.train.outputs.row_writer import agree


def check_products(config: TrainConfig, rank: int = 0, reads: dict[str, str] | None = None) -> None:
    """Fail before any work (`ConfigError`, one line) on an output path that cannot be written, is not a
    regular file, has no known suffix, or is named twice (`check_distinct_outputs`); the model file is
    checked on rank 0 only (only it writes one). ``reads``: flag -> path of the inputs (``--model``). Not
    collective."""
    from gridgnn.train.outputs.metrics import check_writable

    check_distinct_outputs(config, reads)
    for path, flag in ((config.predictions_out, "--predictions-out"), (config.embeddings_out, "--embeddings-out")):
        if path is not None:
            check_output_path(path, flag)
    if config.save_model is not None:
        check_saves(config.model)  # a kind without a model-file layout: refused before the run, not after it
    if config.save_model is not None and rank == 0:
        check_target(config.save_model, "--save-model file")
        check_writable(config.save_model, "--save-model file")
    check_embedding_layer(config.embedding_layer, config.layers)


def check_distinct_outputs(config: TrainConfig, reads: dict[str, str] | None = None) -> None:
    """Raise `ConfigError` when two outputs (``--save-model``, ``--predictions-out``, ``--embeddings-out``,
    ``--metrics-out``, ``--log-csv``, ``--checkpoint-dir`` or a file gridgnn keeps inside it) name one file, or
    an output names an input (``--dataset`` file or a prepared folder's file, ``reads``): one would silently replace the
    other. Paths are compared after resolving their folders; existing files also by device and inode.
    Not collective."""
    named = [(flag, path) for flag, path in (("--save-model", config.save_model),
                                              ("--predictions-out", config.predictions_out),
                                              ("--embeddings-out", config.embeddings_out),
                                              ("--metrics-out", config.metrics_out),
                                              ("--log-csv", config.log_csv),
                                              ("--checkpoint-dir", config.checkpoint_dir)) if path is not None]
    seen: dict = {}
    inputs = dict(reads or {})
    if config.dataset and os.path.exists(config.dataset):
        inputs.setdefault("--dataset", config.dataset)
    for flag, path in inputs.items():
        for key in _identities(path):
            seen[key] = (flag, path)
        for name in _folder_inputs(path):
            seen[("path", os.path.realpath(path), name)] = (flag, os.path.join(path, name))
    for flag, path in named:
        for key in _identities(path):
            if key in seen and seen[key][0] != flag:
                raise ConfigError(f"{seen[key][0]} '{seen[key][1]}' and {flag} '{path}' name the same file; "
                                  "give each output its own path")
            seen[key] = (flag, path)
    if config.checkpoint_dir is not None:
        kept = Path(os.path.realpath(config.checkpoint_dir))
        for flag, path in named:
            if flag != "--checkpoint-dir" and _inside_checkpoints(Path(path), kept):
                raise ConfigError(f"{flag} '{path}' is a file gridgnn keeps in --checkpoint-dir "
                                  f"'{config.checkpoint_dir}'; write it elsewhere")


def _folder_inputs(path: str) -> list[str]:
    """The files a prepared folder reads (its manifest and the arrays it lists); none for anything else (other
    folders may hold the run's own earlier outputs beside their data)."""
    from gridgnn.data.prepared import ARRAYS, MANIFEST, is_prepared

    if not os.path.isdir(path) or not is_prepared(path):
        return []
    return [MANIFEST] + [f"{name}.npy" for name in ARRAYS]


def _identities(path: str) -> list:
    """What makes two paths one file: the resolved folder and name, and (when it exists) device and inode."""
    target = Path(path)
    keys: list = [("path", os.path.realpath(target.parent), target.name)]
    try:
        info = os.stat(target)
        keys.append(("inode", info.st_dev, info.st_ino))
    except OSError:
        pass
    return keys


def _inside_checkpoints(path: Path, kept: Path) -> bool:
    """True when ``path`` is a name gridgnn uses in the checkpoint folder ``kept`` (resolved)."""
    from gridgnn.train.checkpoint.lock import LOCK_FILE
    from gridgnn.train.checkpoint.naming import epoch_of
    from gridgnn.train.checkpoint.resume import BEST_WEIGHTS

    if Path(os.path.realpath(path.parent)) != kept:
        return False
    name = path.name
    return (name in (LOCK_FILE, BEST_WEIGHTS, f".{BEST_WEIGHTS}.partial") or epoch_of(path) is not None
            or name.startswith((".partial-epoch-", ".replaced-epoch-")))


def wants_products(outputs: OutputOptions) -> bool:
    """Whether ``outputs`` (a run's output section, or its whole `TrainConfig`) asks for any product."""
    return any(p is not None for p in (outputs.predictions_out, outputs.embeddings_out, outputs.save_model))


def select_weights(model: nn.Module, result: TrainResult, weights: str, *, strict: bool = True) -> int:
    """Load the weights ``weights`` asks for ("best": of the best-validation epoch, "last": as trained)
    into ``model``; returns their epoch. Not collective (every rank holds the same replicated weights).

    When the best epoch was trained before a resume its weights are gone: `ConfigError` if ``strict``, else
    the last weights stay.
    """
    if weights == "last" or (result.best_state is None and not strict):
        return len(result.epochs)
    if result.best_state is None:
        raise ConfigError(f"the best-validation weights (epoch {result.best_epoch}) were trained before this "
                          "run resumed and are not in the checkpoint; use --weights last")
    model.load_state_dict(result.best_state)
    return result.best_epoch


def write_products(outputs: OutputOptions, trainer: Trainer, graph, result: TrainResult, rank: int = 0) -> None:
    """Write the products ``outputs`` (the run's output section, or its whole `TrainConfig`) asks for with the
    chosen weights (collective on the world in a distributed run: every rank writes its own rows). Leaves
    ``trainer.model`` with the chosen weights when there is anything to write (else untouched: the last
    epoch's)."""
    if not wants_products(outputs):
        return
    epoch = select_weights(trainer.model, result, outputs.weights)
    write_vertex_outputs(trainer.model, trainer.features, trainer.layout, graph,
                         predictions_out=outputs.predictions_out, embeddings_out=outputs.embeddings_out,
                         embedding_layer=outputs.embedding_layer)
    if outputs.save_model is None:
        return
    problem = None
    if rank == 0:
        info = {"epoch": epoch, "weights": outputs.weights, "dataset": graph.name,
                "num_nodes": graph.num_nodes, "num_features": graph.num_features,
                "num_classes": graph.num_classes,
                "feature_normalization": graph.meta.get("feature_normalization")}
        try:
            save_model(trainer.model, outputs.save_model, info)
        except ConfigError as exc:  # a full disk: every rank ends with rank 0's one line
            problem = str(exc)
    problem = agree(problem)
    if problem is not None:
        raise ConfigError(problem)


def write_vertex_outputs(model: nn.Module, features, agg, graph, *, predictions_out: str | None = None,
                         embeddings_out: str | None = None, embedding_layer: int | None = None,
                         infer_anyway: bool = False) -> torch.Tensor | None:
    """Predictions and/or embeddings of ``model`` on this rank's rows (`Layout.row_range` of ``agg``, a
    `gridgnn.nn.layout.Layout` or a one-process aggregation), written as `gridgnn.train.outputs.per_vertex` describes.
    Returns this rank's log-probabilities (m, C), or None when there was nothing to write (unless
    ``infer_anyway``: ``gridgnn predict`` measures them). Collective on the grid of ``agg``."""
    if predictions_out is None and embeddings_out is None and not infer_anyway:
        return None
    layer = None
    if embeddings_out is not None:
        layer = embedding_layer if embedding_layer is not None else default_embedding_layer(model)
    log_probs, embedding = infer(model, features, agg, layer)
    rows = as_layout(agg, model.operator, graph.num_nodes).row_range
    ids = vertex_ids(graph, rows)
    order = getattr(graph, "meta", {}).get("reorder_order")  # a reordered graph: write at original positions
    at = None if order is None else np.asarray(order[rows[0]:rows[1]], dtype=np.int64)
    if predictions_out is not None:
        records = prediction_records(log_probs, ids, model.task)
        write_rows(predictions_out, rows, graph.num_nodes, records, ids, positions=at,
                   what="predictions file")
    if embeddings_out is not None:
        block = embedding.detach().to(device="cpu", dtype=torch.float32).numpy()
        write_rows(embeddings_out, rows, graph.num_nodes, block, ids, positions=at, what="embeddings file")
    return log_probs
