"""One worker of a distributed run: join the process group, build the grid, train, report on rank 0.

Started by `gridgnn train --nprocs P` (`gridgnn.launch.local`) or by torchrun: both set RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT. Under the local launcher the workers memory-map the graph it prepared once
(normalized Â and node data; see `gridgnn.data.prepared`); under torchrun every worker loads and normalizes
the graph itself. Either way each keeps only its blocks.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from gridgnn.config import TrainConfig
from gridgnn.data.graph import Graph
from gridgnn.data.operators import operator_matrix
from gridgnn.data.prepared import PreparedGraph, is_prepared, open_prepared
from gridgnn.data.prepared_check import check_same_prepared_graph
from gridgnn.data.reorder import reorder_info
from gridgnn.errors import CollectiveError, ConfigError
from gridgnn.grid.comm import PHASES, Communicator
from gridgnn.grid.hosts import HostMap, gather_host_map
from gridgnn.grid.liveness import Liveness, with_lost_peers
from gridgnn.grid.network import port_taken_error, prepare_worker_network
from gridgnn.grid.peer_failures import peer_failures_explained
from gridgnn.grid.placement import Placement
from gridgnn.grid.process_grid import ProcessGrid, backend_for, default_device
from gridgnn.grid.shape import GridShape, resolve_grid
from gridgnn.nn.models import operator_of
from gridgnn.nn.stack import check_model_size
from gridgnn.parallel.grid_ops import GridOps
from gridgnn.train.auto import choose_comm, choose_configuration, predicted_comm
from gridgnn.train.checkpoint_lock import hold_checkpoint_dir
from gridgnn.train.distributed import DistributedTrainer, peak_memory_bytes, reset_peak_memory
from gridgnn.train.host_placement import hosts_metrics, place_ranks, split_by_host
from gridgnn.train.memory_guard import check_memory
from gridgnn.train.metrics import build_metrics, check_writable, write_metrics
from gridgnn.train.products import check_products, write_products
from gridgnn.train.resume import ResumePoint, check_checkpoint_dir, fit_resumable
from gridgnn.train.run_base import Run, load_graph
from gridgnn.train.trainer import EpochRecord, TrainResult
from gridgnn.train.worker_env import AUTO_REASON_ENV, LAUNCHER_PEAK_ENV, PREPARED_ENV

_IMPORTED_AT = time.monotonic()

COMM_KEYS = ("bytes", "calls", "by_phase", "calls_by_phase", "eval_bytes", "predicted_bytes", "predicted_calls",
             "predicted_by_phase", "predicted_calls_by_phase", "by_axis", "by_axis_within_host",
             "by_axis_across_hosts")
"""The keys of each epoch's ``comm`` object in the metrics file (the predicted ones: `gridgnn.train.auto`)."""


def grid_shape_for(config: TrainConfig, world_size: int) -> GridShape:
    """The validated grid of ``config`` on ``world_size`` processes (raises `ConfigError`; the rule that only
    1.5d takes a replication factor is `TrainConfig.validate`'s)."""
    replication = config.replication if config.algo == "1.5d" else None
    return resolve_grid(config.algo, world_size, replication=replication, grid=config.grid)


