"""``gridgnn train``: flags -> `TrainConfig` -> the library's run, and the lines it prints (per-epoch lines,
the non-finite warning, the grid's ready line, the final summary).

What a run takes is the library's: the processes (`gridgnn.train.run.world`: the default ``--algo``, a grid on
one process refused, who launches workers, threads), the launch (`gridgnn.launch.workers`) and the run
watched as it goes (`gridgnn.train.run.watched`). Exit statuses: 0, or `EXIT_NONFINITE`; errors propagate to
`gridgnn.cli.main`.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from gridgnn.cli.model_args import add_model_arguments, model_label
from gridgnn.cli.node_file_flags import add_node_file_arguments
from gridgnn.cli.output_flags import add_memory_arguments, add_output_arguments, output_config
from gridgnn.config import (
    ALGOS,
    COMM_PRECISION_CHOICES,
    COMMS,
    LOWER_IS_BETTER,
    LR_DEFAULTS,
    LR_SCHEDULES,
    METRIC_CHOICES,
    ORDERS,
    REORDER_CHOICES,
    TASK_CHOICES,
    TrainConfig,
)
from gridgnn.run_spec import ProcessOptions, RunSpec

if TYPE_CHECKING:
    from gridgnn.train import Run

# torch, the data readers and the training stack are imported by the handlers, when a run needs them: the
# parser alone must stay light (`gridgnn --help`, `--version`, `info`, `plan` start in a fraction of a second).

_DEFAULTS = TrainConfig()
EXIT_NONFINITE = 4
"""Exit status of a run that ``--stop-on-nonfinite`` ended at a NaN or infinite loss (metrics written)."""
_DEF = " (default: %(default)s)"


def add_parser(commands: argparse._SubParsersAction) -> None:
    """Register ``train`` and its flags (defaults come from `TrainConfig`)."""
    parser = commands.add_parser("train", help="train a GCN, GraphSAGE, GIN or GAT on one dataset",
                                 description="Train a GCN, GraphSAGE-mean, GIN or GAT full-graph on one dataset.")
    add_dataset_arguments(parser)
    add_task_arguments(parser)
    model = parser.add_argument_group("model and optimizer")
    add_model_arguments(model)
    model.add_argument("--layers", type=int, default=_DEFAULTS.layers, help="number of layers" + _DEF)
    model.add_argument("--hidden", type=int, default=_DEFAULTS.hidden, help="hidden width" + _DEF)
    model.add_argument("--dropout", type=float, default=_DEFAULTS.dropout, help="dropout probability" + _DEF)
    model.add_argument("--lr", type=float, default=_DEFAULTS.lr, help="Adam learning rate" + _DEF)
    model.add_argument("--weight-decay", type=float, default=_DEFAULTS.weight_decay,
                       help="Adam weight decay on all parameters" + _DEF)
    model.add_argument("--epochs", type=int, default=_DEFAULTS.epochs, help="training epochs" + _DEF)
    model.add_argument("--order", choices=ORDERS, default=_DEFAULTS.order,
                       help="product order of every layer: aggregate-first (ÂH)W as CAGNET, transform-first "
                            "Â(HW), or auto: the narrower width goes through Â" + _DEF)
    add_loop_arguments(parser)
    run = parser.add_argument_group("run")
    run.add_argument("--algo", choices=ALGOS, default=None,
                     help="aggregation algorithm; local = one process; auto = the grid `gridgnn plan` ranks "
                          "best for --nprocs (it says which and why); 1d, 1.5d, 2d, 3d need --nprocs P > 1 or "
                          "torchrun (default: local on one process, auto with --nprocs P > 1 or under torchrun)")
    run.add_argument("--metrics-out", metavar="FILE", default=None, help="write the metrics JSON to FILE")
    run.add_argument("--tensorboard", metavar="DIR", default=None,
                     help="log scalars per epoch (loss, accuracies, step time, bytes) as TensorBoard events in DIR "
                          "(needs the tensorboard extra)")
    run.add_argument("--stop-on-nonfinite", action="store_true",
                     help="end training after the first epoch whose loss is NaN or infinite, write the metrics "
                          f"and exit with status {EXIT_NONFINITE} (default: warn once and go on)")
    ckpt = parser.add_argument_group("checkpoints")
    ckpt.add_argument("--checkpoint-dir", metavar="DIR", default=None,
                      help="save resumable checkpoints in DIR (created if missing)")
    ckpt.add_argument("--checkpoint-every", type=int, metavar="K", default=_DEFAULTS.checkpoint_every,
                      help="save after every K-th epoch and after the last" + _DEF)
    ckpt.add_argument("--keep-checkpoints", type=int, metavar="N", default=_DEFAULTS.keep_checkpoints,
                      help="keep the newest N checkpoints" + _DEF)
    ckpt.add_argument("--resume", action="store_true",
                      help="continue from the newest checkpoint in --checkpoint-dir (start fresh if there is "
                           "none); automatic when torchrun restarts the job. The grid, --order, --epochs, --lr "
                           "and --weight-decay may differ from the checkpoint's run; the data and model may not")
    ckpt.add_argument("--init-from", metavar="MODEL_FILE", default=None,
                      help="start from the weights of a model file (--save-model) of the same architecture "
                           "(--model, --layers, --hidden, dataset widths) instead of a random initialization; "
                           "the optimizer and epochs start afresh")
    grid = parser.add_argument_group("process grid (distributed algorithms)")
    grid.add_argument("--nprocs", type=int, default=_DEFAULTS.nprocs,
                      help="start this many local workers (under torchrun: its world size)" + _DEF)
    grid.add_argument("--replication", type=int, default=_DEFAULTS.replication,
                      help="1.5d replication factor c (must divide P)" + _DEF)
    grid.add_argument("--grid", default=None, metavar="SHAPE",
                      help="grid shape: 2d PRxPC (e.g. 2x3; default the most square), 3d QxQxD (default "
                           "cube root), 1.5d (P/c)xc")
    _switch(grid, "--overlap", "run the next SpMM stage's communication behind the current stage's product "
                               "(same numbers)", planned=False)
    grid.add_argument("--comm", choices=COMMS, default="auto",
                      help="SpMM communication: dense moves whole blocks of X; sparse only the rows each "
                           "process's Â block touches (index sets exchanged once at set-up); cover (1d, 1.5d) each "
                           "pair's minimum vertex cover, rows of X and partial sums; auto the one the planner "
                           "prices lower" + _DEF)
    grid.add_argument("--comm-precision", choices=COMM_PRECISION_CHOICES, default=_DEFAULTS.comm_precision,
                      help="wire precision of the activations and their gradients that the SpMMs and dense phases "
                           "move: fp32 (exact), bf16, fp16 (half the bytes), int8 (about a quarter: one "
                           "power-of-two scale per row, seeded stochastic rounding); sums are formed in float32, "
                           "weight gradients and the loss stay float32; changes results slightly, so the planner "
                           "lowers it only when asked: auto takes bf16 where the profile predicts it at least 5%% "
                           "faster, and says so" + _DEF)
    _switch(grid, "--cache-panels", "2d and 3d: receive the Â panels of the process's grid row once, at set-up, "
                                    "and keep them (more graph memory: up to pc times on 2d, q on 3d), so each step "
                                    "moves only X; 1d and 1.5d never move Â and ignore it")
    _switch(grid, "--full-feature-rows", "2d and 3d: every process keeps all feature columns of its rows (more "
                                         "feature memory: up to pc times), so the first layer's product with the "
                                         "features moves nothing; it applies when that layer transforms first (GAT "
                                         "always; else --order auto with fewer hidden than input channels), and 1d "
                                         "and 1.5d ignore it")
    _switch(grid, "--defer-weight-gather", "2d and 3d: each process updates only the column block of each weight "
                                           "it reads and gathers whole weights only when something reads them (a "
                                           "checkpoint, the end), not in every step (same numbers); 1d and 1.5d "
                                           "ignore it")
    grid.add_argument("--reorder", choices=REORDER_CHOICES, default="auto",
                      help="renumber the vertices before sharding: random (balance), rcm (band), metis (k-way "
                           "cut into the grid's row blocks, equal vertices), metis-nnz (equal non-zeros), "
                           "metis-balanced (equal vertices and non-zeros), auto (the planner prices the graph's "
                           "own order and metis-balanced, when pymetis is installed); "
                           "results stay in original ids" + _DEF)
    grid.add_argument("--profile", default=None, metavar="NAME|FILE",
                      help="machine profile the planner prices the free execution options with (as gridgnn "
                           "plan --profile; default: the profile of the device the run is on)")
    grid.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS",
                      help="limit on any one collective before the run fails" + _DEF)
    grid.add_argument("--interface", default=None, metavar="NAME",
                      help="network interface the workers talk on across hosts (sets GLOO_SOCKET_IFNAME; "
                           "default: GLOO_SOCKET_IFNAME, else the interface that reaches the rendezvous host)")
    grid.add_argument("--threads", type=int, default=None,
                      help="compute threads of each process, with any --algo, under torchrun too (default: "
                           "torch's own on one process, cores / workers on a grid)")
    verbosity = run.add_mutually_exclusive_group()
    verbosity.add_argument("--quiet", action="store_true", help="print nothing but errors")
    verbosity.add_argument("--progress", action="store_true", default=None,
                           help="one line per epoch even when stdout is not a terminal or CI is set")
    run.add_argument("--log-every", type=float, default=ProcessOptions.log_every_s, metavar="SECONDS",
                     help="when stdout is not a terminal (a log: Slurm, nohup, | tee), print an epoch's line "
                          "once at least SECONDS and at least 5%% of the epochs have passed since the last "
                          "(whichever is rarer)" + _DEF)
    add_output_arguments(parser, training=True)
    add_memory_arguments(parser)
    parser.set_defaults(handler=run_train)


def add_loop_arguments(parser: argparse.ArgumentParser) -> None:
    """``--patience``, ``--eval-every``, ``--lr-schedule`` with its parameters, and ``--log-csv``."""
    loop = parser.add_argument_group("training loop")
    loop.add_argument("--patience", type=int, metavar="K", default=_DEFAULTS.patience,
                      help="stop once K evaluations in a row did not improve the validation accuracy; 0: never "
                           "(default: %(default)s)")
    loop.add_argument("--eval-every", type=int, metavar="K", default=_DEFAULTS.eval_every,
                      help="evaluate after every K-th epoch and the last; other epochs have no accuracies "
                           "(default: %(default)s)")
    loop.add_argument("--lr-schedule", choices=LR_SCHEDULES, default=_DEFAULTS.lr_schedule,
                      help="learning rate per epoch: cosine down to --lr-min over --epochs; step: times "
                           "--lr-gamma every --lr-step-size epochs; plateau: times --lr-gamma after more than "
                           "--lr-plateau-patience evaluations without improvement (default: %(default)s)")
    loop.add_argument("--lr-step-size", type=int, metavar="K", default=None,
                      help=f"(step) epochs between two reductions (default: {LR_DEFAULTS['lr_step_size']})")
    loop.add_argument("--lr-gamma", type=float, metavar="G", default=None,
                      help=f"(step, plateau) factor of each reduction, 0 < G < 1 (default: {LR_DEFAULTS['lr_gamma']})")
    loop.add_argument("--lr-min", type=float, metavar="LR", default=None,
                      help="(cosine, plateau) the lowest learning rate, 0 <= LR < --lr (default: 0)")
    loop.add_argument("--lr-plateau-patience", type=int, metavar="K", default=None,
                      help=f"(plateau) evaluations without improvement tolerated before a reduction (default: "
                           f"{LR_DEFAULTS['lr_plateau_patience']})")
    loop.add_argument("--log-csv", metavar="FILE", default=None,
                      help="write one row per epoch (epoch, loss, accuracies, step time, bytes, lr) to FILE, "
                           "for pandas or a spreadsheet")


def loop_config(args: argparse.Namespace) -> dict:
    """The `TrainConfig` fields of `add_loop_arguments`' flags."""
    return {name: getattr(args, name) for name in ("patience", "eval_every", "lr_schedule", "lr_step_size",
                                                  "lr_gamma", "lr_min", "lr_plateau_patience", "log_csv")}


