"""Worker-side code of the distributed output tests (imported by spawned processes)."""

from __future__ import annotations

import dataclasses

import torch.distributed as dist

from gridgnn.config import TrainConfig
from gridgnn.nn.export import load_model
from gridgnn.train.inference import grid_inputs
from gridgnn.train.products import write_vertex_outputs
from gridgnn.train.run import load_graph
from gridgnn.train.run_distributed import train_on_grid


def train_then_predict(rank: int, world_size: int, config_kwargs: dict, predict_grids: list[dict],
                       folder: str) -> None:
    """Train on ``config_kwargs``'s grid writing its outputs and model file, then predict with that file on
    each grid of ``predict_grids`` (``{"algo": ..., "replication"/"grid": ...}``) into ``folder``."""
    config = TrainConfig(**config_kwargs)
    graph = load_graph(config)
    train_on_grid(config, graph)
    dist.barrier()  # rank 0 wrote the model file
    model, _ = load_model(config.save_model)
    for spec in predict_grids:
        other = dataclasses.replace(config, algo=spec["algo"], replication=spec.get("replication", 1),
                                    grid=spec.get("grid"))
        features, ops = grid_inputs(other, graph, world_size)
        name = f"{folder}/{spec['algo']}"
        write_vertex_outputs(model, features, ops, graph, predictions_out=f"{name}-pred.npy",
                             embeddings_out=f"{name}-emb.csv", embedding_layer=1)
