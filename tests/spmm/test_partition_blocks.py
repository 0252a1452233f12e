"""Row blocks that follow a vertex partition (a METIS reordering's parts, `gridgnn.cost.stages`): every
algorithm, dense and sparse, equals the single-process product on uneven blocks and moves exactly what the
plan of collectives and the cost model predict for those blocks, rank by rank."""

from __future__ import annotations

import numpy as np
import pytest
import spmm_workers as w
from cost_oracles import block_nnz
from test_spmm_distributed import _check_blocks

from gridgnn.cost.graph_stats import GraphStats
from gridgnn.cost.rank_cost import shape_blocks
from gridgnn.cost.sparse_cost import comm_spmm_terms
from gridgnn.cost.spmm_plan import spmm_steps
from gridgnn.cost.stages import row_blocks, stage_layout
from gridgnn.errors import ConfigError
from gridgnn.grid.shape import resolve_grid
from gridgnn.launch.spawn import run_workers
from gridgnn.nn.trace import model_spec

N, SEED, WORLD = 61, 7, 4
TWO, FOUR = [0, 20, 61], [0, 9, 30, 38, 61]  # far from balanced ([0, 31, 61] and [0, 16, 31, 46, 61])
CASES = [(algo, c, grid, parts, mode) for mode in ("dense", "sparse") for algo, c, grid, parts in (
    ("1d", None, None, FOUR), ("1.5d", 2, None, TWO), ("2d", None, "2x2", TWO), ("2d", None, "4x1", FOUR),
    ("3d", None, "2x2x1", TWO))]
HALVES = (("spmm_forward", False), ("spmm_backward", True))


def test_stage_layout_follows_a_partition_with_as_many_blocks():
    two_by_three = stage_layout("2d", (2, 3), 12, parts=[0, 5, 12])  # rows follow; 3 column blocks stay balanced
    assert two_by_three.row_bounds == [0, 5, 12] and two_by_three.segments == [0, 4, 5, 8, 12]
    assert two_by_three.root.tolist() == [0, 0, 1, 1] and two_by_three.panel_root.tolist() == [0, 1, 1, 2]
    square = stage_layout("2d", (2, 2), 12, parts=[0, 5, 12])  # a square grid cuts Â's columns the same way
    assert square.segments == [0, 5, 12] and square.panel_root.tolist() == [0, 1]
    three = stage_layout("3d", (2, 2, 2), 12, parts=[0, 5, 12])  # uneven blocks, each in 2 balanced sub-blocks
    assert three.row_bounds == [0, 5, 12] and three.segments == [0, 3, 5, 9, 12]
    assert stage_layout("1.5d", (2, 2), 12, parts=[0, 5, 12]).row_bounds == [0, 5, 12]
    assert stage_layout("1d", (3,), 12, parts=[0, 5, 12]).row_bounds == [0, 4, 8, 12]  # 2 parts, 3 blocks
    assert stage_layout("1d", (2,), 12, parts=[0, 2, 5, 9, 12]).row_bounds == [0, 5, 12]  # 4 parts, 2 by 2
    assert stage_layout("2d", (2, 2), 12, parts=[0, 2, 5, 9, 12]).segments == [0, 5, 12]
    assert row_blocks(12, 2, None) == [0, 6, 12] and row_blocks(12, 1, [0, 5, 12]) == [0, 12]


@pytest.mark.parametrize("parts", [[0, 12, 12], [1, 5, 12], [0, 5, 11]])
def test_a_partition_that_does_not_cut_the_vertices_is_refused(parts):
    with pytest.raises(ConfigError, match="does not cut 12 vertices into 2 non-empty blocks"):
        stage_layout("1d", (2,), 12, parts=parts)


@pytest.mark.parametrize("rows,segments", [([0, 9, 30, 38, 61], [0, 9, 30, 38, 61]),
                                           ([0, 20, 61], [0, 7, 20, 33, 61]), ([0, 61], [0, 61]),
                                           ([0, 0, 30, 61], [0, 30, 30, 61])])
def test_touched_counts_are_the_distinct_columns_of_each_block_and_segment(rows, segments):
    """The vectorized count (column-major runs) against sets of column ids, on a directed matrix with empty
    rows and, in the last case, an empty block and an empty segment."""
    from gridgnn.cost.sparse_stages import column_major, touched_counts

    adj = w.random_directed(N, seed=SEED).tolil()
    adj[5, :] = 0  # an empty row
    adj = adj.tocsr()
    counts = touched_counts(column_major(adj.indptr, adj.indices, N), rows, segments)
    for b in range(len(rows) - 1):
        cols = set(adj[rows[b]:rows[b + 1]].indices.tolist())
        for s in range(len(segments) - 1):
            assert counts[b, s] == len([c for c in cols if segments[s] <= c < segments[s + 1]]), (b, s)


def test_column_major_refuses_a_column_outside_the_matrix():
    from gridgnn.cost.sparse_stages import column_major
    from gridgnn.errors import DataError

    with pytest.raises(DataError, match=r"column ids outside \[0, 4\)"):
        column_major(np.array([0, 1, 2]), np.array([1, 4]), 4)


@pytest.fixture(scope="module")
def results():
    return run_workers(w.run_partition_cases, WORLD, CASES, N, SEED, timeout_s=300)


