"""The six sections of a run's configuration, each a frozen dataclass that documents and validates its own
fields: `DataOptions` (what graph), `ModelOptions` (what network), `TrainingOptions` (how it learns and is
scored), `ExecutionOptions` (how the run is laid out on processes and communicates), `OutputOptions` (what
the run reports and writes) and `CheckpointOptions` (where its weights are kept and come from).

`gridgnn.config.TrainConfig` is all six at once (it inherits them): a section is a real value a function can
take (``OutputOptions.of(config)``, or the config itself, which is one), and each field name is defined here
exactly once. A section validates on construction (`ConfigError`, one line naming the field); the rules that
join two sections (a GAT cannot use sparse communication, ...) are `TrainConfig`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import TypeVar

from gridgnn.config import choices
from gridgnn.config.checks import check_bool, check_choice, check_float, check_int, is_blank
from gridgnn.config.choices import (
    ALGOS,
    COMM_PRECISION_CHOICES,
    COMMS,
    GRID_RE,
    LR_SCHEDULES,
    MAX_EDGE_FEATURES,
    MAX_HEADS,
    MAX_SEED,
    METRIC_CHOICES,
    METRICS,
    ORDERS,
    REORDER_CHOICES,
    SCHEDULE_PARAMETERS,
    SWITCHES,
    TASK_CHOICES,
    WEIGHTS,
)
from gridgnn.errors import ConfigError
from gridgnn.limits import FLOAT32_MAX, MAX_LAYERS, MAX_LR, check_hidden_width

S = TypeVar("S", bound="Section")


class Section:
    """What every section shares: validation on construction, and `of` to read a section out of any value
    that has its fields (a `TrainConfig`, or another section)."""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:  # pragma: no cover - every section defines its own
        """Raise `ConfigError` (one line) on the first invalid field of this section."""

    @classmethod
    def of(cls: type[S], source: object) -> S:
        """This section of ``source`` (usually a `TrainConfig`): a value holding only this section's fields."""
        return cls(**{field.name: getattr(source, field.name) for field in fields(cls)})  # type: ignore[arg-type]


@dataclass(frozen=True, kw_only=True)
class DataOptions(Section):
    """The graph a run trains on (`gridgnn.data`).

    ``dataset``: a dataset name, a generator spec (``csbm:nodes=300``) or a path (a graph file or a prepared
    folder); ``data_root``: where named datasets are kept; ``directed``: keep the edges' direction instead of
    symmetrizing. ``features``, ``labels`` (files) and ``split`` (a folder of index files) attach node data to
    the dataset (``--features``, ``--labels``, ``--split``; `gridgnn.data.attach`); ``edge_features`` (a
    ``.npy`` of (E, d)) its edge features (``--edge-features``). ``normalize_features``:
    row-normalize the features; None lets the dataset decide (row-normalized bag-of-words features for the real
    datasets).
    """

    dataset: str = "csbm"
    data_root: str | None = None
    directed: bool = False
    features: str | None = None
    labels: str | None = None
    split: str | None = None
    normalize_features: bool | None = None
    edge_features: str | None = None

    def validate(self) -> None:
        """Raise `ConfigError` (one line) on the first invalid data field."""
        if not isinstance(self.dataset, str) or not self.dataset.strip():
            raise ConfigError("dataset must be a non-empty name, generator spec or path")
        for name in ("features", "labels", "split", "edge_features"):
            if is_blank(getattr(self, name)):
                flag = name.replace("_", "-")
                raise ConfigError(f"{name} must name a file (--{flag}), got {getattr(self, name)!r}")


