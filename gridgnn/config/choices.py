"""The values a configuration field may take, and the rules several layers read from one place: the
product order (`resolve_order`) and which SpMM communication a model allows (`model_comms`). Pure; imports
nothing but `gridgnn.errors`."""

from __future__ import annotations

import re

from gridgnn.errors import ConfigError

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


ALGOS = ("local", "1d", "1.5d", "2d", "3d", "auto")
"""Aggregation algorithms: ``local`` (one process), the four distributed SpMMs of `gridgnn.spmm`, and
``auto``: the configuration the planner ranks best (`gridgnn.train.run.auto`)."""

COMMS = ("dense", "sparse", "cover", "auto")
"""How the SpMMs move X: ``dense`` whole blocks (CAGNET), ``sparse`` only the rows each receiver's Â block
touches (index sets exchanged once at set-up), ``cover`` (1D and 1.5D) each pair's minimum vertex cover, some
rows of X and some partial sums (`gridgnn.spmm.cover_15d`), ``auto`` whichever the cost model prices lower."""

COVER_ALGOS = ("1d", "1.5d")
"""The algorithms ``--comm cover`` runs on: on 2D and 3D a process holds a block of columns of a row's
entries, so a partial sum of a row is itself a partial sum of a block row (the SUMMA reduction)."""

COMM_PRECISIONS = ("fp32", "bf16", "fp16", "int8")
"""Wire precisions of the activations and activation gradients the SpMMs and dense phases move
(`gridgnn.grid.wire`): ``fp32`` is exact (today's bytes, to the bit); ``bf16`` and ``fp16`` round to nearest
(fp16 saturates at ±65504); ``int8`` rounds stochastically from a seeded generator with one power-of-two scale
per row. Weight gradients, the loss and Â always travel as they are stored."""

COMM_PRECISION_CHOICES = (*COMM_PRECISIONS, "auto")
"""``--comm-precision``'s values: a precision of `COMM_PRECISIONS`, or ``auto``: the planner may pick a lower one
(`gridgnn.plan.execution`)."""

SWITCHES = ("cache_panels", "full_feature_rows", "defer_weight_gather")
"""The on/off execution options (`gridgnn.config.ExecutionOptions`): True, False, or unset (None): the planner
decides (`gridgnn.plan.execution`)."""

REORDERS = ("none", "random", "double-random", "rcm", "metis", "metis-nnz", "metis-balanced")
"""Vertex reorderings applied before sharding (`gridgnn.data.reorder`); ``double-random`` (2D and 3D) also puts
Â's columns in a second random order (`gridgnn.cost.column_order`)."""

COLUMN_ORDERED = ("double-random",)
"""The reorderings that put Â's columns in an order of their own: dense 2D and 3D only (`check_column_order`)."""


def check_column_order(reorder: str, algo: str, comm: str, model: str, edge_dim: int | None = None) -> None:
    """Raise `ConfigError` (one line) where ``reorder`` (of `COLUMN_ORDERED`) cannot run: on 1D and 1.5D (a
    process holds whole rows of Â, so its columns' order changes nothing), with sparse or cover communication
    (their index sets follow the vertex order), and for GAT's attention (its stages read Â's columns in the
    vertex order); ``auto`` values are left to the planner, which prices dense 2D and 3D only."""
    if algo in ("1d", "1.5d"):
        raise ConfigError(f"--reorder {reorder} puts Â's columns in a second order, which only 2D and 3D use (a "
                          f"{algo} process holds whole rows): use --algo 2d, 3d or auto, or --reorder random")
    if comm in ("sparse", "cover"):
        raise ConfigError(f"--reorder {reorder} runs with --comm dense (or auto), not {comm}: a random order leaves "
                          "no locality for sparse communication")
    if model == "gat" and not edge_dim:
        raise ConfigError(f"--reorder {reorder} is not implemented for --model gat (its attention stages read Â's "
                          "columns in the vertex order); use --reorder random")

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

MODELS = ("gcn", "sage", "gin", "gat", "gine", "meshgraphnet")
"""Model kinds (``--model``): GCN, GraphSAGE-mean with root weight, GIN, GAT, GINE (GIN with edge features),
MeshGraphNet (edge features updated per layer; `gridgnn.nn.models`)."""

GIN_NORMS = ("none", "layer")
"""``--gin-norm``: the normalization inside a GIN (or GINE) layer's MLP: none (PyG's ``GINConv`` MLP, the default)
or ``layer``, a per-vertex layer norm after its first linear (`gridgnn.nn.norm`)."""

MAX_EDGE_FEATURES = 1 << 20
"""The most features per edge a model file or ``--edge-dim`` may name."""

MAX_HEADS = 1024
"""The most attention heads of a GAT layer (``--heads``, ``--output-heads``)."""

MAX_SEED = 2**64 - 1
"""The largest seed (torch.manual_seed takes 64-bit seeds)."""

GRID_RE = re.compile(r"^[1-9][0-9]*(x[1-9][0-9]*){0,2}$")
"""What ``--grid`` looks like: one to three positive sizes joined by ``x`` (``4``, ``2x3``, ``2x2x2``)."""


def model_comms(model: str, comm: str) -> tuple[str, ...]:
    """The SpMM communication variants ``comm`` (``dense``, ``sparse``, ``cover`` or ``auto``) allows for
    ``model``: GAT's attention stages exist only dense (its attention needs the source rows themselves, not
    partial sums), so ``auto`` means dense there. ``cover`` applies on `COVER_ALGOS` only (the planner prices it
    there)."""
    if comm != "auto":
        return (comm,)
    return ("dense",) if model == "gat" else ("dense", "sparse", "cover")
