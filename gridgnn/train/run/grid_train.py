"""Training on the grid: build the grid, its blocks and the trainer, train (resuming and checkpointing),
and bring every rank's communication and set-up figures to rank 0. Collective on the world.

Under the local launcher the graph is the one it prepared once (memory-mapped, `gridgnn.data.prepared`);
under torchrun each worker loaded it itself. Either way each rank keeps only its blocks.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch.distributed as dist

from gridgnn.config import ExecutionOptions, TrainConfig
from gridgnn.cost.stages import follows_parts
from gridgnn.data.edge_features import operator_rows
from gridgnn.data.graph import Graph
from gridgnn.data.operators import operator_matrix
from gridgnn.data.prepared import PreparedGraph
from gridgnn.data.reorder import reorder_info
from gridgnn.errors import ConfigError
from gridgnn.grid.comm import PHASES, Communicator
from gridgnn.grid.hosts import HostMap
from gridgnn.grid.peer_failures import peer_failures_explained
from gridgnn.grid.placement import Placement
from gridgnn.grid.process_grid import ProcessGrid
from gridgnn.grid.shape import GridShape
from gridgnn.nn.models import operator_of
from gridgnn.parallel.grid_ops import GridOps
from gridgnn.plan.op_templates import spec_for
from gridgnn.train.checkpoint.resume import ResumePoint, fit_resumable
from gridgnn.train.loop.distributed import DistributedTrainer, peak_memory_bytes, reset_peak_memory
from gridgnn.train.loop.trainer import EpochRecord, TrainResult
from gridgnn.train.outputs.products import write_products
from gridgnn.train.run.host_placement import place_ranks
from gridgnn.train.run.process_group import process_age_s


@dataclass
class TrainedGrid:
    """The outcome of `train_on_grid` on one rank.

    ``comm``: the per-epoch communication of every rank merged (rank 0; None elsewhere), one entry per
    epoch of ``result`` (None for epochs a resumed checkpoint recorded without it); ``resumed_from``: the
    checkpoint the run continued from, if any; ``setup_peak_memory_bytes``: every rank's peak resident
    memory once its blocks were built, before the first epoch (rank 0; None elsewhere); ``spmm_setup``: every
