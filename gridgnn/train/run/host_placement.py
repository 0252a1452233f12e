"""Ranks to hosts for a run that spans hosts: choose the placement, and split each axis's bytes into what
stayed within a host and what crossed hosts (the ``comm.by_axis_*`` keys and ``hosts`` of the metrics file)."""

from __future__ import annotations

from gridgnn.config import TrainConfig
from gridgnn.cost.epoch_model import predict_run
from gridgnn.cost.graph_stats import GraphStats
from gridgnn.grid.hosts import HostMap
from gridgnn.grid.placement import Placement, axis_bytes, host_axis_order
from gridgnn.grid.shape import GridShape
from gridgnn.plan.op_templates import spec_for


def place_ranks(config: TrainConfig, graph, shape: GridShape, hosts: HostMap | None) -> Placement | None:
    """The placement for ``hosts`` (None on one host: the grid's row-major order). The axis that the cost
    model says moves the most bytes varies fastest (uniform-nnz estimate: cheap, the same on every rank).
    Not collective."""
    if hosts is None or not hosts.spans_hosts:
        return None
    per_host = max(len(hosts.ranks_on(label)) for label in hosts.hosts)
    stats = GraphStats.from_counts(graph.num_nodes, max(int(graph.num_edges), 0), graph.num_features,
                                   graph.num_classes)
    terms = predict_run(spec_for(config, stats), stats, shape, config).terms
    return Placement(shape, host_axis_order(shape, axis_bytes(terms), per_host))


def split_by_host(by_axis: dict[str, list[int]], placement: Placement, hosts: HostMap) -> dict[str, dict]:
    """``{"by_axis_within_host": {axis: per-rank bytes}, "by_axis_across_hosts": {...}}``: a rank's bytes on an
    axis count as within a host when its whole group on that axis is on its host."""
    host_of_rank = [hosts.host_index(r) for r in range(len(hosts.labels))]
    within, across = {}, {}
    for axis, per_rank in by_axis.items():
        inside = placement.within_host(host_of_rank, axis)
        within[axis] = [b if ok else 0 for b, ok in zip(per_rank, inside, strict=True)]
        across[axis] = [0 if ok else b for b, ok in zip(per_rank, inside, strict=True)]
    return {"by_axis_within_host": within, "by_axis_across_hosts": across}


def hosts_metrics(hosts: HostMap, placement: Placement) -> dict:
    """The ``hosts`` object of the metrics file."""
    return {"labels": hosts.hosts, "host_of_rank": [hosts.host_index(r) for r in range(len(hosts.labels))],
            "axis_order": list(placement.order)}
