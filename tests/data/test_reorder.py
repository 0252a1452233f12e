"""Vertex reordering (`gridgnn.data.reorder`): permutations, METIS parts laid out contiguously, original ids
everywhere a user looks, and the bad-input contract of prepared folders."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp

from gridgnn.config import REORDERS
from gridgnn.data.generators import csbm
from gridgnn.data.prepared import open_prepared, prepare_graph
from gridgnn.data.reorder import nnz_imbalance, reorder_graph, vertex_order
from gridgnn.nn.trace import model_spec


def _graph():
    return csbm(nodes=240, classes=4, features=6, seed=3)


@pytest.mark.parametrize("method", REORDERS)
def test_every_order_is_a_permutation_and_the_graph_follows_it(method):
    graph = _graph()
    out = reorder_graph(graph, method, parts=4, seed=1)
    order = out.meta.get("reorder_order", np.arange(graph.num_nodes))
    assert sorted(order.tolist()) == list(range(graph.num_nodes))
    assert (out.adj != sp.csr_matrix(graph.adj)[order][:, order]).nnz == 0
    np.testing.assert_array_equal(out.labels, graph.labels[order])
    np.testing.assert_array_equal(out.train_mask, graph.train_mask[order])
    assert out.meta["reorder"] == method and out.meta["nnz_imbalance_after"] >= 1.0
    if method != "none":
        np.testing.assert_array_equal(out.meta["vertex_ids"], order)  # original ids of the new rows


def test_metis_parts_are_contiguous_and_cut_less_than_natural_order():
    graph = csbm(nodes=400, classes=4, features=4, seed=0)
    order, bounds = vertex_order(graph.adj, "metis", 4)
    reordered = sp.csr_matrix(graph.adj)[order][:, order].tocsr()
    # each part is one run of rows: METIS again on the reordered graph finds runs (few part changes)
    changes = np.count_nonzero(np.diff(vertex_order(reordered, "metis", 4)[0]) != 1)
    assert changes < 40
    assert len(bounds) == 5 and bounds[0] == 0 and bounds[-1] == 400 and all(np.diff(bounds) > 0)

    def cut(adj, blocks):
        rows = np.repeat(np.arange(adj.shape[0]), np.diff(adj.indptr))
        return int((np.searchsorted(blocks, rows, "right") != np.searchsorted(blocks, adj.indices, "right")).sum())

    natural = sp.csr_matrix(graph.adj)
    assert cut(reordered, bounds) < cut(natural, [0, 100, 200, 300, 400])
    # the parts' boundaries, not balanced ones, are the cut the grid sees: METIS minimized that one
    assert cut(reordered, bounds) <= cut(reordered, [0, 100, 200, 300, 400])
    assert nnz_imbalance(reordered, 4, bounds) < 1.5


def test_prepared_folder_keeps_the_order_and_refuses_another(tmp_path, capsys):
    from gridgnn.cli.main import main

    graph = reorder_graph(_graph(), "rcm", parts=2)
    prepare_graph(graph, tmp_path / "g")
    prepared = open_prepared(tmp_path / "g")
    assert prepared.meta["reorder"] == "rcm"
    np.testing.assert_array_equal(prepared.meta["reorder_order"], graph.meta["reorder_order"])
    code = main(["train", "--dataset", str(tmp_path / "g"), "--algo", "1d", "--nprocs", "2", "--epochs", "1",
                 "--reorder", "metis"])
    assert code == 2  # refused by the launcher before any worker starts
    assert capsys.readouterr().err.strip().splitlines() == [
        f"gridgnn: error: prepared graph '{tmp_path / 'g'}' was made with --reorder rcm, but --reorder metis "
        "was asked: train with --reorder rcm, or prepare it again with --reorder metis"]


@pytest.mark.slow  # predict on a grid: test_use_trained in the default tier
def test_predict_on_a_grid_keeps_a_prepared_folders_order(tmp_path):
    """``gridgnn predict`` on a METIS-prepared folder: its order and parts as they are, outputs in original ids,
    equal to the one-process inference on the original graph."""
    import csv

    import torch

    from gridgnn.api import fit
    from gridgnn.cli.main import main
    from gridgnn.data.readers.native import save_graph

    graph = _graph()
    save_graph(graph, tmp_path / "g.npz")
    fit(graph, epochs=2, save_model=str(tmp_path / "m.pt"))
    prepare_graph(reorder_graph(graph, "metis", parts=2), tmp_path / "metis")
    for dataset, algo, out in ((tmp_path / "g.npz", ["--algo", "local"], "local.csv"),
                               (tmp_path / "metis", ["--algo", "1d", "--nprocs", "2", "--threads", "1"], "grid.csv")):
        assert main(["predict", "--model", str(tmp_path / "m.pt"), "--dataset", str(dataset), *algo,
                     "--predictions-out", str(tmp_path / out), "--quiet"]) == 0
    local, grid = ([row for row in csv.DictReader(open(tmp_path / name))] for name in ("local.csv", "grid.csv"))
    by_node = {row["node"]: row for row in grid}
    assert len(by_node) == graph.num_nodes
    for row in local:
        assert by_node[row["node"]]["predicted"] == row["predicted"]
        torch.testing.assert_close(float(by_node[row["node"]]["prob_0"]), float(row["prob_0"]), atol=1e-6, rtol=0)


def test_a_damaged_partition_file_is_one_line(tmp_path, capsys):
    from gridgnn.cli.main import main

    prepare_graph(reorder_graph(_graph(), "metis", parts=4), tmp_path / "g")
    np.save(tmp_path / "g" / "reorder_bounds.npy", np.array([0, 90, 60, 240], dtype=np.int64))  # not increasing
    code = main(["train", "--dataset", str(tmp_path / "g"), "--algo", "1d", "--nprocs", "2", "--epochs", "1",
                 "--reorder", "metis"])
    assert code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"gridgnn: error: {tmp_path / 'g' / 'reorder_bounds.npy'}: not the boundaries of non-empty parts of 240 "
        "vertices (0 first, then increasing to the vertex count); prepare the folder again"]


def test_metis_nnz_balances_the_non_zeros_of_the_row_blocks_metis_leaves_skewed():
    from gridgnn.data.registry import load_dataset

    graph = load_dataset("rmat:scale=10,edge_factor=8,features=4,classes=2")  # skewed degrees
    by_vertices, by_nnz = (reorder_graph(graph, method, parts=4) for method in ("metis", "metis-nnz"))
    assert by_vertices.meta["nnz_imbalance_after"] > 2.0  # equal vertices, unequal work
    assert by_nnz.meta["nnz_imbalance_after"] < 1.1  # the blocks (its parts) hold equal non-zeros
    sizes = np.diff(by_nnz.meta["reorder_bounds"])
    assert sizes.sum() == graph.num_nodes and sizes.max() > 1.05 * sizes.mean()  # and unequal vertices


def test_metis_balanced_balances_vertices_and_non_zeros_together():
    """METIS's multi-constraint mode (two weights per vertex) where each single weight leaves the other
    skewed: both within METIS's tolerance, and the parts still cut far less than the natural order."""
    from gridgnn.data.registry import load_dataset

    graph = load_dataset("rmat:scale=10,edge_factor=8,features=4,classes=2")
    out = reorder_graph(graph, "metis-balanced", parts=4)
    sizes = np.diff(out.meta["reorder_bounds"])
    assert sizes.sum() == graph.num_nodes and sizes.max() <= 1.05 * sizes.mean()
    assert out.meta["nnz_imbalance_after"] <= 1.05 and out.meta["row_imbalance_after"] <= 1.05
    by_nnz = reorder_graph(graph, "metis-nnz", parts=4)
    assert np.diff(by_nnz.meta["reorder_bounds"]).max() > 1.1 * sizes.mean()  # one weight alone: rows skewed
    assert by_nnz.meta["row_imbalance_after"] > 1.1

    def cut(adj, bounds):
        rows = np.repeat(np.arange(adj.shape[0]), np.diff(adj.indptr))
        return int((np.searchsorted(bounds, rows, "right") != np.searchsorted(bounds, adj.indices, "right")).sum())

    natural = cut(sp.csr_matrix(graph.adj), [0, 256, 512, 768, 1024])
    assert cut(out.adj, out.meta["reorder_bounds"]) < 0.8 * natural
    # the metrics' cut fractions are the same counts over the stored entries
    assert out.meta["cut_fraction_before"] == pytest.approx(natural / graph.adj.nnz)
    assert out.meta["cut_fraction_after"] == pytest.approx(cut(out.adj, out.meta["reorder_bounds"]) / graph.adj.nnz)


