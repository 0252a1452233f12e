"""``--comm cover`` (1D and 1.5D): each pair of processes exchanges its cut's minimum vertex cover, rows of X and
partial sums. The SpMM equals the single-process product forward and backward on a directed graph, every entry
of Â is stored once, no rank receives more than under ``--comm sparse``, and every rank's bytes and calls equal
the cost model's; GCN, GraphSAGE and GIN train as one process does; what cover cannot serve is one line."""

from __future__ import annotations

import functools

import model_workers as mw
import numpy as np
import pytest
import scipy.sparse as sp
import spmm_workers as w
from test_spmm_distributed import _check_blocks

from gridgnn.cli.main import main
from gridgnn.config import TrainConfig
from gridgnn.cost.epoch_model import PHASES
from gridgnn.cost.graph_stats import GraphStats
from gridgnn.cost.rank_cost import shape_blocks
from gridgnn.cost.sparse_cost import comm_spmm_terms
from gridgnn.cost.spmm_plan import lower, sparse_spmm_plan
from gridgnn.data.prepared import RowBlockCSR
from gridgnn.errors import ConfigError
from gridgnn.grid.shape import resolve_grid
from gridgnn.launch.spawn import run_workers
from gridgnn.spmm.cover_15d import pair_cut, receiver_cuts
from gridgnn.train.loop.trainer import Trainer
from gridgnn.train.run.training import build_aggregation, load_graph

N, SEED, WORLD = 61, 5, 4
SPMM_CASES = [("1d", None, None), ("1.5d", 2, None), ("1.5d", 4, None)]  # 1.5d 1x4: three empty shares
TRAIN = dict(dataset="csbm:nodes=157,classes=5,features=13", directed=True, epochs=3, dropout=0.5, hidden=16)
MODELS = {"gcn": dict(model="gcn"), "sage": dict(model="sage"), "gin": dict(model="gin", gin_train_eps=True)}
TRAIN_CASES = [dict(TRAIN, **MODELS[m], **g, nprocs=WORLD, comm="cover") for m in MODELS
               for g in (dict(algo="1d"), dict(algo="1.5d", replication=2))]


def _spmm_worker(rank: int, world: int) -> list:
    return [(w.run_case(a, c, g, N, SEED, comm_mode="cover", overlap=False),
             w.run_case(a, c, g, N, SEED, comm_mode="cover", overlap=True),
             w.run_case(a, c, g, N, SEED, comm_mode="sparse")) for a, c, g in SPMM_CASES]


@pytest.fixture(scope="module")
def spmm_results():
    return run_workers(_spmm_worker, WORLD, timeout_s=300)


def test_cover_spmm_is_exact_moves_no_more_than_sparse_and_is_priced(spmm_results):
    adj = w.random_directed(N, seed=SEED)
    dense = adj.toarray().astype(np.float64)
    stats = GraphStats("test", N, adj.nnz, 1, 1, None, adj.indptr, adj.indices)
    for index, (algo, c, grid_text) in enumerate(SPMM_CASES):
        shape = resolve_grid(algo, WORLD, replication=c, grid=grid_text)
        for width_index, width in enumerate(w.WIDTHS):
            blocking, overlapped, sparse = ([spmm_results[r][index][k][width_index] for r in range(WORLD)]
                                            for k in range(3))
            x, g = (t.double().numpy() for t in w.dense_inputs(N, width, SEED))
            _check_blocks(blocking, "y", dense @ x)
            _check_blocks(blocking, "grad", dense.T @ g)
            assert sum(res["stored_nnz"] for res in blocking) == adj.nnz  # each entry on one side of its cut
            for plain, fast in zip(blocking, overlapped, strict=True):
                np.testing.assert_array_equal(plain["y"], fast["y"])
                np.testing.assert_array_equal(plain["grad"], fast["grad"])
            for half, backward in (("forward", False), ("backward", True)):
                terms = comm_spmm_terms(shape_blocks(shape, stats), width, backward=backward, comm="cover")
                for rank, res in enumerate(blocking):
                    assert res[f"{half}_bytes"] == sum(int(t.bytes[rank]) for t in terms), (algo, width, half)
                    assert res[f"{half}_calls"] == sum(int(t.calls[rank]) for t in terms), (algo, width, half)
                    assert res[f"{half}_bytes"] <= sparse[rank][f"{half}_bytes"]
                    # without overlap, record by record in issue order: the plan the cover SpMM carries
                    plan = sparse_spmm_plan(shape, rank, stats, width, backward=backward, comm="cover")
                    planned = [(st.op, st.axis, st.bytes) for st in lower(plan, shape, shape.coords(rank))]
                    assert res["sequence"][int(backward)] == planned, (algo, width, half, rank)
                    assert res["own_plan"][int(backward)] == planned, (algo, width, half, rank)  # built from its counts
            if shape.sizes[0] > 1:  # with one block row nothing moves on ``row``: the two are the same
                assert sum(r["forward_bytes"] for r in blocking) < sum(r["forward_bytes"] for r in sparse)