rank's SpMM set-up (comm mode, index-exchange bytes and calls, seconds; rank 0); ``reorder``: the
    metrics' ``setup.reorder`` object (`gridgnn.data.reorder.reorder_info`).
    """

    result: TrainResult
    comm: list[dict | None] | None
    shape: GridShape
    resumed_from: ResumePoint | None = None
    setup_peak_memory_bytes: list[int] | None = None
    spmm_setup: list[dict] | None = None
    reorder: dict | None = None
    graph: Graph | None = None  # the graph trained on (reordered when ``--reorder`` asked)
    placement: Placement | None = None


def train_on_grid(config: TrainConfig, graph: Graph, on_epoch: Callable[[EpochRecord], None] | None = None,
                  *, return_model: bool = False, hosts: HostMap | None = None,
                  on_ready: Callable[[str, float], None] | None = None, shape: GridShape | None = None):
    """Train on the grid of ``config`` (collective on the world), resuming and saving checkpoints as
    ``config`` asks; returns a `TrainedGrid`, and with ``return_model`` also this rank's trained model.
    ``hosts``: where each rank runs; on several hosts the ranks are placed so that the heaviest axis stays
    within a host when it fits (`gridgnn.train.run.host_placement`). ``on_ready(label, seconds)`` runs on rank 0
    once every rank has built its blocks (after the set-up barrier; seconds since this process started).
    ``shape``: the grid of the resolved run. A run is resolved once, before this
    (`gridgnn.train.run.resolve.resolve_run`: its grid, its execution options, ``graph`` in the vertex order it
    trains in); `ConfigError` otherwise."""
    if shape is None or config.comm == "auto" or config.algo == "auto":
        raise ConfigError("train_on_grid trains a resolved run: settle it first with "
                          "gridgnn.train.run.resolve.resolve_run (its grid shape, comm and vertex order)")
    grid = ProcessGrid.create(shape, placement=place_ranks(config, graph, shape, hosts))
    comm = Communicator(grid, overlap=config.overlap, precision=config.comm_precision, seed=config.seed)
    operator = model_operator(config, graph)  # the global operator (Â for GCN): every rank builds it alike
    if dist.is_initialized():
        with peer_failures_explained("the barrier before set-up"):
            dist.barrier()  # so that skew from loading the graph is not billed to the index exchange
    setup_start = time.perf_counter()
    feature_rows = kept_feature_rows(config, graph, shape)
    ops = GridOps(grid, comm, operator, operator=operator_of(config.model), comm_mode=config.comm,
                  parts=graph.meta.get("reorder_bounds"), cache_panels=config.cache_panels,  # blocks follow METIS parts
                  feature_rows=feature_rows, defer_weight_gather=config.defer_weight_gather,
                  messages=spec_for(config, graph).traced.passes_messages,
                  edge_attr=operator_edge_rows(graph, operator), column_seed=column_seed_of(graph, shape))
    setup = spmm_setup_record(config, comm.records, time.perf_counter() - setup_start, feature_rows is not None,
                              ops.defer_gather)
    trainer = DistributedTrainer(config, graph, ops)
    # 1D/1.5D: by the trainer's features (sparse or not) and the model (a weight only the features' products read)
    setup["defer_weight_gather"] = ops.defer_gather and (shape.splits_features or bool(
        spec_for(config, graph).traced.feature_weights))
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

    def on_rank0_epoch(record: EpochRecord) -> None:
        record.comm_bytes = trainer.epoch_comm[-1]["bytes"]  # this rank's step: the printed lines name it
        on_epoch(record)

    grid_info = {"algo": config.algo, "grid_shape": shape.label(), "world_size": shape.world_size}
    watch = on_rank0_epoch if grid.rank == 0 and on_epoch is not None else None
    result, point = fit_resumable(trainer, config, graph, watch, grid=grid_info,
                                  comm_so_far=comm_so_far)
    merged = comm_so_far(point)
    write_products(config, trainer, graph, result, rank=grid.rank)
    follows = follows_parts(shape.sizes[0], graph.meta.get("reorder_bounds"))
    reorder = reorder_info(graph.meta, row_blocks="parts" if follows else "balanced")
    outcome = TrainedGrid(result, merged, shape, point, gather_to_rank0(setup_peak), gather_to_rank0(setup),
                          reorder, graph, grid.placement)
    return (outcome, trainer.model) if return_model else outcome


def column_seed_of(graph: Graph | PreparedGraph, shape: GridShape) -> int | None:
    """The seed of Â's second column order (``--reorder double-random``: ``meta["column_seed"]``) where ``shape``
    uses one (2D and 3D), else None. Not collective."""
    seed = graph.meta.get("column_seed")
    return int(seed) if seed is not None and shape.splits_features else None


def kept_feature_rows(config: TrainConfig, graph: Graph | PreparedGraph, shape: GridShape) -> int | None:
    """The width of the input features every rank keeps in full rows: the graph's feature count when
    ``--full-feature-rows`` takes effect on ``shape`` (`gridgnn.cost.epoch_model.ModelSpec.keeps_feature_rows`
    of the traced model, alike on every rank), else None. Not collective."""
    return graph.num_features if spec_for(config, graph).keeps_feature_rows(shape) else None


def spmm_setup_record(execution: ExecutionOptions, records: list, seconds: float, feature_rows: bool = False,
                      deferred: bool = False) -> dict:
    """One rank's SpMM set-up under ``execution`` (a run's execution section, or its whole `TrainConfig`) from
    the collectives it recorded building its blocks: the index exchange (``all_to_all``) and the panel cache
    (``broadcast``), each as bytes, calls and seconds; ``feature_rows`` and ``deferred``: whether
    ``--full-feature-rows`` and ``--defer-weight-gather`` took effect."""
    out = {"comm": execution.comm, "cache_panels": execution.cache_panels, "full_feature_rows": feature_rows,
           "defer_weight_gather": deferred, "spmm_setup_s": seconds}
    for key, op in (("index_exchange", "all_to_all"), ("panel_cache", "broadcast")):
        mine = [r for r in records if r.op == op]
        out.update({f"{key}_bytes": sum(r.bytes for r in mine), f"{key}_calls": len(mine),
                    f"{key}_s": sum(r.seconds for r in mine)})
    return out


def spmm_setup_metrics(per_rank: list[dict] | None) -> dict:
    """The ``setup`` keys of the SpMM set-up: ``comm`` (dense or sparse), ``cache_panels``,
    ``full_feature_rows`` (whether every rank kept its rows' full input features: the flag took effect),
    ``defer_weight_gather`` (whether steps updated only each rank's column blocks of the weights),
    ``index_exchange_bytes`` and ``index_exchange_calls`` (per-rank lists; the integer index sets of ``--comm
    sparse``, or what each receiver of ``--comm cover`` tells its senders; 0 for dense), ``index_exchange_s``
    (the slowest rank's seconds in those collectives, waiting for
    peers that are still building their blocks included; the ranks start set-up together, after a barrier),
    ``panel_cache_bytes``, ``panel_cache_calls`` and ``panel_cache_s`` (the same for the Â panels
    ``--cache-panels`` receives once; 0 without) and ``spmm_setup_s`` (the slowest rank's seconds building
    its blocks, index sets and panel cache)."""
    if not per_rank:
        return {}
    out = {key: per_rank[0][key] for key in ("comm", "cache_panels", "full_feature_rows", "defer_weight_gather")}
    for key in ("index_exchange", "panel_cache"):
        out.update({f"{key}_bytes": [r[f"{key}_bytes"] for r in per_rank],
                    f"{key}_calls": [r[f"{key}_calls"] for r in per_rank],
                    f"{key}_s": max(r.get(f"{key}_s", 0.0) for r in per_rank)})
    out["spmm_setup_s"] = max(r["spmm_setup_s"] for r in per_rank)
    return out


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


def operator_edge_rows(graph: Graph | PreparedGraph, operator):
    """The edge features of the stored entries of ``operator`` (`model_operator`): a prepared graph's as written,
    else `gridgnn.data.edge_features.operator_rows` of the graph's own; None without edge features."""
    if isinstance(graph, PreparedGraph):
        return graph.edge_attr
    return operator_rows(graph.adj, graph.edge_attr, operator)


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
            "gather_bytes": [r.get("gather_bytes", 0) for r in ranks],
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