def test_metis_balanced_is_deterministic_and_handles_tiny_graphs():
    graph = _graph()
    first, second = (vertex_order(graph.adj, "metis-balanced", 4) for _ in range(2))
    np.testing.assert_array_equal(first[0], second[0])
    assert first[1] == second[1]
    order, bounds = vertex_order(sp.csr_matrix((3, 3)), "metis-balanced", 4)  # fewer vertices than parts
    assert order.tolist() == [0, 1, 2] and bounds is None


def test_prepared_folder_keeps_metis_parts_and_the_model_follows_them(tmp_path, capsys):
    import json

    from gridgnn.cli.main import main
    from gridgnn.cost.graph_stats import GraphStats
    from gridgnn.cost.rank_cost import shape_blocks
    from gridgnn.grid.shape import resolve_grid

    graph = reorder_graph(csbm(nodes=400, classes=4, features=4, seed=0), "metis", parts=4)
    bounds = graph.meta["reorder_bounds"]
    prepare_graph(graph, tmp_path / "g")
    prepared = open_prepared(tmp_path / "g")
    assert prepared.meta["reorder_bounds"] == bounds
    stats = GraphStats.from_graph(prepared, normalized_adj=prepared.norm_adj)
    assert stats.parts == tuple(bounds)
    assert shape_blocks(resolve_grid("1d", 4), stats).row_bounds == bounds  # as many blocks as parts: followed
    assert shape_blocks(resolve_grid("1d", 2), stats).row_bounds == bounds[::2]  # half as many: parts merged
    assert shape_blocks(resolve_grid("1d", 3), stats).row_bounds == [0, 134, 267, 400]  # any other: balanced
    assert reorder_graph(graph, "rcm", parts=4).meta.get("reorder_bounds") is None  # a new order drops them
    assert main(["info", str(tmp_path / "g"), "--json"]) == 0
    sizes = np.diff(bounds)
    assert json.loads(capsys.readouterr().out)["reorder"] == {
        "method": "metis", "parts": 4, "part_rows_max_over_mean": round(sizes.max() / sizes.mean(), 4)}