@dataclass(frozen=True, kw_only=True)
class ModelOptions(Section):
    """The network (`gridgnn.nn`); defaults are Kipf & Welling's GCN (2 layers, hidden 16, dropout 0.5).

    ``model`` is the model kind (`MODELS`): GCN, GraphSAGE, GIN or GAT. ``layers`` and ``hidden`` its depth
    and hidden width, ``dropout`` the dropout of every layer's input. ``order`` (`ORDERS`) the per-layer
    product order. ``standardize_targets``: a regression's network learns each target standardized by its
    training entries' mean and standard deviation (the loss is the squared error in those units); every output
    stays in the targets' units (`gridgnn.nn.stack.LayerStack.target_scale`). ``sage_normalize``
    L2-normalizes every SAGE layer's output rows; ``gin_eps`` is GIN's ε (initial value when ``gin_train_eps``
    makes it trainable), ``gin_norm`` the norm inside its MLP (`choices.GIN_NORMS`). GAT: ``heads``
    attention heads of ``hidden`` channels on every hidden layer (concatenated), ``output_heads`` on the output
    layer (averaged), ``attn_dropout`` the dropout of the attention coefficients, ``edge_dim`` (0: none) the
    graph's edge features entering every head's score (PyG's ``GATConv(edge_dim=...)``; message passing, on
    every grid). An option of one kind needs that kind.
    """

    layers: int = 2
    hidden: int = 16
    dropout: float = 0.5
    order: str = "auto"
    standardize_targets: bool = False
    model: str = "gcn"
    sage_normalize: bool = False
    gin_eps: float = 0.0
    gin_train_eps: bool = False
    gin_norm: str = "none"
    heads: int = 1
    output_heads: int = 1
    attn_dropout: float = 0.0
    edge_dim: int = 0

    def validate(self) -> None:
        """Raise `ConfigError` (one line) on the first invalid model field."""
        check_int("layers", self.layers, minimum=1, maximum=MAX_LAYERS)
        check_int("hidden", self.hidden, minimum=1)
        check_hidden_width(self.hidden, self.layers)  # before any dataset is read, estimate or allocation
        check_float("dropout", self.dropout, low=0.0, high=1.0, high_open=True)
        check_choice("order", self.order, ORDERS)
        check_bool("standardize_targets", self.standardize_targets)
        check_choice("model", self.model, choices.MODELS)  # read at call time: the registry of names
        if self.sage_normalize and self.model != "sage":
            raise ConfigError(f"--sage-normalize applies to --model sage, not {self.model}")
        check_float("gin_eps", self.gin_eps, low=-math.inf, high=math.inf)  # any finite number
        if (self.gin_eps != 0.0 or self.gin_train_eps) and self.model not in ("gin", "gine"):
            raise ConfigError(f"--gin-eps and --gin-train-eps apply to --model gin and gine, not {self.model}")
        check_choice("gin_norm", self.gin_norm, choices.GIN_NORMS)
        if self.gin_norm != "none" and self.model not in ("gin", "gine"):
            raise ConfigError(f"--gin-norm applies to --model gin and gine, not {self.model}")
        check_int("heads", self.heads, minimum=1, maximum=MAX_HEADS)
        check_int("output_heads", self.output_heads, minimum=1, maximum=MAX_HEADS)
        check_float("attn_dropout", self.attn_dropout, low=0.0, high=1.0, high_open=True)
        if (self.heads != 1 or self.output_heads != 1 or self.attn_dropout != 0.0) and self.model != "gat":
            raise ConfigError(f"--heads, --output-heads and --attn-dropout apply to --model gat, not {self.model}")
        check_int("edge_dim", self.edge_dim, minimum=0, maximum=MAX_EDGE_FEATURES)
        if self.edge_dim and self.model != "gat":
            raise ConfigError(f"--edge-dim applies to --model gat (gine and meshgraphnet read edge features "
                              f"always), not {self.model}")


