"""The training-step cost model against real distributed runs: bytes and calls equal per rank and phase;
memory within 25 %; the vectorized SpMM cost equals the per-rank closed form; CAGNET's logged volumes."""

from __future__ import annotations

import numpy as np
import plan_workers as pw
import pytest
from cost_oracles import block_nnz, spmm_cost
from model_helpers import random_stats

from gridgnn.config import TrainConfig
from gridgnn.cost.cagnet import cagnet_broadcast_words
from gridgnn.cost.epoch_model import PHASES, ModelSpec, predict_epoch
from gridgnn.cost.graph_stats import GraphStats
from gridgnn.cost.rank_cost import shape_blocks, spmm_terms
from gridgnn.cost.stages import stage_layout
from gridgnn.grid.shape import resolve_grid
from gridgnn.launch.spawn import run_workers
from gridgnn.nn.trace import model_spec
from gridgnn.train.run.resolve import grid_shape_for
from gridgnn.train.run.training import load_graph

DATA_ROOT = "../shared/datasets"
CORA = {"dataset": "cora", "data_root": DATA_ROOT}
DIRECTED = {"dataset": "csbm:nodes=300,classes=5,features=13", "directed": True}
GRIDS = [("1d", 4, {}), ("1.5d", 4, {"replication": 2}), ("2d", 4, {}), ("2d", 6, {"grid": "2x3"}),
         ("3d", 8, {})]
ALL = [(data, order, grid) for data in (CORA, DIRECTED) for order in ("auto", "aggregate-first") for grid in GRIDS]
DEFAULT = [(CORA, "auto", GRIDS[0]), (CORA, "auto", GRIDS[3]), (DIRECTED, "aggregate-first", GRIDS[1]),
           (DIRECTED, "aggregate-first", GRIDS[4])]  # every phase and axis kind, both orders and graphs
SLOW = [case for case in ALL if case not in DEFAULT]


def _check_step(data: dict, order: str, grid: tuple) -> None:
    algo, p, extra = grid
    kwargs = dict(data, epochs=2, order=order, algo=algo, nprocs=p, dropout=0.5, **extra)
    config = TrainConfig(**kwargs)
    graph = load_graph(config)
    prediction = predict_epoch(model_spec(config, graph), graph, grid_shape_for(config, p))
    per_rank = run_workers(pw.step_comm_worker, p, kwargs, timeout_s=300)
    for rank, records in enumerate(per_rank):
        for step in records:  # every step moves the same bytes
            for phase in PHASES:
                where = f"{algo} {extra} {order} rank {rank} phase {phase}"
                assert step["by_phase"][phase] == prediction.bytes_by_phase[phase][rank], where
                assert step["calls_by_phase"][phase] == prediction.calls_by_phase[phase][rank], where
            assert step["bytes"] == prediction.bytes[rank]


@pytest.mark.parametrize("data,order,grid", DEFAULT, ids=lambda v: str(v.get("dataset", v) if isinstance(v, dict)
                                                                        else v)[:12])
def test_predicted_step_equals_measured_per_rank_and_phase(data, order, grid):
    _check_step(data, order, grid)


@pytest.mark.slow
@pytest.mark.parametrize("data,order,grid", SLOW, ids=lambda v: str(v.get("dataset", v) if isinstance(v, dict)
                                                                     else v)[:12])
def test_predicted_step_equals_measured_other_orders(data, order, grid):
    _check_step(data, order, grid)


def _random_stats(n: int = 37):
    return random_stats(n, density=0.15, seed=1, features=3, classes=2)


CASES = ([("1d", p, {}) for p in (1, 2, 3, 5)]
         + [("1.5d", p, {"replication": c}) for p, c in [(4, 2), (6, 3), (8, 4), (4, 4)]]
         + [("2d", p, {"grid": g}) for p, g in [(6, "2x3"), (6, "3x2"), (4, "1x4"), (4, "4x1"), (9, "3x3")]]
         + [("3d", p, {"grid": g}) for p, g in [(8, "2x2x2"), (12, "2x2x3"), (3, "1x1x3"), (18, "3x3x2")]])


@pytest.mark.parametrize("algo,p,extra", CASES)
def test_vectorized_spmm_cost_equals_the_per_rank_closed_form(algo, p, extra):
    adj, stats = _random_stats()
    n = adj.shape[0]
    shape = resolve_grid(algo, p, **extra)
    blocks = shape_blocks(shape, stats)
    layout = stage_layout(algo, shape.sizes, n)
    panels = block_nnz(adj, layout.row_bounds, layout.segments) if algo in ("2d", "3d") else None
    for width in (1, 2, 5, 16):
        fwd, bwd = spmm_terms(blocks, width, backward=False), spmm_terms(blocks, width, backward=True)
        for rank in range(p):
            one = spmm_cost(shape, rank, n, width, panels)
            assert sum(t.bytes[rank] for t in fwd) == one.forward_bytes
            assert sum(t.calls[rank] for t in fwd) == one.forward_calls
            assert sum(t.bytes[rank] for t in bwd) == one.backward_bytes
            assert sum(t.calls[rank] for t in bwd) == one.backward_calls


