"""One run on P local workers, from a `TrainConfig`: the library path behind ``gridgnn train --nprocs P``,
``gridgnn predict --nprocs P`` and ``gridgnn.fit(..., nprocs=P)``.

`launch_workers` validates the grid in this process (one clear line before any worker starts), holds the
checkpoint folder, loads and prepares the graph once, resolves the run (`gridgnn.train.run.resolve.resolve_run`),
writes the run spec and starts the workers (`gridgnn.launch.local`). Not collective: it is the launcher.
"""

from __future__ import annotations

import gc
import os
import signal
import tempfile

from gridgnn.config import TrainConfig
from gridgnn.errors import ConfigError
from gridgnn.run_spec import ProcessOptions, RunSpec

MAX_LOCAL_WORKERS = 64
"""The most workers `--nprocs` starts on one machine (each is a full Python process)."""


def launch_workers(config: TrainConfig, process: ProcessOptions, *, graph=None, command: str = "train",
                   model_file: str | None = None, predict_split: str | None = None) -> int:
    """Run ``config`` (``command``: train or predict with ``model_file`` and ``predict_split``) on
    ``config.nprocs`` local workers that run as ``process`` says (``threads`` None: the cores shared among them);
    ``graph``: an in-memory graph to train on instead of loading ``config.dataset``. Returns 0 or the first
    failing worker's status; bad input raises `ConfigError` before any worker starts."""
    from gridgnn.limits import check_threads
    from gridgnn.train.checkpoint.lock import hold_checkpoint_dir
    from gridgnn.train.checkpoint.resume import check_checkpoint_dir, checkpoint_to_resume
    from gridgnn.train.outputs.metrics import check_writable
    from gridgnn.train.outputs.products import check_products
    from gridgnn.train.run.resolve import grid_shape_for

    check_threads(process.threads)
    shape = grid_shape_for(config, config.nprocs) if config.algo != "auto" else None  # auto: once chosen
    if config.nprocs > MAX_LOCAL_WORKERS:
        raise ConfigError(f"--nprocs {config.nprocs} is more than {MAX_LOCAL_WORKERS} workers on one machine; "
                          "use torchrun across nodes for larger grids")
    if config.metrics_out is not None:
        check_writable(config.metrics_out)
    if config.tensorboard is not None:
        from gridgnn.train.outputs.tensorboard_log import check_tensorboard

        check_tensorboard(config.tensorboard)
    with hold_checkpoint_dir(config):  # held here for the workers (their run spec says so)
        check_checkpoint_dir(config)
        check_products(config)
        checkpoint_to_resume(config)  # a damaged checkpoint is reported here, before any worker starts
        # A SIGTERM (Slurm's scancel, kill) or SIGHUP (the terminal closed) must still stop the workers and
        # remove the prepared graph; after a SIGKILL the workers die with this process (gridgnn.launch.orphans).
        previous = {sig: signal.signal(sig, _exit_on_signal) for sig in (signal.SIGTERM, signal.SIGHUP)}
        try:
            return _prepare_and_launch(config, process, shape, graph, command, model_file, predict_split)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _exit_on_signal(signum: int, frame) -> None:
    # once: a second SIGTERM/SIGHUP must not cut short the stopping of the workers or the folder's removal
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    raise SystemExit(128 + signum)


