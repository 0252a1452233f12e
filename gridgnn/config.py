"""The resolved configuration of one training run (layer 0 of docs/architecture.md §4).

`TrainConfig` is what the command line builds from its flags and what the metrics JSON records under
``config``. `validate()` raises `ConfigError` with one self-contained line naming the bad field.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass

from gridgnn.errors import ConfigError
from gridgnn.limits import FLOAT32_MAX, MAX_LAYERS, MAX_LR, check_hidden_width

ORDERS = ("auto", "aggregate-first", "transform-first")
"""Per-layer product order: ``aggregate-first`` is (Â H) W (CAGNET), ``transform-first`` is Â (H W),
``auto`` puts the narrower of in/out width through the SpMM (transform first when out < in)."""


def resolve_order(order: str, in_channels: int, out_channels: int) -> str:
    """``aggregate-first`` or ``transform-first`` for one layer of widths ``in_channels -> out_channels``:
    the one home of the order rule, read by the models (`gridgnn.nn`) and the cost model (`gridgnn.cost`).
    ``auto`` sends the narrower width through the SpMM (transform first when ``out_channels <
    in_channels``). Raises `ConfigError` for a name not in `ORDERS`."""
    if order == "auto":
        return "transform-first" if out_channels < in_channels else "aggregate-first"
    if order not in ORDERS:
        raise ConfigError(f"order must be one of {', '.join(ORDERS)}; got {order!r}")
    return order


def keeps_feature_rows(model: str, order: str, widths: list[int], col_blocks: int) -> bool:
    """Whether ``--full-feature-rows`` takes effect: every process of a grid that splits feature columns over
    ``col_blocks`` > 1 processes then holds all ``widths[0]`` input columns of its rows, and the first layer
    multiplies them by its weights' own output columns locally (no ``dense``-phase communication for it).

    The one home of the rule, read by the grid's layout (`gridgnn.parallel.grid_ops`), the trainer and the
    cost model. It applies only when the first layer transforms its input before anything else reads it
    (GAT always; GCN, GraphSAGE and GIN when `resolve_order` says ``transform-first``), and only for an input
    at least 2 wide, so that no column block of that width holds all of it."""
    f_in, f_out = widths[0], widths[1]
    first = "transform-first" if model == "gat" else resolve_order(order, f_in, f_out)
    return col_blocks > 1 and f_in > 1 and first == "transform-first"


ALGOS = ("local", "1d", "1.5d", "2d", "3d", "auto")
"""Aggregation algorithms: ``local`` (one process), the four distributed SpMMs of `gridgnn.spmm`, and
``auto``: the configuration the planner ranks best (`gridgnn.train.run.auto`)."""

COMMS = ("dense", "sparse", "auto")
"""How the SpMMs move X: ``dense`` whole blocks (CAGNET), ``sparse`` only the rows each receiver's Â block
touches (index sets exchanged once at set-up), ``auto`` whichever the cost model prices lower."""

REORDERS = ("none", "random", "rcm", "metis", "metis-nnz", "metis-balanced")
"""Vertex reorderings applied before sharding (`gridgnn.data.reorder`)."""

REORDER_CHOICES = (*REORDERS, "auto")
"""``--reorder``'s values: a reordering of `REORDERS`, or ``auto``: the one the planner prices best
(`gridgnn.plan.execution`)."""

WEIGHTS = ("best", "last")
"""Which epoch's weights a run's products use: the best validation accuracy's (first reached) or the last."""

TASKS = ("multiclass", "multilabel", "regression")
"""What a run trains its vertices to predict (`gridgnn.data.targets`): one class of C, T binary targets, T real
values."""
TASK_CHOICES = ("auto", *TASKS)
"""``--task``'s values: a task, or ``auto``: inferred from the targets (`gridgnn.data.targets.infer_task`)."""

METRICS = {"multiclass": ("accuracy",), "multilabel": ("rocauc", "micro-f1"), "regression": ("mse", "mae", "r2")}
"""Task -> the metrics ``--metric`` accepts for it, its default first (`gridgnn.train.loop.task_metrics`)."""
LOWER_IS_BETTER = frozenset({"mse", "mae"})
"""Metrics that are errors: the best validation epoch is the lowest."""
METRIC_CHOICES = ("auto", *dict.fromkeys(m for names in METRICS.values() for m in names))
"""``--metric``'s values: a metric, or ``auto``: the task's default."""

