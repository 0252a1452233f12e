"""Inference: a trained model from a model file or a checkpoint, and the inputs of one process or one rank
(the aggregation and the features in its layout).

`grid_inputs` builds what `gridgnn.train.loop.distributed.DistributedTrainer` builds for training (the grid, its
`GridOps` on Â, this rank's feature block), without labels or an optimizer, so a saved model runs on any
grid, independent of the one it was trained on.
"""

from __future__ import annotations

import os
from pathlib import Path

from torch import nn

from gridgnn.config import TrainConfig
from gridgnn.data.edge_features import operator_rows
from gridgnn.data.operators import operator_matrix
from gridgnn.data.shard import shard_node_data
from gridgnn.grid.comm import Communicator
from gridgnn.grid.process_grid import ProcessGrid
from gridgnn.grid.shape import GridShape
from gridgnn.nn import as_model_input
from gridgnn.nn.export import ModelFileError, build_model, load_model, recorded_options
from gridgnn.nn.features import stays_sparse
from gridgnn.nn.layout import LocalLayout
from gridgnn.nn.models import MODELS, operator_of, reads_edges
from gridgnn.parallel.grid_ops import GridOps
from gridgnn.spmm.local import LocalSpMM
from gridgnn.train.checkpoint.manifest import read_manifest
from gridgnn.train.checkpoint.store import read_weights
from gridgnn.train.loop.trainer import model_input


def local_inputs(graph, operator: str = "gcn") -> tuple[object, LocalLayout]:
    """(features, the `LocalLayout` of ``operator``'s matrix, `gridgnn.data.operators`) of the whole graph
    in one process. Not collective."""
    matrix = operator_matrix(operator, graph.adj)
    layout = LocalLayout(LocalSpMM(matrix), operator)
    layout.set_edge_features(operator_rows(graph.adj, graph.edge_attr, matrix))  # for a model that passes messages
    return as_model_input(graph.features), layout


def grid_inputs(config: TrainConfig, graph, shape: GridShape) -> tuple[object, GridOps]:
    """(this rank's feature block, `GridOps`) of ``config.model`` on ``shape``, the grid of a resolved run
    (`gridgnn.train.run.resolve.grid_shape_for` validates one; nothing is resolved here).

    Collective on the world (builds the device mesh); without a process group, a 1-process grid.
    """
    from gridgnn.train.run.grid_train import column_seed_of, model_operator, operator_edge_rows

    grid = ProcessGrid.create(shape)
    adj = model_operator(config, graph)  # config.model's operator; a prepared graph must hold that one
    ops = GridOps(grid, Communicator(grid, overlap=False), adj, operator=operator_of(config.model),
                  parts=graph.meta.get("reorder_bounds"), messages=reads_edges(config),
                  edge_attr=operator_edge_rows(graph, adj), column_seed=column_seed_of(graph, shape))
    shard = shard_node_data(graph, ops.row_range, ops.input_range(graph.num_features), grid.device)
    return model_input(shard.features, ops, graph.num_features, stays_sparse(graph.features)), ops


def load_trained(path: str | os.PathLike) -> tuple[nn.Module, dict]:
    """The model (eval mode) and its info from a model file (``--save-model``) or a checkpoint folder
    (``DIR/epoch-NNNNNNNN``, verified as `gridgnn.train.checkpoint.store` does). Not collective."""
    source = Path(path)
    return _checkpoint_model(source) if source.is_dir() else load_model(source)


def _checkpoint_model(folder: Path) -> tuple[nn.Module, dict]:
    """The weights of a training checkpoint (`gridgnn.train.checkpoint.store`) as a model of its kind."""
    manifest = read_manifest(folder)
    config, dataset = manifest.get("config") or {}, manifest["fingerprint"].get("dataset") or {}
    try:
        model_config = {"in_channels": int(dataset["num_features"]), "hidden_channels": int(config["hidden"]),
                        "out_channels": int(dataset["num_classes"]), "num_layers": int(config["layers"]),
                        "order": config["order"], "dropout": float(config["dropout"]), "seed": int(config["seed"]),
                        "task": dataset.get("task", "multiclass"), **recorded_options(config)}
        if dataset.get("num_edge_features") and MODELS.get(config.get("model", "gcn")) is not None \
                and MODELS[config.get("model", "gcn")].edge_inputs:  # GINE, MeshGraphNet: the graph's width
            model_config["edge_dim"] = int(dataset["num_edge_features"])
        if dataset.get("target_standardization") is not None:  # a --standardize-targets run's output units
            model_config["target_shift"], model_config["target_scale"] = dataset["target_standardization"]
    except (KeyError, TypeError, ValueError):
        raise ModelFileError(f"checkpoint '{folder}': its manifest lacks the model configuration") from None
    model = build_model(config.get("model", "gcn"), model_config, where=f"checkpoint '{folder}'")
    try:
        model.load_state_dict(read_weights(folder), strict=True)
    except RuntimeError as exc:
        raise ModelFileError(f"checkpoint '{folder}': weights do not fit ({' '.join(str(exc).split())[:160]})") \
            from None
    info = {"epoch": manifest["epoch"], "weights": "checkpoint", "dataset": dataset.get("name")}
    return model.eval(), info