def _prepare_and_launch(config: TrainConfig, process: ProcessOptions, shape, graph, command: str,
                        model_file: str | None, predict_split: str | None = None) -> int:
    from dataclasses import replace

    from gridgnn.launch.local import launch_local, worker_threads
    from gridgnn.launch.orphans import PREPARED_PREFIX, mark_prepared_folder, remove_orphaned_folders

    remove_orphaned_folders()  # left by launchers killed with SIGKILL
    with tempfile.TemporaryDirectory(prefix=PREPARED_PREFIX) as folder:
        mark_prepared_folder(folder)
        threads = worker_threads(config.nprocs, process.threads)
        spec = prepare_for_workers(config, folder, replace(process, threads=threads), shape=shape,
                                   command=command, model_file=model_file, graph=graph, predict_split=predict_split)
        spec_path = spec.write(folder)
        if not spec.config.quiet:
            if command == "train" and spec.config.task_reason is not None:
                print(spec.config.task_reason, flush=True)  # what the run trains: its first line
            if spec.config.auto_reason is not None:
                print(spec.config.auto_reason, flush=True)
            from gridgnn.config import ExecutionOptions
            from gridgnn.plan.execution import metis_note

            if (note := metis_note(ExecutionOptions.of(config))) is not None:
                print(note, flush=True)
            print(f"starting   {config.nprocs} workers, {threads} thread{'s' * (threads > 1)} each", flush=True)
        return launch_local(str(spec_path), config.nprocs, threads, watch_stdout=not spec.config.quiet)


def prepare_for_workers(config: TrainConfig, folder: str, process: ProcessOptions, *, shape=None,
                        command: str = "train", model_file: str | None = None, graph=None,
                        predict_split: str | None = None) -> RunSpec:
    """Load, check and normalize the graph once (or take the in-memory ``graph``), into ``folder`` for the
    workers to memory-map (unless it is a folder from ``gridgnn prepare``), and resolve the run on it, once
    (`gridgnn.train.run.resolve.resolve_run`: the grid, the vertex order, the auto choices; ``shape``: the grid
    already validated, None for ``--algo auto``). Returns the `RunSpec` of the workers, with this process's
    peak resident memory. The graph is freed here before any worker starts."""
    import torch

    from gridgnn.data.attach import NodeFiles, refuse_on_prepared
    from gridgnn.data.prepared import is_prepared, open_prepared, prepare_graph
    from gridgnn.grid.process_grid import default_device
    from gridgnn.nn.models import operator_of
    from gridgnn.nn.stack import check_model_size
    from gridgnn.train.loop.distributed import peak_memory_bytes
    from gridgnn.train.run.memory_guard import check_memory
    from gridgnn.train.run.resolve import resolve_run
    from gridgnn.train.run.training import load_graph

    prepared = graph is None and is_prepared(config.dataset)
    if prepared:
        refuse_on_prepared(config.dataset, NodeFiles.of(config))
    if graph is None:
        graph = open_prepared(config.dataset) if prepared else load_graph(config)
    check_model_size(graph.num_features, config.hidden, graph.num_classes, config.layers)  # before any estimate
    config, shape, graph = resolve_run(config, graph, config.nprocs, shape=shape, on_grid=False,
                                       device_type=default_device().type, check=_launcher_checks(graph, prepared))
    check_memory(config, graph, config.nprocs, config.nprocs, shape=shape, started=False)  # workers to come
    if config.init_from is not None and command == "train":
        from gridgnn.train.checkpoint.init_from import initial_weights

        initial_weights(config, graph.num_features, graph.num_classes)  # a file that does not fit: one line here
    if not prepared:
        prepare_graph(graph, folder, operator=operator_of(config.model))
    del graph
    gc.collect()
    return RunSpec(config, shape, process, command=command, model_file=model_file, predict_split=predict_split,
                   prepared_graph=config.dataset if prepared else folder, launcher_pid=os.getpid(),
                   launcher_peak_memory_bytes=peak_memory_bytes(torch.device("cpu")))


def _launcher_checks(graph, prepared: bool):
    """The launcher's refusals once the grid is known, before the graph is reordered: a prepared folder made
    for another model, and more processes than the vertices allow (one line each)."""
    def check(config: TrainConfig, shape) -> None:
        from gridgnn.cost.stages import stage_layout
        from gridgnn.train.run.grid_train import model_operator

        if prepared:
            model_operator(config, graph)
        stage_layout(shape.algo, shape.sizes, graph.num_nodes)  # refuses more blocks than vertices
    return check
