"""From a `TrainConfig` to a finished run: load the graph, build the aggregation, train, write metrics."""

from __future__ import annotations

import os
from collections.abc import Callable

from gridgnn.config import TrainConfig
from gridgnn.data.edge_features import operator_rows
from gridgnn.data.graph import Graph
from gridgnn.data.operators import operator_matrix
from gridgnn.errors import ConfigError
from gridgnn.grid.process_grid import default_device
from gridgnn.nn.layout import LocalLayout
from gridgnn.nn.models import check_edge_inputs, operator_of
from gridgnn.run_spec import ProcessOptions, RunSpec
from gridgnn.spmm.local import LocalSpMM
from gridgnn.train.checkpoint.lock import hold_checkpoint_dir
from gridgnn.train.checkpoint.resume import check_checkpoint_dir, fit_resumable
from gridgnn.train.loop.task_choice import settle_task
from gridgnn.train.loop.trainer import EpochRecord, Trainer
from gridgnn.train.outputs.epoch_csv import check_log_csv, write_epoch_csv
from gridgnn.train.outputs.metrics import build_metrics, check_writable, write_metrics
from gridgnn.train.outputs.products import check_products, write_products
from gridgnn.train.outputs.tensorboard_log import TensorBoardLog, check_tensorboard
from gridgnn.train.run.base import Run, load_graph
from gridgnn.train.run.memory_guard import check_memory


def build_aggregation(config: TrainConfig, graph: Graph) -> LocalLayout:
    """The single-process layout of ``config.model``: ``x -> M x`` with M its operator of the global graph
    (`gridgnn.data.operators`; Â = D^-1/2 (A + I) D^-1/2 for GCN), on the GPU where CUDA is
    present (so that the model and features follow it), else the CPU (`default_device`)."""
    if config.algo != "local":
        raise ConfigError(f"algorithm {config.algo!r} is not available in a single process; use --algo local")
    operator = operator_of(config.model)
    matrix = operator_matrix(operator, graph.adj)
    layout = LocalLayout(LocalSpMM(matrix, device=default_device()), operator)
    layout.set_edge_features(operator_rows(graph.adj, graph.edge_attr, matrix))  # for a model that passes messages
    return layout


def run_training(config: TrainConfig, *, graph: Graph | None = None,
                 on_epoch: Callable[[EpochRecord], None] | None = None, timeout_s: float = 300.0,
                 on_ready: Callable[[str, float], None] | None = None, spec: RunSpec | None = None,
                 process: ProcessOptions | None = None) -> Run:
    """Train as ``config`` says; writes ``config.metrics_out`` (atomically) when set.

    A distributed ``config.algo`` makes this process one worker of the grid (`run_worker`): alone when no
    launcher started it (a 1-process grid), else rank RANK of WORLD_SIZE; ``timeout_s`` bounds every
    collective there. Only rank 0's `Run` carries metrics. ``on_ready(label, seconds)`` is called on rank 0
    once every rank of a grid has built its blocks (label e.g. ``"2d 2x2 on 4 processes"``). ``spec``: in a
    worker of the local launcher, the run it resolved (its configuration replaces ``config``); ``process``:
    how a worker joins its group (`ProcessOptions`; default: ``timeout_s`` alone).

    With ``config.log_csv`` rank 0 writes the per-epoch CSV file (`gridgnn.train.outputs.epoch_csv`).
    The output paths are checked before any work, so a bad path fails in a second, not after training.
    With ``config.tensorboard``, rank 0 logs every epoch there (`gridgnn.train.outputs.tensorboard_log`).
    """
    config = spec.config if spec is not None else config
    if config.tensorboard is None or int(os.environ.get("RANK", "0")) != 0:
        return _run(config, graph, on_epoch, timeout_s, on_ready, spec, process)
    check_tensorboard(config.tensorboard)
    log = TensorBoardLog(config.tensorboard)
    run = None
    try:
        run = _run(config, graph, log.wrap(on_epoch), timeout_s, on_ready, spec, process)
    finally:
        log.finish(run.metrics if run is not None else None)
    return run


def _run(config: TrainConfig, graph: Graph | None, on_epoch, timeout_s: float, on_ready, spec: RunSpec | None,
         process: ProcessOptions | None) -> Run:
    if spec is not None:
        config = spec.config
    if spec is None and "WORLD_SIZE" not in os.environ:  # one process: nothing to distribute (a spec is resolved)
        from gridgnn.train.run.resolve import resolve_auto

        config = resolve_auto(config, graph, 1)
    if config.algo != "local":
        from gridgnn.train.run.worker import run_worker

        return run_worker(config, on_epoch, timeout_s=timeout_s, graph=graph, on_ready=on_ready, spec=spec,
                          process=process)
    if config.metrics_out is not None:
        check_writable(config.metrics_out)
    if config.log_csv is not None:
        check_log_csv(config.log_csv)
    with hold_checkpoint_dir(config):
        return _train_local(config, graph, on_epoch)


def _train_local(config: TrainConfig, graph: Graph | None, on_epoch) -> Run:
    check_checkpoint_dir(config)
    check_products(config)
    if graph is None:
        graph = load_graph(config)
    check_edge_inputs(config, graph.num_edge_features)
    config = settle_task(config, graph)
    check_memory(config, graph, 1)
    trainer = Trainer(config, graph, build_aggregation(config, graph))
    say = None if config.quiet else (lambda: print_line(config.task_reason))
    result, point = fit_resumable(trainer, config, graph, on_epoch, grid={"algo": "local", "world_size": 1},
                                  on_start=say)
    write_products(config, trainer, graph, result)
    metrics = build_metrics(config, graph, result, resumed_from=point, device=trainer.layout.device.type)
    if config.log_csv is not None:
        write_epoch_csv(config.log_csv, metrics)
    if config.metrics_out is not None:
        write_metrics(config.metrics_out, metrics)
    return Run(graph, result, metrics, trainer.model)


def print_line(line: str) -> None:
    """Print ``line`` at once (a run's statements before its first epoch)."""
    print(line, flush=True)
