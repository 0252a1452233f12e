"""What a run leaves besides its metrics: predictions, embeddings and the model file (`TrainConfig` fields
``predictions_out``, ``embeddings_out``, ``embedding_layer``, ``save_model``, ``weights``)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from gridgnn.config import TrainConfig
from gridgnn.errors import ConfigError
from gridgnn.nn.export import save_model
from gridgnn.nn.layout import as_layout
from gridgnn.train.outputs import (
    check_embedding_layer,
    check_output_path,
    default_embedding_layer,
    infer,
    prediction_records,
    vertex_ids,
    write_rows,
)
from gridgnn.train.trainer import Trainer, TrainResult


def check_products(config: TrainConfig, rank: int = 0) -> None:
    """Fail before any work (`ConfigError`, one line) on an output path that cannot be written or has no
    known suffix; the model file is checked on rank 0 only (only it writes one). Not collective."""
    from gridgnn.train.metrics import check_writable

    for path, flag in ((config.predictions_out, "--predictions-out"), (config.embeddings_out, "--embeddings-out")):
        if path is not None:
            check_output_path(path, flag)
    if config.save_model is not None and rank == 0:
        check_writable(config.save_model, "--save-model file")
    check_embedding_layer(config.embedding_layer, config.layers)


def wants_products(config: TrainConfig) -> bool:
    return any(p is not None for p in (config.predictions_out, config.embeddings_out, config.save_model))


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


def write_products(config: TrainConfig, trainer: Trainer, graph, result: TrainResult, rank: int = 0) -> None:
    """Write the outputs ``config`` asks for with the chosen weights (collective on the world in a
    distributed run: every rank writes its own rows). Leaves ``trainer.model`` with the chosen weights when
    there is anything to write (else untouched: the last epoch's)."""
    if not wants_products(config):
        return
    epoch = select_weights(trainer.model, result, config.weights)
    write_vertex_outputs(trainer.model, trainer.features, trainer.layout, graph, predictions_out=config.predictions_out,
                         embeddings_out=config.embeddings_out, embedding_layer=config.embedding_layer)
    if config.save_model is not None and rank == 0:
        info = {"epoch": epoch, "weights": config.weights, "dataset": graph.name,
                "num_nodes": graph.num_nodes, "num_features": graph.num_features,
                "num_classes": graph.num_classes,
                "feature_normalization": graph.meta.get("feature_normalization")}
        save_model(trainer.model, config.save_model, info)


def write_vertex_outputs(model: nn.Module, features, agg, graph, *, predictions_out: str | None = None,
                         embeddings_out: str | None = None, embedding_layer: int | None = None) -> None:
    """Predictions and/or embeddings of ``model`` on this rank's rows (`Layout.row_range` of ``agg``, a
    `gridgnn.nn.layout.Layout` or a one-process aggregation), written as `gridgnn.train.outputs` describes.
    Collective on the grid of ``agg``."""
    if predictions_out is None and embeddings_out is None:
        return
    layer = None
    if embeddings_out is not None:
        layer = embedding_layer if embedding_layer is not None else default_embedding_layer(model)
    log_probs, embedding = infer(model, features, agg, layer)
    rows = as_layout(agg, model.operator, graph.num_nodes).row_range
    ids = vertex_ids(graph, rows)
    order = getattr(graph, "meta", {}).get("reorder_order")  # a reordered graph: write at original positions
    at = None if order is None else np.asarray(order[rows[0]:rows[1]], dtype=np.int64)
    if predictions_out is not None:
        write_rows(predictions_out, rows, graph.num_nodes, prediction_records(log_probs, ids), ids, positions=at)
    if embeddings_out is not None:
        block = embedding.detach().to(device="cpu", dtype=torch.float32).numpy()
        write_rows(embeddings_out, rows, graph.num_nodes, block, ids, positions=at)