def test_plan_prices_each_grid_on_the_order_training_gives_it(capsys):
    """``plan --reorder metis`` prices every shape on the graph METIS-cut into that shape's row blocks, as
    training reorders it (so plan = measured, which the training tests check per rank); ``--json`` stays JSON."""
    import json

    from gridgnn.cli.main import main
    from gridgnn.config import TrainConfig
    from gridgnn.cost.epoch_model import predict_epoch
    from gridgnn.grid.shape import resolve_grid
    from gridgnn.train.run.training import load_graph

    dataset = "csbm:nodes=600,classes=4,features=8"
    assert main(["plan", "--dataset", dataset, "--nprocs", "16", "--reorder", "metis", "--comm", "auto",
                 "--json"]) == 0
    out = capsys.readouterr()
    entries = json.loads(out.out)
    assert "metis into 8 parts" in out.err and "metis into 16 parts" in out.err
    graph = load_graph(TrainConfig(dataset=dataset))
    orders = {(16, 1): reorder_graph(graph, "metis", 16)}  # (row blocks, depth): 3D cuts each block again
    differs = 0
    for entry in entries:
        shape = resolve_grid(entry["algo"], 16, replication=entry["replication"], grid=entry["grid"])
        config = TrainConfig(dataset=dataset)
        key = (shape.sizes[0], shape.depth)
        if key not in orders:
            orders[key] = reorder_graph(graph, "metis", key[0], nest=key[1])
        config = dataclasses.replace(config, full_feature_rows=entry["full_feature_rows"],
                                     defer_weight_gather=entry["defer_weight_gather"])  # the variant priced
        predicted = predict_epoch(model_spec(config, orders[key]), orders[key], shape, comm=entry["comm"],
                                  cache_panels=entry["cache_panels"])  # what trains
        assert entry["bytes_per_rank"] == int(predicted.bytes.max()), entry
        one_order = predict_epoch(model_spec(config, orders[16, 1]), orders[16, 1], shape, comm=entry["comm"],
                                  cache_panels=entry["cache_panels"])  # METIS into P for every grid
        differs += entry["bytes_per_rank"] != int(one_order.bytes.max())
    assert differs > 0