def _switch(group, flag: str, text: str, *, planned: bool = True) -> None:
    """An on/off execution flag (``--x`` / ``--no-x``): unset, the planner decides (`gridgnn.plan.execution`);
    not ``planned``, its default is `TrainConfig`'s field of the same name."""
    if planned:
        group.add_argument(flag, action=argparse.BooleanOptionalAction, default=None,
                           help=text + " (default: the planner decides)")
        return
    group.add_argument(flag, action=argparse.BooleanOptionalAction,
                       default=getattr(_DEFAULTS, flag.removeprefix("--").replace("-", "_")), help=text + _DEF)


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
    add_node_file_arguments(data)
    data.add_argument("--normalize-features", action=argparse.BooleanOptionalAction, default=None,
                      help="row-normalize features (default: as the dataset prescribes)")
    data.add_argument("--seed", type=int, default=_DEFAULTS.seed,
                      help="seed of initialization, dropout, random splits and generators" + _DEF)


def add_task_arguments(parser: argparse.ArgumentParser) -> None:
    """``--task`` and ``--metric`` (`gridgnn.data.targets`, `gridgnn.train.loop.task_metrics`)."""
    task = parser.add_argument_group("task")
    task.add_argument("--task", choices=TASK_CHOICES, default=_DEFAULTS.task,
                      help="what the vertices are trained to predict: multiclass (integer classes, -1 or NaN = "
                           "unlabelled), multilabel (T columns of 0/1, NaN = missing; binary cross-entropy), "
                           "regression (real values, NaN = missing; squared error); auto infers it from the "
                           "targets and the run's first line says which" + _DEF)
    task.add_argument("--metric", choices=METRIC_CHOICES, default=_DEFAULTS.metric,
                      help="how each split is scored: accuracy (multiclass); rocauc, micro-f1 (multilabel); mse, "
                           "mae, r2 (regression); auto: the first of the task's" + _DEF)
    task.add_argument("--standardize-targets", action="store_true",
                      help="regression: learn each target standardized by its training entries' mean and standard "
                           "deviation (the loss in those units); outputs, metrics and files stay in the targets' "
                           "units")


