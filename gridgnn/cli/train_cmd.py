"""``gridgnn train``: flags -> `TrainConfig` -> run, with per-epoch lines and a final summary."""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import signal
import sys
import tempfile

import torch

from gridgnn.config import ALGOS, ORDERS, TrainConfig
from gridgnn.cost.spmm_cost import partition_stats
from gridgnn.data.prepared import is_prepared, open_prepared, prepare_graph
from gridgnn.errors import ConfigError
from gridgnn.grid.network import INTERFACE_ENV, check_interface
from gridgnn.grid.process_grid import default_device
from gridgnn.launch.local import launch_local
from gridgnn.train import EpochRecord, Run, run_training
from gridgnn.train.auto import auto_flags, choose_configuration
from gridgnn.train.distributed import peak_memory_bytes
from gridgnn.train.metrics import check_writable
from gridgnn.train.resume import check_checkpoint_dir, checkpoint_to_resume
from gridgnn.train.run import load_graph
from gridgnn.train.run_distributed import (
    AUTO_REASON_ENV,
    LAUNCHER_PEAK_ENV,
    PREPARED_ENV,
    grid_shape_for,
    in_launched_worker,
)

_DEFAULTS = TrainConfig()
MAX_LOCAL_WORKERS = 64
"""The most workers `--nprocs` starts on one machine (each is a full Python process)."""
_DEF = " (default: %(default)s)"


def add_parser(commands: argparse._SubParsersAction) -> None:
    """Register ``train`` and its flags (defaults come from `TrainConfig`)."""
    parser = commands.add_parser("train", help="train a GCN on one dataset",
                                 description="Train a GCN full-graph on one dataset.")
    add_dataset_arguments(parser)
    model = parser.add_argument_group("model and optimizer")
    model.add_argument("--layers", type=int, default=_DEFAULTS.layers, help="number of GCN layers" + _DEF)
    model.add_argument("--hidden", type=int, default=_DEFAULTS.hidden, help="hidden width" + _DEF)
    model.add_argument("--dropout", type=float, default=_DEFAULTS.dropout, help="dropout probability" + _DEF)
    model.add_argument("--lr", type=float, default=_DEFAULTS.lr, help="Adam learning rate" + _DEF)
    model.add_argument("--weight-decay", type=float, default=_DEFAULTS.weight_decay,
                       help="Adam weight decay on all parameters" + _DEF)
    model.add_argument("--epochs", type=int, default=_DEFAULTS.epochs, help="training epochs" + _DEF)
    model.add_argument("--order", choices=ORDERS, default=_DEFAULTS.order,
                       help="product order of every layer: aggregate-first (ÂH)W as CAGNET, transform-first "
                            "Â(HW), or auto: the narrower width goes through Â" + _DEF)
    run = parser.add_argument_group("run")
    run.add_argument("--algo", choices=ALGOS, default=_DEFAULTS.algo,
                     help="aggregation algorithm; local = one process; auto = the grid `gridgnn plan` ranks "
                          "best for --nprocs (it says which and why)" + _DEF)
    run.add_argument("--metrics-out", metavar="FILE", default=None, help="write the metrics JSON to FILE")
    ckpt = parser.add_argument_group("checkpoints")
    ckpt.add_argument("--checkpoint-dir", metavar="DIR", default=None,
                      help="save resumable checkpoints in DIR (created if missing)")
    ckpt.add_argument("--checkpoint-every", type=int, metavar="K", default=_DEFAULTS.checkpoint_every,
                      help="save after every K-th epoch and after the last" + _DEF)
    ckpt.add_argument("--keep-checkpoints", type=int, metavar="N", default=_DEFAULTS.keep_checkpoints,
                      help="keep the newest N checkpoints" + _DEF)
    ckpt.add_argument("--resume", action="store_true",
                      help="continue from the newest checkpoint in --checkpoint-dir (start fresh if there is "
                           "none); automatic when torchrun restarts the job")
    grid = parser.add_argument_group("process grid (distributed algorithms)")
    grid.add_argument("--nprocs", type=int, default=_DEFAULTS.nprocs,
                      help="start this many local workers (under torchrun: its world size)" + _DEF)
    grid.add_argument("--replication", type=int, default=_DEFAULTS.replication,
                      help="1.5d replication factor c (must divide P)" + _DEF)
    grid.add_argument("--grid", default=None, metavar="SHAPE",
                      help="grid shape: 2d PRxPC (e.g. 2x3; default the most square), 3d QxQxD (default "
                           "cube root), 1.5d (P/c)xc")
    grid.add_argument("--overlap", action=argparse.BooleanOptionalAction, default=_DEFAULTS.overlap,
                      help="run the next SpMM stage's communication behind the current stage's product "
                           "(same numbers)" + _DEF)
    grid.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS",
                      help="limit on any one collective before the run fails" + _DEF)
    grid.add_argument("--interface", default=None, metavar="NAME",
                      help="network interface the workers talk on across hosts (sets GLOO_SOCKET_IFNAME; "
                           "default: GLOO_SOCKET_IFNAME, else the interface that reaches the rendezvous host)")
    grid.add_argument("--threads", type=int, default=None,
                      help="compute threads per worker (default: cores / workers)")
    verbosity = run.add_mutually_exclusive_group()
    verbosity.add_argument("--quiet", action="store_true", help="print nothing but errors")
    verbosity.add_argument("--progress", action="store_true", default=None,
                           help="one line per epoch even when stdout is not a terminal or CI is set")
    parser.set_defaults(handler=run_train)


