"""The metrics document of a grid run (rank 0): the single-process document (`gridgnn.train.outputs.metrics`) plus
the grid, the set-up figures, the hosts and every epoch's measured and predicted communication. Not
collective.
"""

from __future__ import annotations

import torch

from gridgnn.data.graph import Graph
from gridgnn.data.reorder import reorder_info
from gridgnn.grid.hosts import HostMap
from gridgnn.grid.placement import Placement
from gridgnn.grid.process_grid import default_device
from gridgnn.run_spec import RunSpec
from gridgnn.train.outputs.metrics import build_metrics
from gridgnn.train.run.auto import predicted_comm
from gridgnn.train.run.grid_train import TrainedGrid, spmm_setup_metrics
from gridgnn.train.run.host_placement import hosts_metrics, split_by_host

COMM_KEYS = ("bytes", "calls", "by_phase", "calls_by_phase", "eval_bytes", "gather_bytes",
             "predicted_bytes", "predicted_calls",
             "predicted_by_phase", "predicted_calls_by_phase", "by_axis", "by_axis_within_host",
             "by_axis_across_hosts")
"""The keys of each epoch's ``comm`` object in the metrics file (the predicted ones: `gridgnn.train.run.auto`)."""


def grid_metrics(spec: RunSpec, graph: Graph, trained: TrainedGrid, hosts: HostMap) -> dict:
    """The metrics document of the grid run ``spec`` on rank 0 (``graph``: the graph as loaded, before any
    reordering; ``trained``: rank 0's `TrainedGrid`)."""
    config, shape = spec.config, trained.shape
    metrics = build_metrics(config, graph, trained.result, resumed_from=trained.resumed_from,
                            device=default_device().type)
    metrics["config"].update(world_size=shape.world_size, grid_shape=shape.label(), grid_axes=list(shape.axes))
    metrics["setup"] = {"peak_memory_bytes": trained.setup_peak_memory_bytes,
                        "launcher_peak_memory_bytes": spec.launcher_peak_memory_bytes,
                        "prepared_graph": spec.prepared_graph is not None,
                        "threads": torch.get_num_threads()}
    placement = trained.placement or Placement.default(shape)
    predicted_step, predicted_setup = (_in_rank_order(p, placement)
                                       for p in predicted_comm(config, trained.graph, shape))
    metrics["setup"].update(spmm_setup_metrics(trained.spmm_setup))
    if "index_exchange_bytes" in metrics["setup"]:
        metrics["setup"].update(predicted_setup)
    metrics["setup"]["reorder"] = trained.reorder or reorder_info({})
    if hosts.spans_hosts:
        metrics["hosts"] = hosts_metrics(hosts, placement)
    _add_epoch_comm(metrics["epochs"], trained, predicted_step, placement, hosts)
    return metrics


def _add_epoch_comm(epochs: list[dict], trained: TrainedGrid, predicted: dict, placement: Placement,
                    hosts: HostMap) -> None:
    """Each epoch's ``comm`` object and time split (epochs restored from a checkpoint keep what was recorded
    then, predictions included)."""
    first_new = trained.resumed_from.epoch if trained.resumed_from is not None else 0
    for index, (epoch, epoch_comm) in enumerate(zip(epochs, trained.comm, strict=True)):
        if epoch_comm is None:
            continue
        if index >= first_new:
            epoch_comm = {**epoch_comm, **predicted}
            if hosts.spans_hosts and "by_axis" in epoch_comm:
                epoch_comm.update(split_by_host(epoch_comm["by_axis"], placement, hosts))
        epoch["comm"] = {key: epoch_comm[key] for key in COMM_KEYS if key in epoch_comm}
        for key in ("comm_time_s", "exposed_comm_time_s", "compute_time_s", "rank_times_s", "peak_memory_bytes"):
            if key in epoch_comm:  # rank_times_s: absent from epochs saved by older checkpoints
                epoch[key] = epoch_comm[key]


def _in_rank_order(predicted: dict, placement: Placement) -> dict:
    """The model's per-rank lists (grid row-major order) listed by rank under ``placement``."""
    if placement.is_default:
        return predicted
    return {key: (placement.to_rank_order(value) if isinstance(value, list) else
                  {k: placement.to_rank_order(v) for k, v in value.items()}) for key, value in predicted.items()}
