"""Worker-side code of the distributed output tests (imported by spawned processes)."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch
import torch.distributed as dist

import gridgnn
from gridgnn.config import TrainConfig
from gridgnn.nn.export import load_model
from gridgnn.train.outputs.products import write_vertex_outputs
from gridgnn.train.run.grid_train import train_on_grid
from gridgnn.train.run.inference import grid_inputs
from gridgnn.train.run.resolve import grid_shape_for, resolve_run
from gridgnn.train.run.training import load_graph


def custom_loop(graph, algo: str, epochs: int = 3, defer: bool = False) -> list[np.ndarray]:
    """The own-loop example of docs/python.md on the current process group (or one process): the final weights; with
    ``defer``, the weights' column blocks are gathered once, at the end."""
    agg = gridgnn.grid_aggregation(graph.adj, algo=algo, defer_weight_gather=defer)
    x = gridgnn.local_block(graph.dense_features(), agg)
    y = gridgnn.local_block(graph.labels, agg)
    train = gridgnn.local_block(graph.train_mask, agg)
    model = gridgnn.GCN(graph.num_features, 6, graph.num_classes)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    for epoch in range(1, epochs + 1):
        optimizer.zero_grad()
        loss = gridgnn.masked_cross_entropy(model(x, agg, epoch=epoch), y, train,
                                            num_selected=int(graph.train_mask.sum()))
        loss.backward()
        agg.reduce_gradients(list(model.parameters()))
        optimizer.step()
    if defer:
        agg.gather_parameters(list(model.parameters()), optimizer)
    return [p.detach().numpy().copy() for p in model.parameters()]


def train_then_predict(rank: int, world_size: int, config_kwargs: dict, predict_grids: list[dict],
                       folder: str) -> list[np.ndarray]:
    """Train on ``config_kwargs``'s grid writing its outputs and model file, then predict with that file on
    each grid of ``predict_grids`` (``{"algo": ..., "replication"/"grid": ...}``) into ``folder``; last, the
    own-loop example on a 2D grid, plain and with the deferred weight gather (returns both final weights)."""
    config = TrainConfig(**config_kwargs)
    graph = load_graph(config)
    resolved, shape, ordered = resolve_run(config, graph, world_size)
    train_on_grid(resolved, ordered, shape=shape)
    dist.barrier()  # rank 0 wrote the model file
    model, _ = load_model(config.save_model)
    for spec in predict_grids:
        other = dataclasses.replace(config, algo=spec["algo"], replication=spec.get("replication", 1),
                                    grid=spec.get("grid"))
        features, ops = grid_inputs(other, graph, grid_shape_for(other, world_size))
        name = f"{folder}/{spec['algo']}"
        write_vertex_outputs(model, features, ops, graph, predictions_out=f"{name}-pred.npy",
                             embeddings_out=f"{name}-emb.csv", embedding_layer=1)
    return [custom_loop(graph, "2d"), custom_loop(graph, "2d", defer=True)]
