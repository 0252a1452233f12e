"""2D/3D weight gradients: each process reads only its column block of every weight and bias, so only those
blocks are summed, over the processes sharing them, and then gathered on ``col`` (`GridOps.reduce_gradients`).
Training equals one process and measured bytes equal the model in every grid test of the suite; these pure
checks pin what the model assumes."""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.sparse as sp
import torch

from gridgnn.config import TrainConfig
from gridgnn.cost.epoch_model import predict_epoch
from gridgnn.cost.graph_stats import GraphStats
from gridgnn.grid.shape import resolve_grid
from gridgnn.nn import build_model
from gridgnn.nn.trace import model_spec
from gridgnn.parallel.custom_loop import grid_aggregation
from gridgnn.partition import block_bounds

F_IN, CLASSES = 30, 5
CONFIGS = [TrainConfig(layers=3, hidden=8), TrainConfig(layers=2, hidden=64),
           TrainConfig(model="sage", hidden=8), TrainConfig(model="gin", hidden=8, gin_train_eps=True),
           TrainConfig(model="gat", hidden=4, heads=3, output_heads=2)]


def test_the_model_lists_every_parameter_of_every_model():
    for config in CONFIGS:
        model = build_model(config, F_IN, CLASSES)
        spec = model_spec(config, GraphStats("x", 50, 100, F_IN, CLASSES))
        listed = [int(np.prod(dims)) for dims, _ in spec.ops.parameter_slices(False)]
        assert listed == [p.numel() for p in model.parameters()], config.model  # in the model's order
        whole = [dims for dims, dim in spec.ops.parameter_slices(False) if dim is None]
        assert len(whole) == {"gat": 4, "gin": 2}.get(config.model, 0)  # attention vectors; trained ε


def test_sliced_reduction_moves_less_than_a_world_all_reduce():
    stats = GraphStats("x", 400, 4000, F_IN, CLASSES)
    for config in CONFIGS:
        n = model_spec(config, stats).num_parameters()
        for algo, p, grid in (("2d", 4, "2x2"), ("2d", 8, "2x4"), ("2d", 8, "8x1"), ("2d", 16, "4x4"),
                              ("3d", 8, "2x2x2"), ("3d", 16, "2x2x4"), ("3d", 16, "4x4x1")):
            shape = resolve_grid(algo, p, grid=grid)
            spec = model_spec(config, stats)
            terms = [t for t in predict_epoch(spec, stats, shape).terms if t.phase == "weight_grad"]
            world = 2 * n * 4 * (p - 1) // p
            moved = sum(t.bytes for t in terms)
            if shape.col_blocks == 1:  # every process holds whole rows: one all-reduce, as before
                assert [(t.op, t.axis) for t in terms] == [("all_reduce", "world")] and (moved == world).all()
                continue
            assert (moved < world).all(), (config.model, grid)
            ops = [(t.op, t.axis) for t in terms]
            whole = [("all_reduce", "world")] if config.model in ("gat", "gin") else []
            within = [a for a in shape.axes if a != "col" and shape.size(a) > 1]
            if len(within) == 2:  # 3D: one all-reduce over the block's q·d processes, done in three steps
                block = [("reduce_scatter", "row"), ("all_reduce", "depth"), ("all_gather", "row")]
            else:
                block = [("all_reduce", a) for a in within]
            assert ops == whole + block + [("all_gather", "col")], (config.model, grid)
            if len(within) == 2:  # the bytes of one all-reduce over the block's q·d processes, up to padding
                pcol, group, row = shape.col_blocks, shape.size("row") * shape.size("depth"), shape.size("row")
                own = np.zeros(pcol)
                for dims, dim in spec.ops.parameter_slices(False):
                    if dim is not None:
                        own += np.diff(block_bounds(dims[dim], pcol, allow_empty=True)) * np.prod(dims) / dims[dim]
                ideal = 2 * own[np.array([shape.coords(r)["col"] for r in range(p)])] * 4 * (group - 1) / group
                sliced = sum(t.bytes for t in terms[len(whole):-1])
                assert (np.abs(sliced - ideal) <= 2 * (row - 1) * 4 + 8).all(), (config.model, grid)


def test_a_parameter_read_two_ways_is_reduced_whole():
    ops = grid_aggregation(sp.identity(6, format="csr"), algo="2d")  # one process: a 1 x 1 grid
    weight, bias = torch.zeros(4, 4), torch.zeros(4)
    ops.linear(torch.ones(6, 4), weight)  # f_in <= f_out: its columns
    ops.add_bias(torch.ones(6, 4), bias)
    assert ops._slices[id(weight)][1:] == (1, 4) and ops._slices[id(bias)][1:] == (0, 4)
    ops.linear(torch.ones(6, 4), weight)
    assert ops._slices[id(weight)][1:] == (1, 4)  # the same way again: still sliced
    ops._note_slice(weight, 0, 4)
    assert ops._slices[id(weight)] is None  # rows this time: reduced whole from now on
    ops._note_slice(weight, 1, 4)
    assert ops._slices[id(weight)] is None


def test_feature_rows_read_w_by_columns():
    stats = GraphStats("x", 400, 4000, 300, CLASSES)
    config = TrainConfig(hidden=8)
    shape = resolve_grid("2d", 4, grid="2x2")
    spec = model_spec(config, stats)
    kept = dataclasses.replace(spec, full_feature_rows=True)
    plain = spec.ops.parameter_slices(spec.keeps_feature_rows(shape))
    rows = kept.ops.parameter_slices(kept.keeps_feature_rows(shape))
    assert plain[0] == ((300, 8), 0) and rows[0] == ((300, 8), 1)  # reduce-scatter: W's rows; local: its columns