@dataclass(frozen=True, kw_only=True)
class TrainingOptions(Section):
    """How the network learns and how each split is scored (`gridgnn.train`); optimizer defaults are Kipf &
    Welling's (Adam, lr 0.01, weight decay 5e-4, 200 epochs).

    ``seed`` seeds the initialization, the dropout masks and generated datasets. ``task`` (`TASK_CHOICES`) is
    what the vertices are trained to predict and ``metric`` (`METRIC_CHOICES`) how each split is scored
    (`gridgnn.train.loop.task_metrics`); ``auto``: inferred from the targets, the task's default metric.
    ``task_reason`` records what the run trains and why (the line a run prints first:
    `gridgnn.train.loop.task_choice.task_line`). ``stop_on_nonfinite`` ends training after the first epoch whose
    loss is NaN or infinite. ``eval_every`` K evaluates after every K-th epoch and the last; ``patience`` K > 0
    stops once K evaluations in a row did not improve the validation value (`gridgnn.train.loop.early_stop`).
    ``lr_schedule`` (`LR_SCHEDULES`) with ``lr_step_size``, ``lr_gamma``, ``lr_min`` and
    ``lr_plateau_patience`` (None: the schedule's default, `LR_DEFAULTS`; given, they need a schedule they
    apply to, `SCHEDULE_PARAMETERS`) sets each epoch's learning rate (`gridgnn.train.loop.lr_schedule`).
    """

    lr: float = 0.01
    weight_decay: float = 5e-4
    epochs: int = 200
    seed: int = 0
    task_reason: str | None = None
    stop_on_nonfinite: bool = False
    task: str = "auto"
    metric: str = "auto"
    patience: int = 0
    eval_every: int = 1
    lr_schedule: str = "none"
    lr_step_size: int | None = None
    lr_gamma: float | None = None
    lr_min: float | None = None
    lr_plateau_patience: int | None = None

    def validate(self) -> None:
        """Raise `ConfigError` (one line) on the first invalid training field."""
        check_int("epochs", self.epochs, minimum=1)
        check_int("seed", self.seed, minimum=0, maximum=MAX_SEED)
        check_float("lr", self.lr, low=0.0, high=MAX_LR, low_open=True)
        check_float("weight_decay", self.weight_decay, low=0.0, high=FLOAT32_MAX)
        check_choice("task", self.task, TASK_CHOICES)
        check_choice("metric", self.metric, METRIC_CHOICES)
        if self.task in METRICS and self.metric not in ("auto", *METRICS[self.task]):
            raise ConfigError(f"--metric {self.metric} does not score a {self.task} task (choose from "
                              f"{', '.join(METRICS[self.task])})")
        check_int("patience", self.patience, minimum=0)
        check_int("eval_every", self.eval_every, minimum=1)
        check_choice("lr_schedule", self.lr_schedule, LR_SCHEDULES)
        for name, (flag, schedules) in SCHEDULE_PARAMETERS.items():
            if getattr(self, name) is not None and self.lr_schedule not in schedules:
                raise ConfigError(f"{flag} applies to --lr-schedule {' or '.join(schedules)}, not {self.lr_schedule}")
        if self.lr_step_size is not None:
            check_int("lr_step_size", self.lr_step_size, minimum=1)
        if self.lr_plateau_patience is not None:
            check_int("lr_plateau_patience", self.lr_plateau_patience, minimum=0)
        if self.lr_gamma is not None:
            check_float("lr_gamma", self.lr_gamma, low=0.0, high=1.0, low_open=True, high_open=True)
        if self.lr_min is not None:
            check_float("lr_min", self.lr_min, low=0.0, high=self.lr, high_open=True)