@functools.cache
def _local(model: str) -> list[tuple]:
    config = TrainConfig(**TRAIN, **MODELS[model])
    graph = load_graph(config)
    result = Trainer(config, graph, build_aggregation(config, graph)).fit()
    return [(r.loss, (r.train_acc, r.val_acc, r.test_acc)) for r in result.epochs]


def test_cover_training_equals_one_process_and_the_cost_model():
    for model in MODELS:
        _local(model)
    per_rank = run_workers(mw.models_worker, WORLD, TRAIN_CASES, timeout_s=600)
    for index, case in enumerate(TRAIN_CASES):
        where = f"{case['model']} {case['algo']}"
        out, reference = per_rank[0][index], _local(case["model"])
        np.testing.assert_allclose(out["loss"], [loss for loss, _ in reference], rtol=1e-4, atol=1e-6, err_msg=where)
        assert out["acc"] == [acc for _, acc in reference], where
        for other in per_rank[1:]:
            for mine, theirs in zip(out["weights"], other[index]["weights"], strict=True):
                np.testing.assert_array_equal(mine, theirs, err_msg=where)
        for epoch in out["comm"]:
            for phase in PHASES:
                assert epoch["by_phase"][phase] == out["predicted"]["bytes"][phase].tolist(), (where, phase)
                assert epoch["calls_by_phase"][phase] == out["predicted"]["calls"][phase].tolist(), (where, phase)
        for key in ("index_exchange_bytes", "index_exchange_calls"):  # each receiver telling its senders
            assert [rank[key] for rank in out["setup"]] == out["predicted_setup"][key], (where, key)
        assert all(rank["index_exchange_bytes"] > 0 for rank in out["setup"]), where


def test_what_cover_cannot_serve_is_one_line(capsys):
    with pytest.raises(ConfigError, match="--comm cover runs on --algo 1d and 1.5d, not 2d"):
        TrainConfig(algo="2d", nprocs=4, comm="cover")
    with pytest.raises(ConfigError, match="--comm cover is not implemented for --model gat"):
        TrainConfig(model="gat", comm="cover")
    assert main(["train", "--dataset", "csbm:nodes=60", "--nprocs", "4", "--algo", "3d", "--comm", "cover"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and "--comm cover runs on --algo 1d and 1.5d" in err
    assert main(["plan", "--dataset", "csbm:nodes=60", "--nprocs", "4", "--algo", "2d", "3d", "--comm", "cover"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.strip() == ("gridgnn: error: --comm cover runs on --algo 1d and 1.5d, not 2d 3d; use "
                                         "--comm sparse, dense or auto")


def test_a_receiver_cuts_the_same_pairs_from_scipy_and_memory_mapped_matrices():
    """A receiver's cuts (its row block, by column blocks) are the same canonical matrices (duplicates summed,
    sorted column ids) whether Â is a scipy matrix or a memory-mapped `RowBlockCSR`, and equal the dense
    slices and `pair_cut`'s."""
    rng = np.random.default_rng(3)
    n, bounds = 40, [0, 9, 22, 30, 40]
    rows, cols = rng.integers(0, n, 300), rng.integers(0, n, 300)  # duplicates included, unsorted per row
    coo = sp.coo_matrix((rng.standard_normal(300).astype(np.float32), (rows, cols)), shape=(n, n))
    order = np.argsort(rows, kind="stable")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))])
    scipy_adj = sp.csr_matrix((coo.data[order], cols[order], indptr), shape=(n, n))
    mapped = RowBlockCSR(scipy_adj.indptr, scipy_adj.indices, scipy_adj.data, (n, n))
    dense = coo.toarray()
    for block in range(4):
        for adj in (scipy_adj, mapped):
            received = receiver_cuts(adj, bounds, block, range(4))
            for other in range(4):
                cut = received[other]
                assert cut.has_sorted_indices and cut.nnz == cut.copy().tocoo().tocsr().nnz
                expected = dense[bounds[block]:bounds[block + 1], bounds[other]:bounds[other + 1]]
                np.testing.assert_allclose(cut.toarray(), expected, rtol=1e-6)
                np.testing.assert_array_equal(cut.indices, pair_cut(adj, bounds, block, other).indices)