LR_SCHEDULES = ("none", "cosine", "step", "plateau")
"""``--lr-schedule``: the learning rate per epoch (`gridgnn.train.loop.lr_schedule`)."""

SCHEDULE_PARAMETERS = {"lr_step_size": ("--lr-step-size", ("step",)), "lr_gamma": ("--lr-gamma", ("step", "plateau")),
                       "lr_min": ("--lr-min", ("cosine", "plateau")),
                       "lr_plateau_patience": ("--lr-plateau-patience", ("plateau",))}
"""`TrainConfig` field of a schedule parameter -> (its flag, the schedules it applies to)."""

LR_DEFAULTS = {"lr_step_size": 30, "lr_gamma": 0.1, "lr_min": 0.0, "lr_plateau_patience": 10}
"""What a schedule parameter left unset (None) means."""

MODELS = ("gcn", "sage", "gin", "gat")
"""Model kinds (``--model``): GCN, GraphSAGE-mean with root weight, GIN, GAT (`gridgnn.nn.models`)."""

MAX_HEADS = 1024
"""The most attention heads of a GAT layer (``--heads``, ``--output-heads``)."""

MAX_SEED = 2**64 - 1
"""The largest seed (torch.manual_seed takes 64-bit seeds)."""

_GRID_RE = re.compile(r"^[1-9][0-9]*(x[1-9][0-9]*){0,2}$")


def model_comms(model: str, comm: str) -> tuple[str, ...]:
    """The SpMM communication variants ``comm`` (``dense``, ``sparse`` or ``auto``) allows for ``model``: GAT's
    attention stages exist only dense, so ``auto`` means dense there."""
    if comm != "auto":
        return (comm,)
    return ("dense",) if model == "gat" else ("dense", "sparse")