@dataclass(frozen=True, kw_only=True)
class ExecutionOptions(Section):
    """How a run is laid out on processes and how it communicates: what changes where data moves, never what
    is computed (a reordered, sparse, cached, full-row or deferred run trains the plain run's numbers). The
    one list of execution options: `gridgnn.plan.execution` prices and settles them, `gridgnn.train` runs them.

    ``algo`` (`ALGOS`) is the aggregation algorithm; ``nprocs``, ``replication`` and ``grid`` (``4``, ``2x3``,
    ``2x2x2``; None: the algorithm's default shape) describe its process grid, which ``local`` ignores.
    ``overlap`` lets the next SpMM stage's communication run behind the current stage's product. ``comm``
    (`COMMS`) picks dense or sparse SpMM communication; ``cache_panels`` makes 2D and 3D receive their grid
    row's Â panels once, at set-up, and keep them instead of receiving them in every SpMM (ignored by 1D, 1.5D
    and ``local``, whose Â never moves); ``full_feature_rows`` makes every 2D and 3D process keep all feature
    columns of its rows, so the first layer's product with the input features is local
    (`gridgnn.cost.operations.ModelOps.keeps_feature_rows`); ``defer_weight_gather`` makes every 2D and
    3D process update only
    the column block of each weight and bias it reads, gathering whole weights on ``col`` only where something
    reads them whole (a checkpoint, the end of training; the best weights are copied as they are and gathered
    then) instead of in every step; ``reorder`` (`REORDER_CHOICES`) renumbers the vertices before sharding
    (distributed algorithms only; everything reported stays in original ids). ``auto``, and a switch left None,
    leave the option to the planner; a settled config holds none of them. ``profile``: the machine profile
    the planner prices with (a name or a file; None: the one of the run's device). ``auto_reason`` records
    what the planner chose and why. ``memory_per_proc`` (bytes; default: what the machine has) and
    ``memory_check`` drive the memory guard (`gridgnn.train.run.memory_guard`). ``comm_precision``
    (`COMM_PRECISION_CHOICES`) is the wire precision of the activations and activation gradients the SpMMs and
    dense phases move (`gridgnn.grid.wire`); unlike the others it changes results (slightly: ``fp32``, the
    default, is exact), so the planner lowers it only when asked (``auto``: `gridgnn.plan.execution`).

    Defaults are the plain pinned values (``local``, dense, the graph's own order, every switch off) that a
    library caller who builds a config gets; ``gridgnn train`` leaves the options no flag names to the planner.
    """

    algo: str = "local"
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
    auto_reason: str | None = None
    memory_per_proc: int | None = None
    memory_check: bool = True
    comm_precision: str = "fp32"

    def validate(self) -> None:
        """Raise `ConfigError` (one line) on the first invalid execution field."""
        check_int("nprocs", self.nprocs, minimum=1)
        check_choice("comm_precision", self.comm_precision, COMM_PRECISION_CHOICES)
        check_int("replication", self.replication, minimum=1)
        check_choice("algo", self.algo, ALGOS)
        check_choice("comm", self.comm, COMMS)
        check_choice("reorder", self.reorder, REORDER_CHOICES)
        for name in SWITCHES:
            if getattr(self, name) is not None and not isinstance(getattr(self, name), bool):  # None: planned
                raise ConfigError(f"{name} must be true or false (or unset: the planner decides), got "
                                  f"{getattr(self, name)!r}")
        if is_blank(self.profile):
            raise ConfigError(f"profile must be a profile name or file, got {self.profile!r}")
        if self.algo == "auto" and (self.grid is not None or self.replication != 1):
            raise ConfigError("--algo auto chooses the grid and replication itself; drop --grid and --replication")
        if self.algo in ("1d", "2d", "3d") and self.replication != 1:  # ``local`` ignores every grid flag
            raise ConfigError(f"--replication applies to --algo 1.5d only, not {self.algo}")
        if self.memory_per_proc is not None:
            check_int("memory_per_proc", self.memory_per_proc, minimum=1)
        if self.grid is not None and (not isinstance(self.grid, str) or not GRID_RE.match(self.grid)):
            raise ConfigError(f"grid must look like '4', '2x3' or '2x2x2', got {self.grid!r}")

    def grid_shape(self) -> tuple[int, ...] | None:
        """``grid`` parsed into a tuple of positive ints, e.g. ``"2x3" -> (2, 3)``; None when unset."""
        if self.grid is None:
            return None
        return tuple(int(part) for part in self.grid.split("x"))

    @property
    def free(self) -> tuple[str, ...]:
        """The execution options left to the planner (``algo``, ``comm``, ``reorder`` and the unset switches),
        in that order."""
        named = [("algo", self.algo == "auto"), ("comm", self.comm == "auto"), ("reorder", self.reorder == "auto")]
        return (tuple(name for name, free in named if free) + tuple(s for s in SWITCHES if getattr(self, s) is None)
                + (("comm_precision",) if self.comm_precision == "auto" else ()))

    def settled_locally(self) -> dict:
        """The fields that settle the free options of a one-process (``local``) run, where nothing moves:
        dense, the graph's own order, every switch off."""
        settled = {"comm": "dense"} if self.comm == "auto" else {}
        if self.reorder == "auto":
            settled["reorder"] = "none"
        settled.update({s: False for s in SWITCHES if getattr(self, s) is None})
        if self.comm_precision == "auto":
            settled["comm_precision"] = "fp32"
        return settled