def test_cagnet_logged_volumes():
    """docs/architecture.md §3 and issue 5: the CAGNET authors' words per rank per epoch (own block included)."""
    assert cagnet_broadcast_words(2708, [1433, 16, 7], 4, 1).max() == 3_986_176
    assert cagnet_broadcast_words(2708, [1433, 16, 7], 4, 2).max() == 1_993_088
    assert cagnet_broadcast_words(14_249_639, [300, 16, 24], 16, 1).max() == 5_072_871_484
    assert cagnet_broadcast_words(14_249_639, [300, 16, 24], 16, 4).max() == 1_268_217_960


def test_gridgnn_moves_less_than_cagnet_counts_on_amazon():
    """Same graph and grid: gridgnn's aggregate-first 1D count excludes the own block and the first-layer
    backward product, so it is below CAGNET's; order auto (SpMM widths 16, 16 instead of 300, 16) moves
    about 5x less."""
    stats = GraphStats.from_counts(14_249_639, 115_800_000, 300, 24)
    shape = resolve_grid("1d", 16)
    cagnet_bytes = 4 * cagnet_broadcast_words(14_249_639, [300, 16, 24], 16, 1)
    agg = predict_epoch(model_spec(ModelSpec(300, 24, order="aggregate-first"), stats), stats, shape)
    auto = predict_epoch(model_spec(ModelSpec(300, 24), stats), stats, shape)
    spmm = agg.bytes_by_phase["spmm_forward"] + agg.bytes_by_phase["spmm_backward"]
    assert (spmm < cagnet_bytes).all()
    assert (auto.bytes * 4 < agg.bytes).all()


@pytest.mark.slow
@pytest.mark.parametrize("algo,p,extra", [("1d", 2, {}), ("1.5d", 4, {"replication": 2}), ("2d", 4, {}),
                                          ("3d", 8, {})])
def test_memory_model_within_25_percent_of_measured_peak(algo, p, extra):
    """Peak resident set added by the grid's data and two training steps, on an R-MAT graph whose Â
    dominates the working set (Linux: VmHWM reset through /proc/self/clear_refs).

    1D/1.5D: every rank within 25 %. 2D/3D: the median rank within 25 % and every rank within 40 %: gloo
    buffers Â panels that arrive before their receive is posted, so a rank's peak varies from run to run
    (measured: 0.84x to 1.35x of the model, which counts 2.5 panels in flight).
    """
    spec = "rmat:scale=15,edge_factor=128"
    kwargs = dict(dataset=spec, epochs=2, algo=algo, nprocs=p, **extra)
    config = TrainConfig(**kwargs)
    graph = load_graph(config)
    prediction = predict_epoch(model_spec(config, graph), graph, grid_shape_for(config, p))
    measured = run_workers(pw.memory_worker, p, kwargs, graph, timeout_s=600)
    ratios = [out["peak"] / int(prediction.memory_bytes[rank]) for rank, out in enumerate(measured)]
    worst = 0.25 if algo in ("1d", "1.5d") else 0.40
    assert all(abs(r - 1) <= worst for r in ratios), ratios
    assert abs(float(np.median(ratios)) - 1) <= 0.25, ratios


@pytest.mark.slow
@pytest.mark.parametrize("algo,p,comm", [("1d", 8, "sparse"), ("2d", 4, "sparse"), ("1d", 8, "cover")])
def test_sparse_receive_buffers_within_25_percent_where_they_matter(algo, p, comm):
    """``--comm sparse`` on a graph without locality and wide products (R-MAT 2^17, edge factor 32, 256
    features, hidden 256): 1D's one all-to-all holds most remote rows of X at once, sent and received, which
    the dense model (two blocks in flight) would miss. Every rank within 25 % of the model (measured: 1D P = 8
    0.96–1.14, where the dense model read 1.63–1.96; 2D 2x2 0.92–1.01). At 2^16 the ranks' peaks varied by
    ±12 MB from run to run around a 95 MB model, too noisy for 25 %. ``--comm cover`` the same, with its pairs'
    covers in the buffers (rows of X and partial sums) and their gathered copies: measured 0.97-1.20 (counting
    the covers once, as sparse counts its rows, read 1.08-1.44)."""
    kwargs = dict(dataset="rmat:scale=17,edge_factor=32,features=256", epochs=2, algo=algo, nprocs=p, hidden=256,
                  comm=comm)
    config = TrainConfig(**kwargs)
    graph = load_graph(config)
    shape = grid_shape_for(config, p)
    sparse, dense = (predict_epoch(model_spec(config, graph), graph, shape, comm=mode) for mode in (comm, "dense"))
    if algo == "1d":  # the term this test is about is a large part of the working set
        extra = sparse.memory["receive_buffers"] - dense.memory["receive_buffers"]
        assert (extra > (0.15 if comm == "cover" else 0.25) * sparse.memory_bytes).all()
    model = sparse.memory_bytes - sparse.memory["features"] * (algo == "1d")  # 1D features: a view (above)
    measured = run_workers(pw.memory_worker, p, kwargs, graph, timeout_s=600)
    ratios = [out["peak"] / int(model[rank]) for rank, out in enumerate(measured)]
    assert all(abs(r - 1) <= 0.25 for r in ratios), ratios