def add_dataset_arguments(parser: argparse.ArgumentParser, *, positional: bool = False) -> None:
    """Dataset selection flags shared by ``train`` and ``info``."""
    data = parser.add_argument_group("data")
    if positional:
        data.add_argument("dataset", metavar="DATASET", help="dataset name, generator spec or path")
    else:
        data.add_argument("--dataset", default=_DEFAULTS.dataset, metavar="NAME|SPEC|PATH",
                          help="dataset name (cora, ...), generator spec (csbm:nodes=20000) or path" + _DEF)
    data.add_argument("--data-root", metavar="DIR", default=None,
                      help="folder holding the named datasets (else $GRIDGNN_DATA_ROOT, else the default)")
    data.add_argument("--directed", action="store_true", help="keep edge direction (default: symmetrize)")
    data.add_argument("--normalize-features", action=argparse.BooleanOptionalAction, default=None,
                      help="row-normalize features (default: as the dataset prescribes)")
    data.add_argument("--seed", type=int, default=_DEFAULTS.seed,
                      help="seed of initialization, dropout, random splits and generators" + _DEF)


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The `TrainConfig` the flags describe (validated; raises `ConfigError`)."""
    return TrainConfig(
        dataset=args.dataset, data_root=args.data_root, directed=args.directed,
        normalize_features=args.normalize_features, layers=args.layers, hidden=args.hidden,
        dropout=args.dropout, lr=args.lr, weight_decay=args.weight_decay, epochs=args.epochs,
        seed=args.seed, algo=args.algo, order=args.order, metrics_out=args.metrics_out,
        quiet=args.quiet, progress=args.progress, nprocs=args.nprocs, replication=args.replication,
        grid=args.grid, overlap=args.overlap, checkpoint_dir=args.checkpoint_dir,
        checkpoint_every=args.checkpoint_every, keep_checkpoints=args.keep_checkpoints, resume=args.resume,
    )


def show_progress(config: TrainConfig) -> bool:
    """Per-epoch lines: forced by ``progress``, off when quiet, else only on a terminal outside CI."""
    if config.progress is not None:
        return config.progress
    return not config.quiet and sys.stdout.isatty() and not os.environ.get("CI")


def format_epoch(record: EpochRecord, epochs: int) -> str:
    width = len(str(epochs))
    return (f"epoch {record.epoch:>{width}}/{epochs}  loss {record.loss:.4f}  train {record.train_acc:.4f}"
            f"  val {record.val_acc:.4f}  test {record.test_acc:.4f}  {1000 * record.time_s:.1f} ms")


def format_summary(config: TrainConfig, run: Run) -> str:
    """The closing lines: dataset, final and best-validation accuracies, mean epoch time."""
    data, final = run.metrics["dataset"], run.metrics["final"]
    total = sum(record.time_s for record in run.result.epochs)
    lines = [
        f"dataset    {data['name']}: {data['num_nodes']} nodes, {data['num_edges']} stored edges, "
        f"{data['num_features']} features, {data['num_classes']} classes",
        "split      " + "  ".join(f"{name} {count}" for name, count in data["split"].items())
        + ("  (an empty split's accuracy reads 0)" if 0 in data["split"].values() else ""),
        f"model      GCN {config.layers} layers, hidden {config.hidden}, order {config.order}, "
        f"algo {config.algo}, seed {config.seed}",
        f"final      train {final['train_acc']:.4f}  val {final['val_acc']:.4f}  "
        f"test {final['test_acc']:.4f}",
        f"best val   {final['best_val_acc']:.4f} at epoch {final['best_epoch']}, "
        f"test there {final['test_acc_at_best_val']:.4f}",
        f"time       {1000 * final['mean_epoch_time_s']:.2f} ms per epoch (training step), "
        f"{total:.2f} s over {len(run.result.epochs)} epochs",
    ]
    if "resumed_from" in run.metrics:
        point = run.metrics["resumed_from"]
        lines.append(f"resumed    from {point['checkpoint']} (epoch {point['epoch']})")
    if config.checkpoint_dir is not None:
        lines.append(f"checkpoint {config.checkpoint_dir}")
    if config.metrics_out is not None:
        lines.append(f"metrics    {config.metrics_out}")
    return "\n".join(lines)


def run_train(args: argparse.Namespace) -> int:
    """Handler of ``gridgnn train``; returns 0 on success (errors propagate to `main`)."""
    config = config_from_args(args)
    if args.interface is not None:  # checked here (one line, exit 2); workers read it from the environment
        check_interface(args.interface)
        os.environ[INTERFACE_ENV] = args.interface
    if config.algo != "local" and config.nprocs > 1 and not in_launched_worker():
        return launch_workers(config, args)
    if config.algo == "auto" and not in_launched_worker():  # one process: nothing to distribute
        config, reason = choose_configuration(config, None, 1)
        config = dataclasses.replace(config, auto_reason=reason)
        if not config.quiet:
            print(reason, flush=True)
    if int(os.environ.get("RANK", "0")) != 0:
        config.quiet, config.progress = True, False
    on_epoch = None
    if show_progress(config):
        def on_epoch(record: EpochRecord) -> None:
            print(format_epoch(record, config.epochs), flush=True)
    run = run_training(config, on_epoch=on_epoch, timeout_s=args.timeout)
    if not config.quiet and run.metrics is not None:
        print(format_summary(config, run))
        if any("comm" in epoch for epoch in run.metrics["epochs"]):
            print(format_comm_summary(run.metrics))
    return 0


def launch_workers(config: TrainConfig, args: argparse.Namespace) -> int:
    """Validate the grid here (one clear line, before any process starts), then run P local workers."""
    if config.algo != "auto":
        grid_shape_for(config, config.nprocs)
    if config.nprocs > MAX_LOCAL_WORKERS:
        raise ConfigError(f"--nprocs {config.nprocs} is more than {MAX_LOCAL_WORKERS} workers on one machine; "
                          "use torchrun across nodes for larger grids")
    if config.metrics_out is not None:
        check_writable(config.metrics_out)
    if args.threads is not None and args.threads < 1:
        raise ConfigError(f"--threads must be at least 1, got {args.threads}")
    check_checkpoint_dir(config)
    checkpoint_to_resume(config)  # a damaged checkpoint is reported here, before any worker starts
    # A SIGTERM (Slurm's scancel, kill) must still stop the workers and remove the prepared graph.
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        return _prepare_and_launch(config, args)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _exit_on_sigterm(signum: int, frame) -> None:
    raise SystemExit(128 + signum)


def _prepare_and_launch(config: TrainConfig, args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="gridgnn-prepared-") as folder:
        config, setup_peak = prepare_for_workers(config, folder)
        graph_folder = config.dataset if is_prepared(config.dataset) else folder
        env = {PREPARED_ENV: graph_folder, LAUNCHER_PEAK_ENV: str(setup_peak)}
        argv = list(args.argv)
        if config.auto_reason is not None:
            env[AUTO_REASON_ENV] = config.auto_reason
            argv += auto_flags(config)  # the workers run the chosen configuration (last flags win)
            if not config.quiet:
                print(config.auto_reason, flush=True)
        return launch_local(argv, config.nprocs, args.threads, extra_env=env)


def prepare_for_workers(config: TrainConfig, folder: str) -> tuple[TrainConfig, int]:
    """Load, check and normalize the graph once, into ``folder`` for the workers to memory-map (unless it is
    a folder from ``gridgnn prepare``); resolve ``--algo auto`` on it. Returns the configuration to run and
    this process's peak resident memory in bytes. The graph is freed before any worker starts."""
    graph = open_prepared(config.dataset) if is_prepared(config.dataset) else load_graph(config)
    if config.algo == "auto":
        config, reason = choose_configuration(config, graph, config.nprocs, default_device().type)
        config = dataclasses.replace(config, auto_reason=reason)
    shape = grid_shape_for(config, config.nprocs)
    partition_stats(shape.algo, shape, graph.num_nodes)  # too many processes for the vertices: say so now
    if not is_prepared(config.dataset):
        prepare_graph(graph, folder)
    del graph
    gc.collect()
    return config, peak_memory_bytes(torch.device("cpu"))