def _measured(records: list[tuple], phase: str) -> list[tuple]:
    grouped: dict[tuple, list[int]] = {}
    for op, axis, nbytes, where in records:
        if where == phase:
            grouped.setdefault((op, axis), []).append(nbytes)
    return sorted((op, axis, len(b), sum(b)) for (op, axis), b in grouped.items())


def _modelled(shape, adj, parts, width: int, backward: bool, mode: str) -> list[list[tuple]]:
    stats = GraphStats("test", N, adj.nnz, 1, 1, None, adj.indptr, adj.indices, tuple(parts))
    terms = comm_spmm_terms(shape_blocks(shape, stats), width, backward=backward, comm=mode)
    return [sorted((t.op, t.axis, int(t.calls[r]), int(t.bytes[r])) for t in terms if t.calls[r])
            for r in range(shape.world_size)]


def test_uneven_blocks_equal_single_process_and_the_model(results):
    adj = w.random_directed(N, seed=SEED)
    dense = adj.toarray().astype(np.float64)
    for index, (algo, c, grid_text, parts, mode) in enumerate(CASES):
        shape = resolve_grid(algo, WORLD, replication=c, grid=grid_text)
        layout = stage_layout(algo, shape.sizes, N, parts)
        assert layout.row_bounds == parts
        panel_nnz = block_nnz(adj, layout.row_bounds, layout.segments) if algo in ("2d", "3d") else None
        for width_index, width in enumerate(w.WIDTHS):
            per_rank = [results[r][index][width_index] for r in range(WORLD)]
            x, g = (t.double().numpy() for t in w.dense_inputs(N, width, SEED))
            _check_blocks(per_rank, "y", dense @ x)
            _check_blocks(per_rank, "grad", dense.T @ g)
            assert sum(res["stored_nnz"] for res in per_rank) == adj.nnz
            for phase, backward in HALVES:
                model = _modelled(shape, adj, parts, width, backward, mode)
                for rank, res in enumerate(per_rank):
                    assert _measured(res["records"], phase) == model[rank], (algo, mode, width, phase, rank)
                    if mode == "dense":  # the plan's steps, one for one
                        planned = sorted((s.op, s.axis, s.bytes, phase) for s in spmm_steps(
                            shape, rank, N, width, panel_nnz, backward=backward, parts=tuple(parts)))
                        assert sorted(r for r in res["records"] if r[3] == phase) == planned
        held = {tuple(results[r][index][0]["rows"]) for r in range(WORLD)}
        assert held == {(a, b) for a, b in zip(parts[:-1], parts[1:], strict=True)}  # each rank holds one part's rows


TRAIN = dict(dataset="csbm:nodes=120,classes=3,features=7", directed=True, epochs=3, dropout=0.5, hidden=8,
             reorder="random", nprocs=WORLD)
TRAIN_CASES = [dict(TRAIN, algo="1d", comm="sparse"), dict(TRAIN, algo="1.5d", replication=2, model="sage"),
               dict(TRAIN, algo="2d", grid="2x2", model="gat", heads=2), dict(TRAIN, algo="3d", grid="2x2x1",
                                                                               model="gin", comm="sparse")]
BOUNDS = {2: [0, 37, 120], 4: [0, 11, 50, 71, 120]}


def test_training_on_uneven_blocks_is_the_local_run_and_the_model():
    """GCN, GraphSAGE, GAT and GIN on row blocks far from balanced (dropout by original ids on a renumbered
    graph): the losses and accuracies of one process, and every rank's bytes and calls as the model says."""
    import sparse_workers as sw

    from gridgnn.config import TrainConfig
    from gridgnn.cost.epoch_model import predict_epoch
    from gridgnn.data.reorder import reorder_graph
    from gridgnn.train.loop.trainer import Trainer
    from gridgnn.train.run.training import build_aggregation, load_graph

    results = run_workers(sw.run_uneven_training, WORLD, TRAIN_CASES, BOUNDS, timeout_s=300)[0]
    for kwargs, out in zip(TRAIN_CASES, results, strict=True):
        local = TrainConfig(**{**kwargs, "algo": "local", "nprocs": 1, "reorder": "none", "comm": "dense",
                               "grid": None, "replication": 1})
        graph = load_graph(local)
        reference = Trainer(local, graph, build_aggregation(local, graph)).fit()
        np.testing.assert_allclose(out["loss"], [r.loss for r in reference.epochs], rtol=1e-4)
        assert out["acc"] == [(r.train_acc, r.val_acc, r.test_acc) for r in reference.epochs]
        assert out["row_blocks"] == "parts"
        run = TrainConfig(**kwargs)
        shape = resolve_grid(run.algo, WORLD, replication=run.replication, grid=run.grid)
        trained_graph = reorder_graph(graph, "random", 1, seed=9)
        trained_graph.meta["reorder_bounds"] = BOUNDS[shape.sizes[0]]
        predicted = predict_epoch(model_spec(run, trained_graph), trained_graph, shape, comm=run.comm)
        for epoch in out["comm"]:
            for phase, values in epoch["by_phase"].items():
                assert values == predicted.bytes_by_phase[phase].tolist(), (kwargs, phase)
                assert epoch["calls_by_phase"][phase] == predicted.calls_by_phase[phase].tolist(), (kwargs, phase)