def _shown(value) -> str:
    """A changed setting as the ``resumed`` line prints it (numbers compactly)."""
    return f"{value:g}" if isinstance(value, int | float) else str(value)


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The `TrainConfig` the flags describe (validated; raises `ConfigError`)."""
    return TrainConfig(
        dataset=args.dataset, data_root=args.data_root, directed=args.directed,
        features=args.features, labels=args.labels, split=args.split, edge_features=args.edge_features,
        normalize_features=args.normalize_features, layers=args.layers, hidden=args.hidden,
        dropout=args.dropout, lr=args.lr, weight_decay=args.weight_decay, epochs=args.epochs,
        seed=args.seed, algo=args.algo, order=args.order, metrics_out=args.metrics_out,
        quiet=args.quiet, progress=args.progress, nprocs=args.nprocs, replication=args.replication,
        grid=args.grid, overlap=args.overlap, comm=args.comm, comm_precision=args.comm_precision,
        cache_panels=args.cache_panels,
        full_feature_rows=args.full_feature_rows, defer_weight_gather=args.defer_weight_gather,
        reorder=args.reorder, profile=args.profile, checkpoint_dir=args.checkpoint_dir,
        checkpoint_every=args.checkpoint_every, keep_checkpoints=args.keep_checkpoints, resume=args.resume,
        init_from=args.init_from,
        stop_on_nonfinite=args.stop_on_nonfinite, tensorboard=args.tensorboard,
        **output_config(args), **loop_config(args),
        model=args.model, sage_normalize=args.sage_normalize, gin_eps=args.gin_eps,
        gin_train_eps=args.gin_train_eps, gin_norm=args.gin_norm, heads=args.heads, output_heads=args.output_heads,
        attn_dropout=args.attn_dropout, edge_dim=args.edge_dim, task=args.task, metric=args.metric,
        standardize_targets=args.standardize_targets,
    )


def format_summary(config: TrainConfig, run: Run) -> str:
    """The closing lines: dataset, final and best-validation accuracies, mean epoch time."""
    data, final = run.metrics["dataset"], run.metrics["final"]
    lines = [
        f"dataset    {data['name']}: {data['num_nodes']} nodes, {data['num_edges']} stored edges, "
        f"{data['num_features']} features, " + _outputs(data),
        "split      " + "  ".join(f"{name} {count}" for name, count in data["split"].items())
        + ("  (an empty split's accuracy reads 0)" if 0 in data["split"].values() else ""),
        f"model      {model_label(config.model)} {config.layers} layers, hidden {config.hidden}, order {config.order}, "
        f"algo {config.algo}, seed {config.seed}",
        *_metric_lines(final, data),
        format_time_line(final, len(run.result.epochs), run.result.epochs),
    ]
    lines += loop_lines(config, final)
    if "resumed_from" in run.metrics:
        point = run.metrics["resumed_from"]
        changed = "".join(f", --{name.replace('_', '-')} {_shown(there)} there, {_shown(here)} now"
                          for name, (there, here) in point.get("changed", {}).items())
        lines.append(f"resumed    from {point['checkpoint']} (epoch {point['epoch']}{changed})")
    elif config.init_from is not None:
        lines.append(f"init from  {config.init_from}")
    if config.checkpoint_dir is not None:
        lines.append(f"checkpoint {config.checkpoint_dir}")
    if config.metrics_out is not None:
        lines.append(f"metrics    {config.metrics_out}")
    if config.log_csv is not None:
        lines.append(f"epoch log  {config.log_csv} (CSV)")
    if config.tensorboard is not None:
        lines.append(f"events     {config.tensorboard} (TensorBoard)")
    lines += product_lines(config, run)
    return "\n".join(lines)


def loop_lines(config: TrainConfig, final: dict) -> list[str]:
    """Summary lines of the loop's options: the schedule's last rate, and how ``--patience`` ended the run."""
    lines = []
    if config.lr_schedule != "none" and final.get("final_lr") is not None:
        lines.append(f"lr         {config.lr_schedule} schedule: {config.lr:g} at first, {final['final_lr']:.6g} "
                     "in the last epoch")
    if final.get("stopped_early"):
        lines.append(f"stopped    early at epoch {final['stopped_at_epoch']} of {config.epochs}: no better "
                     f"validation accuracy in {config.patience} evaluations (--patience)")
    elif config.patience:
        lines.append(f"patience   {config.patience} evaluations: never ran out, all {config.epochs} epochs trained")
    return lines


def _outputs(data: dict) -> str:
    """``7 classes``, or ``112 targets (multilabel)``."""
    task = data.get("task", "multiclass")
    if task == "multiclass":
        return f"{data['num_classes']} classes"
    return f"{data['num_classes']} target{'s' * (data['num_classes'] > 1)} ({task})"


def _metric_lines(final: dict, data: dict) -> list[str]:
    """The ``final`` and ``best val`` lines: accuracies for a multiclass run (as before metrics existed),
    else the run's metric by name."""
    if "train_acc" in final:
        return [f"final      train {final['train_acc']:.4f}  val {final['val_acc']:.4f}  "
                f"test {final['test_acc']:.4f}" + _placeholder_note(data),
                f"best val   {final['best_val_acc']:.4f} at epoch {final['best_epoch']}, "
                f"test there {final['test_acc_at_best_val']:.4f}"]
    metric = final["metric"]
    lower = " (lower is better)" if metric in LOWER_IS_BETTER else ""
    return [f"final      {metric}: train {final['train_metric']:.4f}  val {final['val_metric']:.4f}  "
            f"test {final['test_metric']:.4f}{lower}",
            f"best val   {metric} {final['best_val_metric']:.4f} at epoch {final['best_epoch']}, "
            f"test there {final['test_metric_at_best_val']:.4f}"]