def format_comm_summary(metrics: dict) -> str:
    """Bytes per rank per epoch by phase (mean over epochs, max over ranks) and comm vs compute time."""
    world = metrics["config"]["world_size"]  # epochs restored from a checkpoint may come from another grid
    epochs = [epoch for epoch in metrics["epochs"] if len(epoch.get("comm", {}).get("bytes", [])) == world]
    lines = [f"grid       {metrics['config']['algo']} {metrics['config']['grid_shape']} "
             f"({metrics['config']['world_size']} processes)"]
    phases = epochs[0]["comm"]["by_phase"]
    parts = []
    for phase in phases:
        per_rank = [sum(e["comm"]["by_phase"][phase][r] for e in epochs) / len(epochs)
                    for r in range(len(epochs[0]["comm"]["bytes"]))]
        if max(per_rank) > 0:
            parts.append(f"{phase} {_human_bytes(max(per_rank))}")
    total = max(sum(e["comm"]["bytes"][r] for e in epochs) / len(epochs)
                for r in range(len(epochs[0]["comm"]["bytes"])))
    lines.append(f"comm       {_human_bytes(total)} per rank per epoch (max over ranks): "
                 + (", ".join(parts) or "none"))
    comm_t = sum(e["comm_time_s"] for e in epochs) / len(epochs)
    exposed_t = sum(e["exposed_comm_time_s"] for e in epochs) / len(epochs)
    compute_t = sum(e["compute_time_s"] for e in epochs) / len(epochs)
    lines.append(f"time split {1000 * comm_t:.2f} ms communication ({1000 * exposed_t:.2f} ms of it not hidden "
                 f"behind computation), {1000 * compute_t:.2f} ms compute per epoch (max over ranks)")
    return "\n".join(lines)


def _human_bytes(value: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.1f} {unit}" if unit != "B" else f"{int(value)} B"
        value /= 1024
    return f"{value:.1f} GiB"
