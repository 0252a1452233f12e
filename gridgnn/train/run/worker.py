"""One worker's whole run on a grid: join the group, settle the run spec, train, rank 0 writes the metrics
(and the ``--log-csv`` file).

Started by `gridgnn train --nprocs P` (`gridgnn.launch.local`, through `gridgnn.cli.worker`), the worker is
handed the `RunSpec` its launcher resolved: the configuration, the grid shape and the folder of the graph it
prepared once. Started by torchrun (or as a one-process grid), it resolves the same spec itself from the same
graph (`gridgnn.train.run.resolve.resolve_run`, deterministic). The jobs this module calls on live in their own
modules: joining the group (`gridgnn.train.run.process_group`), training on the grid (`gridgnn.train.run.grid_train`)
and the metrics document (`gridgnn.train.run.grid_metrics`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

import torch.distributed as dist

from gridgnn.config import TrainConfig
from gridgnn.cost.block_stats import blocks_split_by
from gridgnn.data.attach import NodeFiles, refuse_on_prepared
from gridgnn.data.graph import Graph
from gridgnn.data.prepared import PreparedGraph, is_prepared, open_prepared
from gridgnn.data.prepared_check import check_same_prepared_graph
from gridgnn.errors import CollectiveError, ConfigError
from gridgnn.grid.hosts import HostMap, gather_host_map
from gridgnn.grid.liveness import Liveness, with_lost_peers
from gridgnn.grid.process_grid import default_device
from gridgnn.nn.stack import check_model_size
from gridgnn.run_spec import ProcessOptions, RunSpec
from gridgnn.train.checkpoint.lock import hold_checkpoint_dir
from gridgnn.train.checkpoint.resume import check_checkpoint_dir
from gridgnn.train.loop.trainer import EpochRecord
from gridgnn.train.outputs.epoch_csv import check_log_csv, write_epoch_csv
from gridgnn.train.outputs.metrics import check_writable, write_metrics
from gridgnn.train.outputs.products import check_products
from gridgnn.train.run.base import Run, load_graph
from gridgnn.train.run.grid_metrics import grid_metrics
from gridgnn.train.run.grid_train import TrainedGrid, train_on_grid
from gridgnn.train.run.memory_guard import check_memory
from gridgnn.train.run.process_group import in_launched_worker, init_from_env
from gridgnn.train.run.resolve import resolve_run
from gridgnn.train.run.split_stats import split_over_world


def run_worker(config: TrainConfig, on_epoch: Callable[[EpochRecord], None] | None = None,
               timeout_s: float = 300.0, graph: Graph | None = None,
               on_ready: Callable[[str, float], None] | None = None, *, spec: RunSpec | None = None,
               process: ProcessOptions | None = None):
    """One worker's whole run: join the group, train on the grid, rank 0 writes the metrics.

    ``spec``: the run the local launcher resolved (its configuration and process options replace ``config``,
    ``timeout_s`` and ``process``); without it this worker resolves the run itself once it has the graph.
    ``process``: how this process runs (default: ``timeout_s`` and nothing else). Returns the `Run` (its
    ``metrics`` is None on ranks other than 0). Collective on the world.
    """
    if spec is not None:
        config, process = spec.config, spec.process
    process = process or ProcessOptions(timeout_s=timeout_s)
    rank, world = (init_from_env(process.timeout_s, process.interface, process.threads) if in_launched_worker()
                   else (0, 1))
    if config.nprocs not in (1, world):
        raise ConfigError(f"--nprocs {config.nprocs} contradicts the launcher's world size {world}")
    if config.metrics_out is not None and rank == 0:
        check_writable(config.metrics_out)
    if config.log_csv is not None and rank == 0:
        check_log_csv(config.log_csv)
    held = spec is not None and spec.launched_locally
    with hold_checkpoint_dir(config, agree=True, held_by_launcher=held):  # rank 0 holds it, unless the launcher does
        return _train_worker(config, spec, process, rank, on_epoch, graph, on_ready)


def _train_worker(config: TrainConfig, spec: RunSpec | None, process: ProcessOptions, rank: int,
                  on_epoch: Callable[[EpochRecord], None] | None, graph: Graph | None,
                  on_ready: Callable[[str, float], None] | None = None) -> Run:
    """`run_worker` once the process group exists and the checkpoint folder is held."""
    world = dist.get_world_size() if dist.is_initialized() else 1
    check_checkpoint_dir(config)
    check_products(config, rank)
    if graph is None:
        prepared = (spec.prepared_graph if spec is not None else None) or \
            (config.dataset if is_prepared(config.dataset) else None)
        if prepared and spec is None:
            refuse_on_prepared(prepared, NodeFiles.of(config))
        graph = open_prepared(prepared) if prepared else load_graph(config)
    check_model_size(graph.num_features, config.hidden, graph.num_classes, config.layers)  # before any estimate
    trained_on = graph
    if spec is None:  # torchrun, or one process: every worker reaches the same spec on the same graph
        say = print_now if rank == 0 and not config.quiet else None
        shared = blocks_split_by(split_over_world) if world > 1 else contextlib.nullcontext()
        with shared:  # each block statistic computed once in the world, not once per worker
            resolved, shape, trained_on = resolve_run(config, graph, world, device_type=default_device().type,
                                                      say=say)
        spec = RunSpec(resolved, shape, process)
    if not spec.launched_locally:  # the local launcher checked it before starting the workers
        check_memory(spec.config, trained_on, world, shape=spec.shape)

    trained, model, hosts = _train_watched(spec, trained_on, on_epoch if rank == 0 else None, rank, on_ready)
    if dist.is_initialized():  # only after success: tearing down a group with a dead peer can abort
        dist.destroy_process_group()
    metrics = None
    if rank == 0:
        metrics = grid_metrics(spec, graph, trained, hosts)
        if spec.config.log_csv is not None:
            write_epoch_csv(spec.config.log_csv, metrics)
        if spec.config.metrics_out is not None:
            write_metrics(spec.config.metrics_out, metrics)
    return Run(graph, trained.result, metrics, model)


def print_now(line: str) -> None:
    """Print ``line`` at once (a reason rank 0 gives for an automatic choice)."""
    print(line, flush=True)


def _train_watched(spec: RunSpec, graph, on_epoch, rank: int,
                   on_ready: Callable[[str, float], None] | None = None) -> tuple[TrainedGrid, object, HostMap]:
    """`train_on_grid` (returning this rank's model) after gathering where each rank runs and checking that
    every host reads the same prepared folder (a user's; not the local launcher's own); on a run that spans
    hosts, with heartbeats, so that a lost peer's one-line error names the lost ranks and hosts. Returns
    (`TrainedGrid`, model, `HostMap`). Collective on the world."""
    hosts = gather_host_map()
    if isinstance(graph, PreparedGraph) and not spec.launched_locally:
        check_same_prepared_graph(graph.folder, hosts.labels)
    liveness = Liveness(hosts, rank).start() if hosts.spans_hosts and "MASTER_ADDR" in os.environ else None
    try:
        trained, model = train_on_grid(spec.config, graph, on_epoch, return_model=True, hosts=hosts,
                                       on_ready=on_ready, shape=spec.shape)
        return trained, model, hosts
    except CollectiveError as error:  # a peer was lost: say which ranks and hosts, if it can be told
        raise with_lost_peers(error, liveness) from error
    finally:
        if liveness is not None:
            liveness.stop()