def _placeholder_note(data: dict) -> str:
    """A note on the ``final`` line when the accuracies say nothing: one class (as the placeholder labels of
    a graph read without labels), so every prediction is right."""
    if data["num_classes"] != 1:
        return ""
    what = "placeholder labels, " if data["meta"].get("labels") == "none" else ""
    return f"  ({what}one class: accuracy is 1 by construction)"


def format_time_line(final: dict, epochs: int, records) -> str:
    """The ``time`` line: this invocation's epochs (a resumed run names them and the earlier ones apart)."""
    timed = final.get("timed_epochs", epochs)
    total = sum(record.time_s for record in records[epochs - timed:])
    if timed == epochs:
        return (f"time       {1000 * final['mean_epoch_time_s']:.2f} ms per epoch (training step), "
                f"{total:.2f} s over {epochs} epochs")
    if timed == 0:
        return f"time       no epoch ran in this run: all {epochs} came from the checkpoint"
    return (f"time       {1000 * final['mean_epoch_time_s']:.2f} ms per epoch (training step), {total:.2f} s over "
            f"epochs {epochs - timed + 1}-{epochs} run now ({epochs - timed} earlier epochs came from the checkpoint)")


def product_lines(config: TrainConfig, run: Run) -> list[str]:
    """Summary lines naming the files of ``--predictions-out``, ``--embeddings-out`` and ``--save-model``."""
    epoch = run.result.best_epoch if config.weights == "best" else len(run.result.epochs)
    named = [("predictions", config.predictions_out), ("embeddings", config.embeddings_out),
             ("model", config.save_model)]
    return [f"{label:<10} {path} (weights of epoch {epoch}, {config.weights})" for label, path in named if path]