def test_prepare_metis_needs_parts_and_an_unknown_order_is_refused(tmp_path, capsys):
    from gridgnn.cli.main import main

    assert main(["prepare", "csbm:nodes=200", "--out", str(tmp_path / "p"), "--reorder", "metis"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "gridgnn: error: --reorder metis needs --parts K: the grid's row blocks (P for 1d, P/c for 1.5d, PR for 2d, "
        "Q for 3d)"]
    assert main(["plan", "--dataset", "csbm", "--reorder", "hilbert"]) == 2
    assert "argument --reorder: invalid choice" in capsys.readouterr().err
    assert not (tmp_path / "p").exists()


@pytest.mark.slow  # starts two worker processes (~10 s)
def test_fit_on_workers_with_a_reordering_trains_the_local_run():
    from gridgnn.api import fit

    graph = csbm(nodes=300, classes=4, features=8, seed=2)
    reordered = fit(graph, nprocs=2, algo="1d", reorder="rcm", comm="sparse", epochs=2, threads=1)
    local = fit(graph, epochs=2)
    np.testing.assert_allclose([e.loss for e in reordered.history], [e.loss for e in local.history], rtol=1e-4)
    assert [e.val_acc for e in reordered.history] == [e.val_acc for e in local.history]
    reorder = reordered.metrics["setup"]["reorder"]
    assert reorder["method"] == "rcm" and reorder["row_imbalance_after"] == pytest.approx(1.0, abs=0.01)
    assert 0 <= reorder["cut_fraction_after"] < reorder["cut_fraction_before"] <= 1  # RCM's band cuts less


def test_fit_on_workers_resolves_the_run_once_in_the_launcher(monkeypatch):
    """``fit(nprocs > 1)`` hands its in-memory graph to the launcher, which settles the grid once, cuts METIS
    into its row blocks and prepares the workers' folder (the API resolves nothing of its own); a bad grid is
    the launcher's one-line `ConfigError`, before any worker starts."""
    import gridgnn.launch.local as local
    from gridgnn.api import fit
    from gridgnn.errors import ConfigError
    from gridgnn.run_spec import read_spec
    from gridgnn.train.run import resolve

    calls, seen = [], {}
    real = resolve.grid_shape_for
    monkeypatch.setattr(resolve, "grid_shape_for", lambda config, world: calls.append(world) or real(config, world))

    def no_workers(spec_path, *args, **kwargs):  # what the workers would get, read before the folder goes
        spec = read_spec(spec_path)
        seen.update(shape=spec.shape, meta=open_prepared(spec.prepared_graph).meta)
        return 1

    monkeypatch.setattr(local, "launch_local", no_workers)
    graph = csbm(nodes=200, classes=3, features=8, seed=4)
    with pytest.raises(RuntimeError, match="failed with status 1"):
        fit(graph, nprocs=2, algo="1d", reorder="metis", epochs=1)
    assert calls == [2]  # once, in the launcher
    assert seen["shape"].sizes == (2,)
    assert seen["meta"]["reorder"] == "metis" and len(seen["meta"]["reorder_bounds"]) == 3  # METIS into 2 blocks
    with pytest.raises(ConfigError, match="2x2"):
        fit(graph, nprocs=2, algo="2d", grid="2x2", epochs=1)
    with pytest.raises(ConfigError, match="--threads"):  # checked as `gridgnn train` checks its flag
        fit(graph, nprocs=2, algo="1d", epochs=1, threads=10**6)


@pytest.mark.slow  # GAT on every grid: tests/nn/test_models_distributed.py; reordering: the tests above
def test_gat_attention_dropout_on_a_reordered_grid_trains_the_local_run():
    """Attention dropout names each edge by its original (row, column), so METIS order on 1D keeps the run."""
    from gridgnn.api import fit

    graph = csbm(nodes=200, classes=3, features=8, seed=4)
    kw = dict(model="gat", heads=2, attn_dropout=0.5, hidden=4, epochs=2)
    reordered = fit(graph, nprocs=2, algo="1d", reorder="metis", threads=1, **kw)
    local = fit(graph, **kw)
    np.testing.assert_allclose([e.loss for e in reordered.history], [e.loss for e in local.history], rtol=1e-4)
    assert [e.val_acc for e in reordered.history] == [e.val_acc for e in local.history]


def test_a_pymetis_without_metis_c_api_is_one_line_for_metis_balanced(monkeypatch, tmp_path, capsys):
    """``metis-balanced`` calls METIS's C entry point inside pymetis's extension; a build that does not export
    it stops the launcher with one line naming the fix (exit 2), before any worker starts."""
    import types

    from gridgnn.cli.main import main
    from gridgnn.data import metis
    from gridgnn.data.readers.native import save_graph

    monkeypatch.setattr(metis, "_open_library", lambda path: types.SimpleNamespace())  # no METIS_PartGraphKway
    save_graph(_graph(), tmp_path / "g.npz")
    code = main(["train", "--dataset", str(tmp_path / "g.npz"), "--algo", "1d", "--nprocs", "2", "--epochs", "1",
                 "--reorder", "metis-balanced"])
    assert code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gridgnn: error: --reorder metis-balanced needs METIS's C API")
    assert "pip install -U pymetis" in lines[0]


def test_metis_idx_width_is_asked_of_the_library():
    """``idx_t``'s width comes from METIS_SetDefaultOptions writing -1 into its 40 options: all 40 int64 slots
    on a 64-bit build, only the first 160 bytes on a 32-bit one; anything else is refused."""
    import ctypes
    import types

    from gridgnn.data import metis
    from gridgnn.errors import ConfigError

    def library(written_bytes: int):
        return types.SimpleNamespace(METIS_SetDefaultOptions=lambda ptr: ctypes.memset(ptr, 0xFF, written_bytes))

    assert metis._idx_type(library(40 * 8)) is np.int64
    assert metis._idx_type(library(40 * 4)) is np.int32
    with pytest.raises(ConfigError, match="SetDefaultOptions"):
        metis._idx_type(library(8))


def test_nested_metis_cuts_each_part_again_for_3d_depth():
    """``nest``: the same top-level parts, each laid out as METIS's sub-parts; on a 3D grid whose depth slices
    hold those sub-blocks, sparse 3D's depth exchange moves fewer rows than on the flat order."""
    from gridgnn.config import TrainConfig
    from gridgnn.cost.epoch_model import predict_epoch
    from gridgnn.cost.graph_stats import GraphStats
    from gridgnn.grid.shape import resolve_grid

    graph = csbm(nodes=800, classes=4, features=8, seed=3)
    flat, nested = (reorder_graph(graph, "metis-balanced", 2, nest=nest) for nest in (1, 4))
    bounds = flat.meta["reorder_bounds"]
    assert nested.meta["reorder_bounds"] == bounds and nested.meta["reorder_nest"] == 4
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):  # the same vertices in each part, reordered inside
        assert sorted(flat.meta["reorder_order"][a:b]) == sorted(nested.meta["reorder_order"][a:b])
    assert (flat.meta["reorder_order"] != nested.meta["reorder_order"]).any()
    shape = resolve_grid("3d", 16, grid="2x2x4")
    depth = [sum(t.bytes for t in predict_epoch(model_spec(TrainConfig(), g), GraphStats.from_graph(g), shape,
                                                comm="sparse").terms
                 if t.axis == "depth").sum() for g in (flat, nested)]
    assert depth[1] < depth[0]