def init_from_env(timeout_s: float, interface: str | None = None) -> tuple[int, int]:
    """Join the process group described by the torchrun environment; returns (rank, world size).

    ``interface``: the network interface gloo uses (`gridgnn.grid.network.choose_interface`)."""
    if not dist.is_initialized():
        prepare_worker_network(timeout_s, interface)  # gloo's interface; a rendezvous that answers
        backend, timeout = backend_for(default_device()), timedelta(seconds=timeout_s)
        try:
            store = _restart_safe_agent_store(timeout)
            if store is None:
                dist.init_process_group(backend, init_method="env://", timeout=timeout)
            else:
                dist.init_process_group(backend, store=store, rank=int(os.environ["RANK"]),
                                        world_size=int(os.environ["WORLD_SIZE"]), timeout=timeout)
        except RuntimeError as error:  # DistNetworkError included
            raise (port_taken_error(error) or error) from None
    threads = os.environ.get("GRIDGNN_THREADS")
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    # torchrun leaves OMP_NUM_THREADS=1; share the machine's cores among its local workers instead.
    torch.set_num_threads(int(threads) if threads else max(1, (os.cpu_count() or 1) // local_world))
    return dist.get_rank(), dist.get_world_size()


def _restart_safe_agent_store(timeout: timedelta) -> dist.Store | None:
    """Under torchrun's agent store, a client of it whose keys are private to this restart attempt.

    torchrun keeps one store across ``--max-restarts`` attempts, and the process group's keys of a failed
    attempt (the dead workers' addresses) are still in it: a restarted worker may read them and fail to
    connect (seen with torch 2.13, gloo). A prefix per attempt keeps every attempt to its own keys.
    None outside torchrun's agent store (then ``env://`` is used as is).
    """
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return None
    client = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                           int(os.environ["WORLD_SIZE"]), is_master=False, timeout=timeout)
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return dist.PrefixStore(f"gridgnn/attempt_{attempt}/", client)


@dataclass
class TrainedGrid:
    """The outcome of `train_on_grid` on one rank.

    ``comm``: the per-epoch communication of every rank merged (rank 0; None elsewhere), one entry per
    epoch of ``result`` (None for epochs a resumed checkpoint recorded without it); ``resumed_from``: the
    checkpoint the run continued from, if any; ``setup_peak_memory_bytes``: every rank's peak resident
    memory once its blocks were built, before the first epoch (rank 0; None elsewhere); ``spmm_setup``: every
rank's SpMM set-up (comm mode, index-exchange bytes and calls, seconds; rank 0).
    """

    result: TrainResult
    comm: list[dict | None] | None
    shape: GridShape
    resumed_from: ResumePoint | None = None
    setup_peak_memory_bytes: list[int] | None = None
    spmm_setup: list[dict] | None = None
    reorder_meta: dict | None = None
    graph: Graph | None = None  # the graph trained on (reordered when ``--reorder`` asked)
    placement: Placement | None = None


def train_on_grid(config: TrainConfig, graph: Graph, on_epoch: Callable[[EpochRecord], None] | None = None,
                  *, return_model: bool = False, hosts: HostMap | None = None,
                  on_ready: Callable[[str, float], None] | None = None):
    """Train on the grid of ``config`` (collective on the world), resuming and saving checkpoints as
    ``config`` asks; returns a `TrainedGrid`, and with ``return_model`` also this rank's trained model.
    ``hosts``: where each rank runs; on several hosts the ranks are placed so that the heaviest axis stays
    within a host when it fits (`gridgnn.train.host_placement`). ``on_ready(label, seconds)`` runs on rank 0
    once every rank has built its blocks (after the set-up barrier; seconds since this process started)."""
    shape = grid_shape_for(config, dist.get_world_size() if dist.is_initialized() else 1)
    graph = reordered_for_grid(config, graph, shape)
    if config.comm == "auto":
        config, _ = choose_comm(config, graph, shape)
    grid = ProcessGrid.create(shape, placement=place_ranks(config, graph, shape, hosts))
    comm = Communicator(grid, overlap=config.overlap)
    setup_start = time.perf_counter()
    ops = GridOps(grid, comm, model_operator(config, graph), operator=operator_of(config.model),
                  comm_mode=config.comm)
    setup = {"comm": config.comm, "index_exchange_bytes": sum(r.bytes for r in comm.records),
             "index_exchange_calls": len(comm.records), "index_exchange_s": sum(r.seconds for r in comm.records),
             "spmm_setup_s": time.perf_counter() - setup_start}
    trainer = DistributedTrainer(config, graph, ops)
    setup_peak = peak_memory_bytes(grid.device)
    if isinstance(graph, PreparedGraph):
        graph.release_pages()  # the rows this rank cut are copied out: their file pages leave its resident set
    reset_peak_memory(grid.device)  # each epoch's peak_memory_bytes is then training's, not set-up's
    if dist.is_initialized():
        with peer_failures_explained("the barrier after set-up"):
            dist.barrier()  # so that set-up skew between ranks is not billed to the first epoch
    if on_ready is not None and grid.rank == 0:
        on_ready(f"{shape.algo} {shape.label()} on {shape.world_size} processes", process_age_s())

    def comm_so_far(point: ResumePoint | None) -> list[dict] | None:
        """Every epoch's merged communication on rank 0 (collective); epochs a checkpoint recorded without
        it (a local run's) are None."""
        per_rank = gather_to_rank0(trainer.epoch_comm)
        if per_rank is None:
            return None
        earlier = ((point.comm or [None] * point.epoch) if point is not None else [])
        return earlier + merge_epoch_comm(per_rank)

    grid_info = {"algo": config.algo, "grid_shape": shape.label(), "world_size": shape.world_size}
    result, point = fit_resumable(trainer, config, graph, on_epoch if grid.rank == 0 else None, grid=grid_info,
                                  comm_so_far=comm_so_far)
    merged = comm_so_far(point)
    write_products(config, trainer, graph, result, rank=grid.rank)
    outcome = TrainedGrid(result, merged, shape, point, gather_to_rank0(setup_peak), gather_to_rank0(setup),
                          {k: v for k, v in graph.meta.items() if k.startswith(("reorder", "nnz_imbalance"))},
                          graph, grid.placement)
    return (outcome, trainer.model) if return_model else outcome


def reordered_for_grid(config: TrainConfig, graph: Graph | PreparedGraph, shape: GridShape):
    """``graph`` in the vertex order ``config.reorder`` asks (`gridgnn.data.reorder`), METIS cutting it into the
    grid's row blocks; as is when it already has that order. A prepared folder made with another reordering is
    refused (`ConfigError`, one line): it cannot be reordered in place. Not collective (deterministic)."""
    have = graph.meta.get("reorder", "none")
    if have == config.reorder:
        return graph
    if isinstance(graph, PreparedGraph):
        raise ConfigError(f"prepared graph '{graph.folder}' was made with --reorder {have}, but --reorder "
                          f"{config.reorder} was asked: train with --reorder {have}, or prepare it again with "
                          f"--reorder {config.reorder}")
    from gridgnn.data.reorder import reorder_graph

    return reorder_graph(graph, config.reorder, shape.sizes[0], config.seed)


def spmm_setup_metrics(per_rank: list[dict] | None) -> dict:
    """The ``setup`` keys of the SpMM set-up: ``comm`` (dense or sparse), ``index_exchange_bytes`` and
    ``index_exchange_calls`` (per-rank lists; the integer index sets of ``--comm sparse``, 0 for dense),
    ``index_exchange_s`` (the slowest rank's seconds in those collectives, waiting for peers included) and
    ``spmm_setup_s`` (the slowest rank's seconds building its blocks and index sets)."""
    if not per_rank:
        return {}
    return {"comm": per_rank[0]["comm"],
            "index_exchange_bytes": [r["index_exchange_bytes"] for r in per_rank],
            "index_exchange_calls": [r["index_exchange_calls"] for r in per_rank],
            "index_exchange_s": max(r.get("index_exchange_s", 0.0) for r in per_rank),
            "spmm_setup_s": max(r["spmm_setup_s"] for r in per_rank)}


def model_operator(config: TrainConfig, graph: Graph | PreparedGraph):
    """The global matrix of ``config.model``'s operator: a prepared graph's (memory-mapped; it must have been
    prepared for that operator), else built from ``graph.adj``. Raises `ConfigError` on a mismatch."""
    operator = operator_of(config.model)
    if not isinstance(graph, PreparedGraph):
        return operator_matrix(operator, graph.adj)
    if graph.operator != operator:
        raise ConfigError(f"prepared graph '{graph.folder}' holds the {graph.operator!r} operator, but --model "
                          f"{config.model} needs {operator!r}: prepare it again with --model {config.model}")
    return graph.norm_adj


def gather_to_rank0(value: object) -> list | None:
    """Every rank's ``value`` on rank 0 (after training; outside the counted epochs)."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return [value]
    out = [None] * dist.get_world_size() if dist.get_rank() == 0 else None
    with peer_failures_explained(f"gathering to rank 0 (rank {dist.get_rank()})"):
        dist.gather_object(value, out, dst=0)
    return out


def merge_epoch_comm(per_rank: list[list[dict]]) -> list[dict]:
    """Per-epoch ``comm`` objects with per-rank lists (see the metrics file description)."""
    merged = []
    for epoch_index in range(len(per_rank[0])):
        ranks = [records[epoch_index] for records in per_rank]
        merged.append({
            "bytes": [r["bytes"] for r in ranks],
            "calls": [r["calls"] for r in ranks],
            "by_phase": {phase: [r["by_phase"][phase] for r in ranks] for phase in PHASES},
            "calls_by_phase": {phase: [r["calls_by_phase"][phase] for r in ranks] for phase in PHASES},
            "eval_bytes": [r.get("eval_bytes", 0) for r in ranks],
            "comm_time_s": max(r["comm_time_s"] for r in ranks),
            "exposed_comm_time_s": max(r["exposed_comm_time_s"] for r in ranks),
            "compute_time_s": max(r["compute_time_s"] for r in ranks),
            # the maxima above may come from different ranks: keep every rank's split too
            "rank_times_s": {key: [r[f"{key}_time_s"] for r in ranks]
                             for key in ("comm", "exposed_comm", "compute")},
            "peak_memory_bytes": [r["peak_memory_bytes"] for r in ranks],
            "by_axis": {axis: [r.get("by_axis", {}).get(axis, 0) for r in ranks]
                        for axis in dict.fromkeys(a for r in ranks for a in r.get("by_axis", {}))},
        })
    return merged


def in_launched_worker() -> bool:
    """True inside a worker started by torchrun or `gridgnn train --nprocs` (they set WORLD_SIZE)."""
    return "WORLD_SIZE" in os.environ and "RANK" in os.environ


def process_age_s() -> float:
    """Seconds since this process started (from /proc; the time since this module was imported elsewhere)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            start_ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", encoding="ascii") as uptime:
            return float(uptime.read().split()[0]) - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return time.monotonic() - _IMPORTED_AT


def run_worker(config: TrainConfig, on_epoch: Callable[[EpochRecord], None] | None = None,
               timeout_s: float = 300.0, graph: Graph | None = None,
               on_ready: Callable[[str, float], None] | None = None):
    """One worker's whole run: join the group, train on the grid, rank 0 writes the metrics.

    Returns the `Run` (its ``metrics`` is None on ranks other than 0). Collective on the world.
    """
    rank, world = init_from_env(timeout_s) if in_launched_worker() else (0, 1)
    if config.nprocs not in (1, world):
        raise ConfigError(f"--nprocs {config.nprocs} contradicts the launcher's world size {world}")
    if config.metrics_out is not None and rank == 0:
        check_writable(config.metrics_out)
    with hold_checkpoint_dir(config, agree=True):  # rank 0 holds it, unless the local launcher does
        return _train_worker(config, rank, on_epoch, graph, on_ready)


def _train_worker(config: TrainConfig, rank: int, on_epoch: Callable[[EpochRecord], None] | None,
                  graph: Graph | None, on_ready: Callable[[str, float], None] | None = None) -> Run:
    """`run_worker` once the process group exists and the checkpoint folder is held."""
    world = dist.get_world_size() if dist.is_initialized() else 1
    check_checkpoint_dir(config)
    check_products(config, rank)
    if graph is None:
        prepared = os.environ.get(PREPARED_ENV) or (config.dataset if is_prepared(config.dataset) else None)
        graph = open_prepared(prepared) if prepared else load_graph(config)
    check_model_size(graph.num_features, config.hidden, graph.num_classes, config.layers)  # before any estimate
    if config.algo == "auto":  # under torchrun: every worker reaches the same choice on the same graph
        config, reason = choose_configuration(config, graph, world, default_device().type, on_grid=True)
        config = dataclasses.replace(config, auto_reason=reason)
        if rank == 0 and not config.quiet:
            print(reason, flush=True)
    elif os.environ.get(AUTO_REASON_ENV):
        config = dataclasses.replace(config, auto_reason=os.environ[AUTO_REASON_ENV])
    if config.comm == "auto":  # every worker reaches the same choice on the same graph
        config, reason = choose_comm(config, graph, grid_shape_for(config, world))
        config = dataclasses.replace(config, auto_reason="; ".join(filter(None, [config.auto_reason, reason])))
        if rank == 0 and not config.quiet:
            print(reason, flush=True)
    check_memory(config, graph, world)
    trained, model, hosts = _train_watched(config, graph, on_epoch if rank == 0 else None, rank, on_ready)
    result, comm, shape = trained.result, trained.comm, trained.shape
    if dist.is_initialized():  # only after success: tearing down a group with a dead peer can abort
        dist.destroy_process_group()
    metrics = None
    if rank == 0:
        metrics = build_metrics(config, graph, result, resumed_from=trained.resumed_from)
        metrics["config"].update(world_size=shape.world_size, grid_shape=shape.label(), grid_axes=list(shape.axes))
        launcher_peak = os.environ.get(LAUNCHER_PEAK_ENV)
        metrics["setup"] = {"peak_memory_bytes": trained.setup_peak_memory_bytes,
                            "launcher_peak_memory_bytes": int(launcher_peak) if launcher_peak else None,
                            "prepared_graph": bool(os.environ.get(PREPARED_ENV)),
                            "threads": torch.get_num_threads()}
        metrics["setup"].update(spmm_setup_metrics(trained.spmm_setup))
        metrics["setup"]["reorder"] = reorder_info(trained.reorder_meta or {})
        placement = trained.placement or Placement.default(shape)
        predicted = _in_rank_order(predicted_comm(config, trained.graph, shape), placement)
        if hosts.spans_hosts:
            metrics["hosts"] = hosts_metrics(hosts, placement)
        first_new = trained.resumed_from.epoch if trained.resumed_from is not None else 0
        for index, (epoch, epoch_comm) in enumerate(zip(metrics["epochs"], comm, strict=True)):
            if epoch_comm is None:
                continue
            if index >= first_new:  # epochs restored from a checkpoint keep what was recorded then
                epoch_comm = {**epoch_comm, **predicted}
                if hosts.spans_hosts and "by_axis" in epoch_comm:
                    epoch_comm.update(split_by_host(epoch_comm["by_axis"], placement, hosts))
            epoch["comm"] = {key: epoch_comm[key] for key in COMM_KEYS if key in epoch_comm}
            for key in ("comm_time_s", "exposed_comm_time_s", "compute_time_s", "rank_times_s",
                        "peak_memory_bytes"):
                if key in epoch_comm:  # rank_times_s: absent from epochs saved by older checkpoints
                    epoch[key] = epoch_comm[key]
        if config.metrics_out is not None:
            write_metrics(config.metrics_out, metrics)
    return Run(graph, result, metrics, model)


def _train_watched(config: TrainConfig, graph, on_epoch, rank: int,
                   on_ready: Callable[[str, float], None] | None = None):
    """`train_on_grid` (returning this rank's model) after gathering where each rank runs and checking that
    every host reads the same prepared folder (a user's; not the local launcher's own); on a run that spans
    hosts, with heartbeats, so that a lost peer's one-line error names the lost ranks and hosts. Returns
    (`TrainedGrid`, model, `HostMap`). Collective on the world."""
    hosts = gather_host_map()
    if isinstance(graph, PreparedGraph) and not os.environ.get(PREPARED_ENV):
        check_same_prepared_graph(graph.folder, hosts.labels)
    liveness = Liveness(hosts, rank).start() if hosts.spans_hosts and "MASTER_ADDR" in os.environ else None
    try:
        trained, model = train_on_grid(config, graph, on_epoch, return_model=True, hosts=hosts, on_ready=on_ready)
        return trained, model, hosts
    except CollectiveError as error:  # a peer was lost: say which ranks and hosts, if it can be told
        raise with_lost_peers(error, liveness) from error
    finally:
        if liveness is not None:
            liveness.stop()


def _in_rank_order(predicted: dict, placement: Placement) -> dict:
    """The model's per-rank lists (grid row-major order) listed by rank under ``placement``."""
    if placement.is_default:
        return predicted
    return {key: (placement.to_rank_order(value) if isinstance(value, list) else
                  {k: placement.to_rank_order(v) for k, v in value.items()}) for key, value in predicted.items()}
