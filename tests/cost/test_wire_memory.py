"""The memory model's ``wire_buffers`` (`gridgnn.cost.memory_model`): what ``--comm-precision`` adds to a rank's
working set, zero for fp32, and measured against the model where it matters (slow)."""

from __future__ import annotations

import numpy as np
import plan_workers as pw
import pytest
from model_helpers import random_stats

from gridgnn.config import TrainConfig
from gridgnn.cost.epoch_model import ModelSpec, predict_epoch
from gridgnn.cost.memory_model import WIRE_TEMPORARIES
from gridgnn.grid.shape import resolve_grid
from gridgnn.launch.spawn import run_workers
from gridgnn.nn.trace import model_spec
from gridgnn.partition import block_bounds, block_sizes
from gridgnn.train.run.resolve import grid_shape_for
from gridgnn.train.run.training import load_graph

HIDDEN = 24


def _memory(stats, algo: str, p: int, precision: str, comm: str = "dense"):
    spec = model_spec(ModelSpec(stats.num_features, stats.num_classes, hidden=HIDDEN), stats)
    return predict_epoch(spec, stats, resolve_grid(algo, p), comm=comm, comm_precision=precision).memory


@pytest.mark.parametrize("algo,p", [("1d", 4), ("1.5d", 4), ("2d", 4), ("3d", 8)])
def test_the_encoded_rows_and_temporaries_of_a_dense_block_row(algo, p):
    """Dense communication: the root's block row and a received one of the widest SpMM, in float32 ``both``;
    bf16 adds half of it (two bytes a value), int8 (w + 1) / 4w of it and two float32 copies of one side."""
    _, stats = random_stats(103, density=0.05, seed=3, features=40, classes=5)
    fp32 = _memory(stats, algo, p, "fp32")
    assert not fp32["wire_buffers"].any()
    shape = resolve_grid(algo, p)
    rows = max(block_sizes(block_bounds(103, shape.sizes[0])))
    pcol = shape.col_blocks
    width = max(block_sizes(block_bounds(HIDDEN, pcol))) if pcol > 1 else HIDDEN  # the widest SpMM: hidden
    both = 2 * rows * width * 4
    for precision, encoded in (("bf16", both // 2), ("fp16", both // 2), ("int8", both * (width + 1) // (4 * width))):
        memory = _memory(stats, algo, p, precision)
        expected = encoded + WIRE_TEMPORARIES[precision] * both // 2
        assert memory["wire_buffers"].tolist() == [expected] * shape.world_size, precision
        others = {k: v.tolist() for k, v in memory.items() if k != "wire_buffers"}
        assert others == {k: v.tolist() for k, v in fp32.items() if k != "wire_buffers"}, precision


def test_sparse_communication_encodes_its_touched_rows():
    """``--comm sparse``: the same rule over the rows the one all-to-all moves, less than a dense block row's
    on a graph whose ranks touch few remote rows."""
    _, stats = random_stats(400, density=0.002, seed=5, features=40, classes=5)
    sparse = _memory(stats, "1d", 4, "bf16", "sparse")["wire_buffers"]
    dense = _memory(stats, "1d", 4, "bf16")["wire_buffers"]
    assert (sparse > 0).all() and (sparse < dense).all()
    assert (_memory(stats, "1d", 4, "int8", "sparse")["wire_buffers"] > sparse).all()


@pytest.mark.slow
def test_an_int8_run_measures_within_25_percent_of_its_model():
    """As `test_sparse_receive_buffers_within_25_percent_where_they_matter` (R-MAT 2^17, edge factor 32, 256
    features, hidden 256, 1D on 8 processes, sparse communication), with ``--comm-precision int8``: the encoded
    rows and the float32 temporaries of encoding them are a large part of the working set."""
    kwargs = dict(dataset="rmat:scale=17,edge_factor=32,features=256", epochs=2, algo="1d", nprocs=8, hidden=256,
                  comm="sparse", comm_precision="int8")
    config = TrainConfig(**kwargs)
    graph = load_graph(config)
    shape = grid_shape_for(config, 8)
    prediction = predict_epoch(model_spec(config, graph), graph, shape, comm="sparse", comm_precision="int8")
    assert (prediction.memory["wire_buffers"] > 0.2 * prediction.memory_bytes).all()
    model = prediction.memory_bytes - prediction.memory["features"]  # 1D features: a view of the loaded graph
    measured = run_workers(pw.memory_worker, 8, kwargs, graph, timeout_s=900)
    ratios = [out["peak"] / int(model[rank]) for rank, out in enumerate(measured)]
    assert all(abs(r - 1) <= 0.25 for r in ratios), ratios
    assert np.isfinite(ratios).all()
