"""The planner and ``--algo auto`` / ``--comm auto`` with the sparse variants (pure: no process group)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from gridgnn.cli.main import main
from gridgnn.config import TrainConfig, model_comms
from gridgnn.cost.epoch_model import predict_epoch
from gridgnn.cost.graph_stats import GraphStats
from gridgnn.data.generators import csbm
from gridgnn.data.reorder import reorder_graph
from gridgnn.errors import ConfigError
from gridgnn.grid.shape import resolve_grid
from gridgnn.nn.trace import model_spec
from gridgnn.plan.planner import plan
from gridgnn.train.run.auto import choose_comm, choose_configuration

DATA_ROOT = "../shared/datasets"


def test_plan_prices_dense_and_sparse_for_every_shape_and_sparse_never_moves_more():
    graph = reorder_graph(csbm(nodes=400, classes=4, features=8, seed=1), "metis", 8)
    ranked = plan(TrainConfig(), GraphStats.from_graph(graph), 8, comms=("dense", "sparse"))
    by_shape: dict = {}
    for entry in ranked.entries:
        by_shape.setdefault((entry.algo, entry.grid), {})[entry.comm] = entry.prediction
    assert all(set(v) == {"dense", "sparse"} for v in by_shape.values())
    for variants in by_shape.values():  # a receiver gets a subset of the rows of the dense broadcast (the
        # backward root receives what dense reduces count at the senders: compare totals and the busiest rank)
        assert variants["sparse"].bytes.sum() <= variants["dense"].bytes.sum()
        assert variants["sparse"].bytes.max() <= variants["dense"].bytes.max()
    assert any((v["sparse"].bytes < v["dense"].bytes).any() for v in by_shape.values())
    assert ranked.best.to_dict()["comm"] in ("dense", "sparse")


def test_auto_chooses_comm_with_a_reason_and_uniform_statistics_scale():
    graph = reorder_graph(csbm(nodes=400, classes=4, features=8, seed=1), "metis", 4)
    config = TrainConfig(algo="1d", comm="auto", nprocs=4)
    chosen, reason = choose_comm(config, graph, resolve_grid("1d", 4))
    assert chosen.comm == "cover" and reason.startswith("--comm auto chose cover: busiest rank receives")
    assert " dense, " in reason and " sparse on 1d 4" in reason  # the others' bytes, named
    sparse_only, reason = choose_comm(dataclasses.replace(config, algo="2d"), graph, resolve_grid("2d", 4))
    assert sparse_only.comm == "sparse" and "cover" not in reason  # no cover on 2D
    auto, why = choose_configuration(TrainConfig(algo="auto", comm="auto", nprocs=4), graph, 4)
    assert auto.comm in ("dense", "sparse", "cover") and "communication" in why
    stats = GraphStats.from_counts(10_000, 200_000, 16, 4)
    gcn, shape = model_spec(TrainConfig(), stats), resolve_grid("1.5d", 64, replication=4)
    pred = predict_epoch(gcn, stats, shape, comm="sparse")
    dense = predict_epoch(gcn, stats, shape, comm="dense")
    assert pred.bytes.sum() <= dense.bytes.sum() and pred.bytes.max() > 0


def test_plan_command_lists_both_and_prices_a_reordering(capsys):
    code = main(["plan", "--dataset", "cora", "--data-root", DATA_ROOT, "--nprocs", "4", "--algo", "1d",
                 "--reorder", "rcm", "--json"])
    captured = capsys.readouterr()
    assert code == 0
    entries = json.loads(captured.out)  # the whole of stdout is JSON: the reordering's line goes to stderr
    # each comm plain and with --defer-weight-gather (Cora's sparse features: feature weights moved by rows)
    assert sorted((e["comm"], e["defer_weight_gather"]) for e in entries) == [
        (comm, defer) for comm in ("cover", "dense", "sparse") for defer in (False, True)]
    assert captured.err.startswith("reorder    rcm into 4 parts")
    by_comm = {e["comm"]: e for e in entries if not e["defer_weight_gather"]}  # the set-up: sparse's index
    # exchange, priced apart from a step
    assert by_comm["dense"]["setup_bytes_per_rank"] == 0 and by_comm["dense"]["predicted_setup_s"] == 0
    assert 0 < by_comm["sparse"]["setup_bytes_per_rank"] < by_comm["sparse"]["bytes_per_rank"]
    assert 0 < by_comm["sparse"]["predicted_setup_s"] < by_comm["sparse"]["predicted_epoch_s"]
    # each receiver tells its senders their covers once: ids and values, less than one step moves
    assert 0 < by_comm["cover"]["setup_bytes_per_rank"] < by_comm["cover"]["bytes_per_rank"]
    assert 0 < by_comm["cover"]["predicted_setup_s"]
    assert by_comm["cover"]["bytes_per_rank"] <= by_comm["sparse"]["bytes_per_rank"]
    code = main(["plan", "--num-nodes", "100", "--num-edges", "400", "--num-features", "3", "--num-classes", "2",
                 "--reorder", "metis"])
    assert code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "gridgnn: error: --reorder prices a renumbered graph: it needs --dataset, not counts"]


def test_gat_has_only_dense_communication_and_says_so(capsys):
    graph = reorder_graph(csbm(nodes=400, classes=4, features=8, seed=1), "metis", 4)
    assert model_comms("gat", "auto") == ("dense",) and model_comms("gcn", "auto") == ("dense", "sparse", "cover")
    chosen, reason = choose_comm(TrainConfig(algo="1d", comm="auto", nprocs=4, model="gat"), graph,
                                 resolve_grid("1d", 4))
    assert chosen.comm == "dense" and reason == "--comm auto chose dense: --model gat has no sparse variant"
    auto, _ = choose_configuration(TrainConfig(algo="auto", comm="auto", nprocs=4, model="gat"), graph, 4)
    assert auto.comm == "dense"
    with pytest.raises(ConfigError, match="--comm sparse is not implemented for --model gat"):
        TrainConfig(model="gat", comm="sparse").validate()
    for command in (["train", "--dataset", "cora", "--model", "gat", "--comm", "sparse"],
                    ["plan", "--dataset", "cora", "--model", "gat", "--comm", "sparse"]):
        assert main([*command, "--data-root", DATA_ROOT, "--nprocs", "4"]) == 2
        assert capsys.readouterr().err.strip().splitlines() == [
            "gridgnn: error: --comm sparse is not implemented for --model gat (its attention stages move whole "
            "blocks); use --comm dense or auto"]
    assert main(["plan", "--dataset", "cora", "--data-root", DATA_ROOT, "--model", "gat", "--nprocs", "4",
                 "--algo", "1d", "--json"]) == 0
    out = capsys.readouterr().out
    entries = json.loads(out[out.index("["):])
    assert {e["comm"] for e in entries} == {"dense"}  # one entry per order, plain and with the feature weights
    assert sorted((e["reorder"], e["defer_weight_gather"]) for e in entries) == [  # moved by rows
        (order, defer) for order in sorted({e["reorder"] for e in entries}) for defer in (False, True)]