@dataclass(frozen=True, kw_only=True)
class OutputOptions(Section):
    """What a run reports while it trains and writes when it ends (`gridgnn.train.outputs.per_vertex`,
    `gridgnn.train.outputs.products`); every file is written through `gridgnn.safe_files`.

    ``metrics_out``: the metrics JSON file; ``log_csv``: a CSV file of one row per epoch
    (`gridgnn.train.outputs.epoch_csv`); ``tensorboard``: a folder for TensorBoard scalars per epoch
    (`gridgnn.train.outputs.tensorboard_log`). ``quiet`` prints only errors; ``progress`` None means automatic: one
    line per epoch when stdout is a terminal and the ``CI`` environment variable is unset. ``predictions_out``,
    ``embeddings_out`` (of layer ``embedding_layer``, default the last hidden one) and ``save_model`` name the
    run's products, made with the weights of the ``weights`` (`WEIGHTS`) epoch: ``best`` validation value (first
    reached) or ``last``.
    """

    metrics_out: str | None = None
    tensorboard: str | None = None
    quiet: bool = False
    progress: bool | None = None
    predictions_out: str | None = None
    embeddings_out: str | None = None
    embedding_layer: int | None = None
    save_model: str | None = None
    weights: str = "best"
    log_csv: str | None = None

    def validate(self) -> None:
        """Raise `ConfigError` (one line) on the first invalid output field (``embedding_layer`` at most
        ``layers`` is `TrainConfig`'s: it joins the model)."""
        if is_blank(self.tensorboard):
            raise ConfigError(f"tensorboard must be a folder name, got {self.tensorboard!r}")
        if self.quiet and self.progress:
            raise ConfigError("quiet and progress cannot both be set")
        check_choice("weights", self.weights, WEIGHTS)
        if self.embedding_layer is not None:
            check_int("embedding_layer", self.embedding_layer, minimum=1)
        if is_blank(self.log_csv):
            raise ConfigError(f"log_csv must name a file, got {self.log_csv!r}")


@dataclass(frozen=True, kw_only=True)
class CheckpointOptions(Section):
    """Where a run's weights are kept and where they come from (`gridgnn.train.checkpoint.resume`,
    `gridgnn.train.checkpoint.store`).

    With ``checkpoint_dir`` a checkpoint is saved every ``checkpoint_every`` epochs and after the last,
    keeping the newest ``keep_checkpoints``; ``resume`` continues from the newest one there. ``init_from``: a
    model file whose weights, of the same model and widths, replace the initialization
    (`gridgnn.train.checkpoint.init_from`; a resumed checkpoint wins).
    """

    checkpoint_dir: str | None = None
    checkpoint_every: int = 10
    keep_checkpoints: int = 2
    resume: bool = False
    init_from: str | None = None

    def validate(self) -> None:
        """Raise `ConfigError` (one line) on the first invalid checkpoint field."""
        check_int("checkpoint_every", self.checkpoint_every, minimum=1)
        check_int("keep_checkpoints", self.keep_checkpoints, minimum=1)
        if self.resume and self.checkpoint_dir is None:
            raise ConfigError("resume needs a checkpoint folder (--checkpoint-dir DIR)")
        if is_blank(self.init_from):
            raise ConfigError(f"init_from must name a model file, got {self.init_from!r}")


SECTIONS: dict[str, type[Section]] = {"data": DataOptions, "model": ModelOptions, "training": TrainingOptions,
                                      "execution": ExecutionOptions, "outputs": OutputOptions,
                                      "checkpoints": CheckpointOptions}
"""Section name -> its class, in the order `TrainConfig` validates them."""