@dataclass(frozen=True)
class TrainConfig:
    """Everything that determines a training run (frozen: a changed run is a new one, `dataclasses.replace`,
    validated again).

    Model/optimizer defaults are Kipf & Welling's (2 layers, hidden 16, dropout 0.5, lr 0.01, weight decay
    5e-4, 200 epochs). ``normalize_features=None`` lets the dataset decide (row-normalized bag-of-words
    features for the real datasets). ``progress=None`` means automatic: one line per epoch when stdout is a
    terminal and the ``CI`` environment variable is unset. ``tensorboard`` names a folder for TensorBoard
    scalars per epoch (`gridgnn.train.outputs.tensorboard_log`). ``nprocs``, ``replication`` and ``grid`` describe
    the process grid of the distributed algorithms; the ``local`` algorithm ignores them; ``overlap`` lets
    the next SpMM stage's communication run behind the current stage's product (same numbers); ``comm``
    (`COMMS`) picks dense or sparse SpMM communication; ``cache_panels`` makes 2D and 3D receive their grid
    row's Â panels once, at set-up, and keep them instead of receiving them in every SpMM (ignored by 1D, 1.5D
    and ``local``, whose Â never moves); ``full_feature_rows`` makes every 2D and 3D process keep all feature
    columns of its rows, so the first layer's product with the input features is local
    (`keeps_feature_rows`); ``defer_weight_gather`` makes every 2D and 3D process update only the column
    block of each weight and bias it reads, gathering whole weights on ``col`` only where something reads them
    whole (a checkpoint, the end of training; the best weights are copied as they are and gathered then)
    instead of in every step; ``reorder`` (`REORDERS`) renumbers the vertices before sharding (distributed
    algorithms only; everything reported stays in original ids). With ``checkpoint_dir`` a checkpoint is
    saved every ``checkpoint_every`` epochs and after the last, keeping
    the newest ``keep_checkpoints``; ``resume`` continues from the newest one there (see
    `gridgnn.train.checkpoint.resume`). ``init_from``: a model file whose weights, of the same
    model and widths, replace the initialization (`gridgnn.train.checkpoint.init_from`; a resumed checkpoint wins).
    ``auto_reason`` records why ``--algo auto`` chose the algorithm it did, ``task_reason`` what the run trains
    and why (the line a run prints first: `gridgnn.train.loop.task_choice.task_line`).
    ``stop_on_nonfinite`` ends training after the first epoch whose loss is NaN or infinite.
    ``predictions_out``, ``embeddings_out`` (of layer ``embedding_layer``, default the last hidden one) and
    ``save_model`` name the run's products (`gridgnn.train.outputs.products`), made with the weights of the
    ``weights`` epoch: ``best`` validation accuracy or ``last``. ``memory_per_proc`` (bytes; default: what the
    machine has) and ``memory_check`` drive the memory guard (`gridgnn.train.run.memory_guard`).
    ``task`` (`TASK_CHOICES`) is what the vertices are trained to predict and ``metric`` (`METRIC_CHOICES`) how
    each split is scored (`gridgnn.train.loop.task_metrics`); ``auto``: inferred from the targets, the task's
    default metric. ``standardize_targets``: a regression's network learns each target standardized by its
    training entries' mean and standard deviation (the loss is the squared error in those units); every output
    stays in the targets' units (`gridgnn.nn.stack.LayerStack.target_scale`).
    ``features``, ``labels`` (files) and ``split`` (a folder of index files) attach node data to the dataset
    (``--features``, ``--labels``, ``--split``; `gridgnn.data.attach`).
    ``model`` is the model kind (`MODELS`); ``sage_normalize`` L2-normalizes every SAGE layer's output rows;
    ``gin_eps`` is GIN's ε (initial value when ``gin_train_eps`` makes it trainable). GAT: ``heads`` attention
    heads of ``hidden`` channels on every hidden layer (concatenated), ``output_heads`` on the output layer
    (averaged), ``attn_dropout`` the dropout of the attention coefficients.
    The loop: ``eval_every`` K evaluates after every K-th epoch and the last; ``patience`` K > 0 stops once K
    evaluations in a row did not improve the validation value (`gridgnn.train.loop.early_stop`); ``lr_schedule``
    (`LR_SCHEDULES`) with ``lr_step_size``, ``lr_gamma``, ``lr_min`` and ``lr_plateau_patience`` (None: the
    schedule's default; given, they need a schedule they apply to) sets each epoch's learning rate
    (`gridgnn.train.loop.lr_schedule`); ``log_csv`` names a CSV file of one row per epoch
    (`gridgnn.train.outputs.epoch_csv`).
    """

    dataset: str = "csbm"
    data_root: str | None = None
    directed: bool = False
    features: str | None = None
    labels: str | None = None
    split: str | None = None
    normalize_features: bool | None = None
    layers: int = 2
    hidden: int = 16
    dropout: float = 0.5
    lr: float = 0.01
    weight_decay: float = 5e-4
    epochs: int = 200
    seed: int = 0
    algo: str = "local"
    order: str = "auto"
    metrics_out: str | None = None
    tensorboard: str | None = None
    quiet: bool = False
    progress: bool | None = None
    nprocs: int = 1
    replication: int = 1
    grid: str | None = None
    overlap: bool = True
    comm: str = "dense"
    cache_panels: bool | None = False
    full_feature_rows: bool | None = False
    defer_weight_gather: bool | None = False
    reorder: str = "none"
    profile: str | None = None
    checkpoint_dir: str | None = None
    checkpoint_every: int = 10
    keep_checkpoints: int = 2
    resume: bool = False
    init_from: str | None = None
    auto_reason: str | None = None
    task_reason: str | None = None
    stop_on_nonfinite: bool = False
    predictions_out: str | None = None
    embeddings_out: str | None = None
    embedding_layer: int | None = None
    save_model: str | None = None
    weights: str = "best"
    memory_per_proc: int | None = None
    memory_check: bool = True
    task: str = "auto"
    metric: str = "auto"
    standardize_targets: bool = False
    model: str = "gcn"
    sage_normalize: bool = False
    gin_eps: float = 0.0
    gin_train_eps: bool = False
    heads: int = 1
    output_heads: int = 1
    attn_dropout: float = 0.0
    patience: int = 0
    eval_every: int = 1
    lr_schedule: str = "none"
    lr_step_size: int | None = None
    lr_gamma: float | None = None
    lr_min: float | None = None
    lr_plateau_patience: int | None = None
    log_csv: str | None = None

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise `ConfigError` (one line) on the first invalid field."""
        if not isinstance(self.dataset, str) or not self.dataset.strip():
            raise ConfigError("dataset must be a non-empty name, generator spec or path")
        for name in ("features", "labels", "split"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ConfigError(f"{name} must name a file (--{name}), got {value!r}")
        if self.tensorboard is not None and (not isinstance(self.tensorboard, str) or not self.tensorboard.strip()):
            raise ConfigError(f"tensorboard must be a folder name, got {self.tensorboard!r}")
        _check_int("layers", self.layers, minimum=1, maximum=MAX_LAYERS)
        _check_int("hidden", self.hidden, minimum=1)
        check_hidden_width(self.hidden, self.layers)  # before any dataset is read, estimate or allocation
        _check_int("epochs", self.epochs, minimum=1)
        _check_int("seed", self.seed, minimum=0, maximum=MAX_SEED)
        _check_int("nprocs", self.nprocs, minimum=1)
        _check_int("replication", self.replication, minimum=1)
        _check_int("checkpoint_every", self.checkpoint_every, minimum=1)
        _check_int("keep_checkpoints", self.keep_checkpoints, minimum=1)
        if self.resume and self.checkpoint_dir is None:
            raise ConfigError("resume needs a checkpoint folder (--checkpoint-dir DIR)")
        if self.init_from is not None and (not isinstance(self.init_from, str) or not self.init_from.strip()):
            raise ConfigError(f"init_from must name a model file, got {self.init_from!r}")
        _check_float("dropout", self.dropout, low=0.0, high=1.0, high_open=True)
        _check_float("lr", self.lr, low=0.0, high=MAX_LR, low_open=True)
        _check_float("weight_decay", self.weight_decay, low=0.0, high=FLOAT32_MAX)
        _check_choice("order", self.order, ORDERS)
        _check_choice("task", self.task, TASK_CHOICES)
        _check_choice("metric", self.metric, METRIC_CHOICES)
        if not isinstance(self.standardize_targets, bool):
            raise ConfigError(f"standardize_targets must be true or false, got {self.standardize_targets!r}")
        if self.standardize_targets and self.task in ("multiclass", "multilabel"):
            raise ConfigError(f"--standardize-targets standardizes regression targets, not {self.task} ones")
        if self.task in METRICS and self.metric not in ("auto", *METRICS[self.task]):
            raise ConfigError(f"--metric {self.metric} does not score a {self.task} task (choose from "
                              f"{', '.join(METRICS[self.task])})")
        _check_choice("algo", self.algo, ALGOS)
        _check_choice("comm", self.comm, COMMS)
        _check_choice("reorder", self.reorder, REORDER_CHOICES)
        for name in ("cache_panels", "full_feature_rows", "defer_weight_gather"):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), bool):  # None: planned
                raise ConfigError(f"{name} must be true or false (or unset: the planner decides), got "
                                  f"{getattr(self, name)!r}")
        if self.profile is not None and (not isinstance(self.profile, str) or not self.profile.strip()):
            raise ConfigError(f"profile must be a profile name or file, got {self.profile!r}")
        if self.quiet and self.progress:
            raise ConfigError("quiet and progress cannot both be set")
        if self.algo == "auto" and (self.grid is not None or self.replication != 1):
            raise ConfigError("--algo auto chooses the grid and replication itself; drop --grid and --replication")
        if self.algo in ("1d", "2d", "3d") and self.replication != 1:  # ``local`` ignores every grid flag
            raise ConfigError(f"--replication applies to --algo 1.5d only, not {self.algo}")
        _check_choice("weights", self.weights, WEIGHTS)
        if self.embedding_layer is not None:
            _check_int("embedding_layer", self.embedding_layer, minimum=1, maximum=self.layers)
        if self.memory_per_proc is not None:
            _check_int("memory_per_proc", self.memory_per_proc, minimum=1)
        self._validate_model()
        self._validate_loop()
        if self.grid is not None and not _GRID_RE.match(self.grid):
            raise ConfigError(f"grid must look like '4', '2x3' or '2x2x2', got {self.grid!r}")

    def _validate_model(self) -> None:
        """``model`` and the options of the other kinds: a SAGE or GIN option needs its model."""
        _check_choice("model", self.model, MODELS)
        if self.sage_normalize and self.model != "sage":
            raise ConfigError(f"--sage-normalize applies to --model sage, not {self.model}")
        if isinstance(self.gin_eps, bool) or not isinstance(self.gin_eps, (int, float)) \
                or not math.isfinite(self.gin_eps):
            raise ConfigError(f"gin_eps must be a finite number, got {self.gin_eps!r}")
        if (self.gin_eps != 0.0 or self.gin_train_eps) and self.model != "gin":
            raise ConfigError(f"--gin-eps and --gin-train-eps apply to --model gin, not {self.model}")
        _check_int("heads", self.heads, minimum=1, maximum=MAX_HEADS)
        _check_int("output_heads", self.output_heads, minimum=1, maximum=MAX_HEADS)
        _check_float("attn_dropout", self.attn_dropout, low=0.0, high=1.0, high_open=True)
        if (self.heads != 1 or self.output_heads != 1 or self.attn_dropout != 0.0) and self.model != "gat":
            raise ConfigError(f"--heads, --output-heads and --attn-dropout apply to --model gat, not {self.model}")
        if self.model == "gat" and self.comm == "sparse":
            raise ConfigError("--comm sparse is not implemented for --model gat (its attention stages move whole "
                              "blocks); use --comm dense or auto")

    def _validate_loop(self) -> None:
        """``patience``, ``eval_every``, ``log_csv`` and the learning-rate schedule: a schedule parameter needs
        a schedule it applies to (`SCHEDULE_PARAMETERS`)."""
        _check_int("patience", self.patience, minimum=0)
        _check_int("eval_every", self.eval_every, minimum=1)
        if self.log_csv is not None and (not isinstance(self.log_csv, str) or not self.log_csv.strip()):
            raise ConfigError(f"log_csv must name a file, got {self.log_csv!r}")
        _check_choice("lr_schedule", self.lr_schedule, LR_SCHEDULES)
        for name, (flag, schedules) in SCHEDULE_PARAMETERS.items():
            if getattr(self, name) is not None and self.lr_schedule not in schedules:
                raise ConfigError(f"{flag} applies to --lr-schedule {' or '.join(schedules)}, not {self.lr_schedule}")
        if self.lr_step_size is not None:
            _check_int("lr_step_size", self.lr_step_size, minimum=1)
        if self.lr_plateau_patience is not None:
            _check_int("lr_plateau_patience", self.lr_plateau_patience, minimum=0)
        if self.lr_gamma is not None:
            _check_float("lr_gamma", self.lr_gamma, low=0.0, high=1.0, low_open=True, high_open=True)
        if self.lr_min is not None:
            _check_float("lr_min", self.lr_min, low=0.0, high=self.lr, high_open=True)

    def to_dict(self) -> dict:
        """A JSON-ready dict of every field (the ``config`` object of the metrics file)."""
        return dataclasses.asdict(self)

    def grid_shape(self) -> tuple[int, ...] | None:
        """``grid`` parsed into a tuple of positive ints, e.g. ``"2x3" -> (2, 3)``; None when unset."""
        if self.grid is None:
            return None
        return tuple(int(part) for part in self.grid.split("x"))


def _check_int(name: str, value: object, *, minimum: int, maximum: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ConfigError(f"{name} must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ConfigError(f"{name} must be at most {maximum}, got {value}")


def _check_float(
    name: str,
    value: object,
    *,
    low: float,
    high: float,
    low_open: bool = False,
    high_open: bool = False,
) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{name} must be a finite number, got {value!r}")
    too_low = value <= low if low_open else value < low
    too_high = value >= high if high_open else value > high
    if too_low or too_high:
        left = "(" if low_open else "["
        right = ")" if high_open else "]"
        raise ConfigError(f"{name} must be in {left}{low:g}, {high:g}{right}, got {value:g}")


def _check_choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)}; got {value!r}")