def run_train(args: argparse.Namespace) -> int:
    """Handler of ``gridgnn train``; returns 0 on success (errors propagate to `main`)."""
    from gridgnn.train.run.world import check_process_count, is_rank0, launches_workers, trains_alone, use_threads

    resolve_algo(args)
    use_threads(args.threads)
    config = config_from_args(args)
    if args.interface is not None:  # checked here (one line, exit 2); the run spec hands it to the workers
        from gridgnn.grid.network import check_interface

        check_interface(args.interface)
    check_process_count(config)
    if trains_alone(config):
        from gridgnn.cli.ignored_flags import ignored_flags_line

        if (line := ignored_flags_line(config)) is not None:
            print(line, file=sys.stderr, flush=True)
    if launches_workers(config):
        return launch_workers(config, args)
    return train_here(config, process_options(args), is_rank0())


def process_options(args: argparse.Namespace, threads: int | None = None) -> ProcessOptions:
    """How each process of this run runs (``--timeout``, ``--threads`` or ``threads``, ``--interface``,
    ``--log-every``)."""
    return ProcessOptions(timeout_s=args.timeout, threads=threads or args.threads,
                          interface=getattr(args, "interface", None),
                          log_every_s=getattr(args, "log_every", ProcessOptions.log_every_s))


def train_spec(spec: RunSpec) -> int:
    """A worker of the local launcher: train the run ``spec`` it resolved (rank 0 prints)."""
    from gridgnn.train.run.world import is_rank0

    return train_here(spec.config, spec.process, is_rank0(), spec=spec)


