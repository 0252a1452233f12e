"""Ranks to hosts: the heaviest axis stays within a host when the grid allows (pure, no process group)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from gridgnn.config import TrainConfig
from gridgnn.cost.epoch_model import _intra_node, comm_seconds, predict_epoch
from gridgnn.cost.graph_stats import GraphStats
from gridgnn.cost.profile import GPU_CLUSTER
from gridgnn.grid.hosts import HostMap, format_ranks
from gridgnn.grid.placement import Placement, axis_bytes, host_axis_order, within_node_by_position
from gridgnn.grid.shape import resolve_grid
from gridgnn.nn.trace import model_spec
from gridgnn.train.run.host_placement import place_ranks, split_by_host

STATS = GraphStats.from_counts(100_000, 2_000_000, 500, 40)
MODEL = TrainConfig(hidden=64)


@pytest.mark.parametrize(("algo", "p", "grid", "per_host"), [
    ("1.5d", 8, "4x2", 4), ("1.5d", 16, "2x8", 8), ("2d", 8, "4x2", 2), ("2d", 16, "4x4", 4),
    ("3d", 8, "2x2x2", 4), ("3d", 32, "2x2x8", 8), ("1d", 8, None, 8)])
def test_the_heaviest_axis_stays_within_a_host_when_it_fits(algo, p, grid, per_host):
    shape = resolve_grid(algo, p, grid=grid)
    weights = axis_bytes(predict_epoch(model_spec(MODEL, STATS), STATS, shape).terms)
    heaviest = max(shape.axes, key=lambda axis: weights.get(axis, 0))
    order = host_axis_order(shape, weights, per_host)
    assert order[-1] == heaviest and sorted(order) == sorted(shape.axes)
    placement = Placement(shape, order)
    host_of_rank = [r // per_host for r in range(p)]
    fits = per_host % shape.size(heaviest) == 0
    assert all(placement.within_host(host_of_rank, heaviest)) is fits
    # every other order puts no more of the heaviest axis's bytes within a host
    best = sum(placement.within_host(host_of_rank, heaviest))
    for other in itertools.permutations(shape.axes):
        assert sum(Placement(shape, other).within_host(host_of_rank, heaviest)) <= best


def test_one_host_keeps_the_grids_own_order():
    shape = resolve_grid("1.5d", 8, replication=2)
    assert host_axis_order(shape, {"row": 10, "rep": 1}, None) == shape.axes
    assert host_axis_order(shape, {"row": 10, "rep": 1}, 8) == shape.axes
    assert host_axis_order(shape, {"row": 10, "rep": 1}, 4) == ("rep", "row")


@pytest.mark.parametrize("order", list(itertools.permutations(("row", "col", "depth"))))
def test_placement_is_a_bijection_and_the_vectorized_mask_agrees(order):
    shape = resolve_grid("3d", 18, grid="3x3x2")
    placement = Placement(shape, order)
    mesh = placement.mesh_ranks()
    assert sorted(mesh.ravel().tolist()) == list(range(18))
    for rank in range(18):
        assert mesh[tuple(placement.coords(rank)[a] for a in shape.axes)] == rank
        assert placement.rank_of(**placement.coords(rank)) == rank
    for per_node, axis in itertools.product((2, 3, 6, 9), shape.axes):
        by_position = within_node_by_position(shape, order, per_node, axis).tolist()
        assert placement.to_rank_order(by_position) == placement.within_host([r // per_node for r in range(18)], axis)


def test_the_planner_prices_links_as_the_run_places_ranks():
    shape = resolve_grid("1.5d", 16, replication=2)  # row (8) is the heavy axis: across nodes in row-major
    terms = predict_epoch(model_spec(MODEL, STATS), STATS, shape).terms
    profile = GPU_CLUSTER  # 8 GPUs per node
    assert not _intra_node(shape, "row", 8).all()  # the grid's own order puts row groups across nodes
    assert _intra_node(shape, "row", 8, ("rep", "row")).all()
    placed = comm_seconds(terms, shape, profile)
    row_major = np.zeros(16)
    for term in terms:
        intra = _intra_node(shape, term.axis, 8)
        row_major += np.where(intra, profile.link(term.op, False).time(term.group_size, term.calls, term.bytes),
                              profile.link(term.op, True).time(term.group_size, term.calls, term.bytes))
    assert placed.max() < row_major.max()


def test_bytes_split_within_and_across_hosts():
    shape = resolve_grid("2d", 4)
    hosts = HostMap(("a (1)", "a (1)", "b (2)", "b (2)"))
    placement = Placement.default(shape)  # col groups {0,1} {2,3} within a host, row groups across
    split = split_by_host({"col": [5, 6, 7, 8], "row": [1, 2, 3, 4]}, placement, hosts)
    assert split["by_axis_within_host"] == {"col": [5, 6, 7, 8], "row": [0, 0, 0, 0]}
    assert split["by_axis_across_hosts"] == {"col": [0, 0, 0, 0], "row": [1, 2, 3, 4]}
    graph = type("G", (), {"num_nodes": 1000, "num_edges": 5000, "num_features": 50, "num_classes": 3})()
    assert place_ranks(MODEL, graph, shape, HostMap(("a",) * 4)) is None  # one host: the default order
    assert place_ranks(MODEL, graph, shape, hosts).order[-1] == "col"


def test_host_map_names_ranks_by_host():
    hosts = HostMap(("a (1)", "a (1)", "b (2)", "b (2)", "b (2)", "c (3)"))
    assert hosts.describe([2, 3, 4, 5]) == "ranks 2-4 on host b (2); rank 5 on host c (3)"
    assert format_ranks([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8" and hosts.host_index(5) == 2