GAT_SETTING = {"model": "gat", "heads": 8, "attn_dropout": 0.6, "dropout": 0.6}
"""Veličković et al.'s hidden layer (8 heads of 8 channels), with both dropouts."""


@pytest.mark.slow
@pytest.mark.parametrize("algo,p,extra,hidden", [("1d", 2, {}, 16), ("1d", 2, {}, 128),
                                                 ("1.5d", 4, {"replication": 2}, 64), ("2d", 4, {}, 16),
                                                 ("3d", 8, {}, 64), ("1d", 2, {"model": "sage"}, 64),
                                                 ("2d", 4, {"model": "sage"}, 64), ("1d", 2, {"model": "gin"}, 64),
                                                 ("2d", 4, {"model": "gin"}, 64), ("1d", 2, GAT_SETTING, 8),
                                                 ("2d", 4, GAT_SETTING, 8)])
def test_activation_term_within_25_percent_where_activations_dominate(algo, p, extra, hidden):
    """As above on a sparse graph with 256 features (R-MAT 2^18, edge factor 2), where the activations are
    most of a rank's working set: every rank within 25 %, for GCN, SAGE, GIN and GAT (8 heads of 8, both
    dropouts: its attention term counted). The model does not itemize SAGE's root product or GIN's MLP: they
    measured 0.83 (SAGE) and 1.03 (GIN) of it on 1D, 1.18 and 1.15 on 2D, against GCN's 0.80 and 1.11
    (hidden 64). On 1D/1.5D a rank's feature rows are a view of
    the loaded graph (contiguous rows), already in the worker's baseline, so the features term is left out
    of the comparison there; 2D/3D copy their column block and it stays in."""
    spec = "rmat:scale=18,edge_factor=2,features=256"
    kwargs = dict(dataset=spec, epochs=2, algo=algo, nprocs=p, hidden=hidden, **extra)
    config = TrainConfig(**kwargs)
    graph = load_graph(config)
    prediction = predict_epoch(model_spec(config, graph), graph, grid_shape_for(config, p))
    assert prediction.memory["activations"].sum() > prediction.memory["graph"].sum()  # activations dominate
    model = prediction.memory_bytes - (prediction.memory["features"] if algo in ("1d", "1.5d") else 0)
    measured = run_workers(pw.memory_worker, p, kwargs, graph, timeout_s=600)
    ratios = [out["peak"] / int(model[rank]) for rank, out in enumerate(measured)]
    assert all(abs(r - 1) <= 0.25 for r in ratios), ratios


MESSAGE_MEMORY_CASES = [("1d", 2, {"model": "gine"}), ("1d", 2, {"model": "gine", "layers": 4, "hidden": 32}),
                        ("1d", 2, {"model": "meshgraphnet"}), ("1d", 2, {"model": "gat", "edge_dim": 3, "heads": 2}),
                        ("1.5d", 4, {"model": "gine", "replication": 2}), ("2d", 4, {"model": "gine"}),
                        ("2d", 4, {"model": "gat", "edge_dim": 3, "heads": 2})]


@pytest.mark.slow
@pytest.mark.parametrize("algo,p,extra", MESSAGE_MEMORY_CASES)
def test_message_memory_within_25_percent_of_measured_peak(algo, p, extra):
    """Message-passing models on a mesh with 3 edge features, where the per-edge arrays are most of a rank's
    working set: every rank within 25 % of the model. Kept per-edge values add up over the layers and a layer's
    temporaries do not (`gridgnn.cost.halo_cost.halo_memory_bytes`): with 3 arrays per layer and no temporaries
    term, GINE measured 0.69 of the model at 3 layers and 0.60 at 4 (mesh:nodes=60000); now 0.92-1.03, and
    MeshGraphNet 0.96, GAT --edge-dim 0.96 on 1D and 1.15 on 2D (its score all-reduce's buffers)."""
    kwargs = {"dataset": "mesh:nodes=40000", "epochs": 2, "algo": algo, "nprocs": p, "hidden": 64, "layers": 3,
              **extra}
    config = TrainConfig(**kwargs)
    graph = load_graph(config)
    prediction = predict_epoch(model_spec(config, graph), graph, grid_shape_for(config, p))
    assert (prediction.memory["messages"] > prediction.memory_bytes / 2).all()  # the term under test dominates
    measured = run_workers(pw.memory_worker, p, kwargs, graph, timeout_s=600)
    ratios = [out["peak"] / int(prediction.memory_bytes[rank]) for rank, out in enumerate(measured)]
    assert all(abs(r - 1) <= 0.25 for r in ratios), ratios