def train_here(config: TrainConfig, process: ProcessOptions, rank0: bool, *, spec: RunSpec | None = None) -> int:
    """Train in this process (alone, or as one worker of a grid, of the run ``spec`` when the local launcher
    resolved it: `gridgnn.train.run.watched.run_watched`); rank 0 prints the progress and summary."""
    from gridgnn.train.run.watched import run_watched

    def warn_nonfinite(epoch: int, loss: float) -> None:
        print(nonfinite_line(config, epoch, loss), file=sys.stderr, flush=True)

    watched = run_watched(config, process, rank0, on_nonfinite=warn_nonfinite, spec=spec,
                          on_ready=print_grid_ready, say=print_now)
    config, run = watched.config, watched.run
    if not config.quiet and run.metrics is not None:
        print(format_summary(config, run))
        if any("comm" in epoch for epoch in run.metrics["epochs"]):
            print(format_comm_summary(run.metrics))
    return EXIT_NONFINITE if run.result.stopped_on_nonfinite else 0


def nonfinite_line(config: TrainConfig, epoch: int, loss: float) -> str:
    """The one line printed (stderr, rank 0) at the first epoch whose training loss is NaN or infinite."""
    head = f"the training loss is {loss} at epoch {epoch}: training diverged (try a smaller --lr)"
    if config.stop_on_nonfinite:
        return f"gridgnn: error: {head}; stopped there by --stop-on-nonfinite (metrics and checkpoints kept)"
    return f"gridgnn: warning: {head}; training goes on (--stop-on-nonfinite stops there)"


def print_now(line: str) -> None:
    """Print ``line`` at once (the planner's reason for what it chose)."""
    print(line, flush=True)


def print_grid_ready(label: str, seconds: float) -> None:
    """The line rank 0 prints once every rank has built its blocks (``label``: e.g. ``2d 2x2 on 4 processes``)."""
    print(f"ready      {label}: set-up took {seconds:.1f} s", flush=True)


def resolve_algo(args: argparse.Namespace) -> None:
    """Settle ``--algo`` in ``args.algo`` (`gridgnn.train.run.world.settle_algo`: ``local`` on one process,
    ``auto`` on several; ``--algo local`` on several is refused with `ConfigError`)."""
    from gridgnn.train.run.world import settle_algo

    args.algo = settle_algo(args.algo, args.nprocs)


def launch_workers(config: TrainConfig, args: argparse.Namespace) -> int:
    """Run ``config`` on ``config.nprocs`` local workers with the process flags of ``args``
    (`gridgnn.launch.workers.launch_workers`, the path `gridgnn.fit` takes too)."""
    from gridgnn.launch.workers import launch_workers as launch

    predicting = args.command == "predict"
    return launch(config, process_options(args), command=args.command, model_file=args.model if predicting else None,
                  predict_split=args.eval_split if predicting else None)


def format_comm_summary(metrics: dict) -> str:
    """Bytes per rank per epoch by phase (mean over epochs, max over ranks) and comm vs compute time."""
    from gridgnn.limits import human_bytes as _human_bytes

    world = metrics["config"]["world_size"]  # epochs restored from a checkpoint may come from another grid
    epochs = [epoch for epoch in metrics["epochs"] if len(epoch.get("comm", {}).get("bytes", [])) == world]
    lines = [f"grid       {metrics['config']['algo']} {metrics['config']['grid_shape']} "
             f"({world} process{'es' * (world != 1)})"]
    if not epochs:  # every epoch came from a checkpoint taken on another grid
        lines.append("comm       no epoch ran on this grid")
        return "\n".join(lines)
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
