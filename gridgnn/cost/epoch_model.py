"""The whole training step of a GCN on a grid, per rank: communication by phase, memory, time (pure).

`predict_epoch` restates what `gridgnn.train.distributed.DistributedTrainer.train_step` issues, collective
by collective, in the byte convention of `gridgnn.grid.comm` (evaluation is not counted, as there):

==============  ================================================================================
phase           collectives (P ranks; m = the rank's dense rows; pcol = size of the ``col`` axis)
==============  ================================================================================
spmm_forward    each layer's ``Â X`` (`gridgnn.cost.rank_cost.spmm_terms`, width by the layer's order)
spmm_backward   each ``Âᵀ G``; none for a first layer that aggregates first (X needs no gradient)
dense           2D/3D only, each product with a weight (`LayerStep.products`: GCN one, SAGE two, GIN two) on
                ``col``: all-gather of the input's columns when f_in <= f_out, else reduce-scatter of the
                partial products; (pcol-1)·⌈width/pcol⌉·m values. Backward: the transpose collective,
                except an all-gather whose input needs no gradient (the features). SAGE with normalize:
                an all-reduce of the m row sums on ``col``, forward and backward, per layer
weight_grad     one all-reduce of every parameter's gradient (`ModelSpec.num_parameters`; GIN's trainable ε
                included) on ``row`` (1D/1.5D) or ``world`` (2D/3D)
loss            2D/3D: all-gather of the class columns on ``col`` (forward only); then the all-reduce of
                the float64 loss on ``world`` (`GridOps.global_sum`)
other           nothing in the training step
==============  ================================================================================

A collective on a group of one process is skipped and not counted, as in `Communicator`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gridgnn.cost.epoch_cost import resolve_order
from gridgnn.cost.graph_stats import GraphStats
from gridgnn.cost.memory_model import memory_per_rank
from gridgnn.cost.profile import MachineProfile
from gridgnn.cost.rank_cost import ShapeBlocks, Term, feature_widths, shape_blocks, spmm_terms
from gridgnn.cost.spmm_cost import FLOAT32, SizeInfo
from gridgnn.grid.placement import axis_bytes, host_axis_order, within_node_by_position
from gridgnn.grid.shape import GridShape

PHASES = ("spmm_forward", "spmm_backward", "dense", "weight_grad", "loss", "other")
"""The phases of `gridgnn.grid.comm.PHASES` (repeated here so the cost model imports no torch code)."""

LOSS_BYTES = 8  # the loss is all-reduced as one float64


@dataclass(frozen=True)
class ModelSpec:
    """The model being trained: widths ``[num_features] + [hidden] * (layers - 1) + [num_classes]``; ``model``
    its kind (``gcn``, ``sage``, ``gin``), with SAGE's ``sage_normalize`` and GIN's ``gin_train_eps``."""

    num_features: int
    num_classes: int
    layers: int = 2
    hidden: int = 16
    order: str = "auto"
    bias: bool = True
    model: str = "gcn"
    sage_normalize: bool = False
    gin_train_eps: bool = False

    @property
    def self_loops(self) -> bool:
        """Whether the model's operator has the diagonal of A + I (GCN's Â) or only A's pattern."""
        return self.model == "gcn"

    @property
    def widths(self) -> list[int]:
        return [self.num_features] + [self.hidden] * (self.layers - 1) + [self.num_classes]

    @classmethod
    def of(cls, model, stats: GraphStats) -> ModelSpec:
        """A `ModelSpec` from anything with ``layers``, ``hidden`` and ``order`` (e.g. a `TrainConfig`; its
        ``model``, ``sage_normalize`` and ``gin_train_eps`` when present); widths in and out from ``stats``."""
        if isinstance(model, ModelSpec):
            return model
        return cls(stats.num_features, stats.num_classes, int(model.layers), int(model.hidden),
                   str(getattr(model, "order", "auto")), model=str(getattr(model, "model", "gcn")),
                   sage_normalize=bool(getattr(model, "sage_normalize", False)),
                   gin_train_eps=bool(getattr(model, "gin_train_eps", False)))

    def num_parameters(self) -> int:
        """Trained values: GCN W, b; SAGE W_neigh, W_root, b; GIN W1, b1, W2, b2 (and ε when trained)."""
        w = self.widths
        bias = 1 if self.bias else 0
        total = 0
        for a, b in zip(w[:-1], w[1:], strict=True):
            if self.model == "sage":
                total += 2 * a * b + b
            elif self.model == "gin":
                total += a * b + b + b * b + b + (1 if self.gin_train_eps else 0)
            else:
                total += a * b + bias * b
        return total


@dataclass(frozen=True)
class LayerStep:
    """One layer of the step: widths, resolved order, the width of its SpMM and its products with weights."""

    index: int
    f_in: int
    f_out: int
    order: str
    model: str = "gcn"
    row_norm: bool = False
    train_eps: bool = False

    @property
    def products(self) -> list[tuple[int, int, bool]]:
        """(f_in, f_out, whether the input needs a gradient) of each product with a replicated weight.

        The input of a first layer is the features (no gradient), unless GIN adds ``(1 + ε) X`` to ``A X``
        first with a trained ε."""
        grad_in = self.index > 0
        if self.model == "sage":
            return [(self.f_in, self.f_out, grad_in)] * 2
        if self.model == "gin":
            first = grad_in or (self.order == "aggregate-first" and self.train_eps)
            return [(self.f_in, self.f_out, first), (self.f_out, self.f_out, True)]
        return [(self.f_in, self.f_out, grad_in)]

    @property
    def spmm_width(self) -> int:
        return self.f_in if self.order == "aggregate-first" else self.f_out

    @property
    def spmm_backward(self) -> bool:
        return not (self.index == 0 and self.order == "aggregate-first")


def layer_steps(spec: ModelSpec) -> list[LayerStep]:
    w = spec.widths
    return [LayerStep(k, a, b, resolve_order(spec.order, a, b), spec.model, spec.sage_normalize,
                      spec.gin_train_eps) for k, (a, b) in enumerate(zip(w[:-1], w[1:], strict=True))]


def stats_for(model, graph) -> GraphStats:
    """``graph`` itself when it is `GraphStats`, else exact statistics of the loaded graph's operator for
    ``model`` (a `ModelSpec` or a `TrainConfig`-like object: A + I's pattern for GCN, A's for SAGE and GIN)."""
    if isinstance(graph, GraphStats):
        return graph
    return GraphStats.from_graph(graph, self_loops=str(getattr(model, "model", "gcn")) == "gcn")


@dataclass
class EpochPrediction:
    """Per-rank prediction for one training step (arrays of shape (P,), rank order of `GridShape`)."""

    shape: GridShape
    spec: ModelSpec
    stats_exact: bool
    terms: list[Term]
    memory: dict[str, np.ndarray]
    comm_s: np.ndarray
    compute_s: np.ndarray
    profile_name: str
    bytes_by_phase: dict[str, np.ndarray] = field(init=False)
    calls_by_phase: dict[str, np.ndarray] = field(init=False)

    def __post_init__(self) -> None:
        p = self.shape.world_size
        self.bytes_by_phase = {phase: np.zeros(p, dtype=np.int64) for phase in PHASES}
        self.calls_by_phase = {phase: np.zeros(p, dtype=np.int64) for phase in PHASES}
        for term in self.terms:
            self.bytes_by_phase[term.phase] += term.bytes
            self.calls_by_phase[term.phase] += term.calls

    @property
    def bytes(self) -> np.ndarray:
        return sum(self.bytes_by_phase.values())

    @property
    def calls(self) -> np.ndarray:
        return sum(self.calls_by_phase.values())

    @property
    def memory_bytes(self) -> np.ndarray:
        return sum(self.memory.values())

    @property
    def epoch_s(self) -> float:
        """Predicted training-step time: the slowest rank's communication plus computation."""
        return float((self.comm_s + self.compute_s).max())

    def comm_dict(self) -> dict:
        """``predicted_bytes`` (per-rank list) and ``predicted_by_phase`` / ``predicted_calls_by_phase``
        (phase -> per-rank list), shaped like the ``comm`` object of the metrics file."""
        return {
            "predicted_bytes": self.bytes.tolist(),
            "predicted_calls": self.calls.tolist(),
            "predicted_by_phase": {ph: v.tolist() for ph, v in self.bytes_by_phase.items()},
            "predicted_calls_by_phase": {ph: v.tolist() for ph, v in self.calls_by_phase.items()},
        }


def predict_epoch(model, graph, shape: GridShape, *, profile: MachineProfile | None = None,
                  sizes: SizeInfo = FLOAT32, blocks: ShapeBlocks | None = None) -> EpochPrediction:
    """Communication, memory and time of one training step on every rank of ``shape``.

    ``model``: a `ModelSpec`, or anything with ``layers``, ``hidden``, ``order`` (a `TrainConfig`).
    ``graph``: a `GraphStats`, or a loaded `Graph` (exact block nnz; pass the preprocessed graph that
    training uses). ``profile``: prices the time (default: `gridgnn.cost.profile.GPU_CLUSTER`).
    Pure: no process group, any P.
    """
    from gridgnn.cost.profile import GPU_CLUSTER

    stats = stats_for(model, graph)
    spec = ModelSpec.of(model, stats)
    blocks = shape_blocks(shape, stats) if blocks is None else blocks
    steps = layer_steps(spec)
    terms = step_terms(blocks, spec, steps, sizes)
    profile = GPU_CLUSTER if profile is None else profile
    comm_s = comm_seconds(terms, shape, profile)
    compute_s = compute_seconds(blocks, spec, steps, stats, profile)
    memory = memory_per_rank(blocks, spec, steps, stats, sizes)
    return EpochPrediction(shape, spec, stats.exact, terms, memory, comm_s, compute_s, profile.name)


def step_terms(blocks: ShapeBlocks, spec: ModelSpec, steps: list[LayerStep], sizes: SizeInfo) -> list[Term]:
    """Every collective of the training step, grouped into terms (see the module table)."""
    shape = blocks.shape
    terms: list[Term] = []
    for step in steps:
        terms += spmm_terms(blocks, step.spmm_width, backward=False, sizes=sizes)
        if step.spmm_backward:
            terms += spmm_terms(blocks, step.spmm_width, backward=True, sizes=sizes)
        terms += _dense_terms(blocks, step, sizes)
    terms += _weight_grad_terms(shape, spec, sizes)
    terms += _loss_terms(blocks, spec, sizes)
    return [t for t in terms if t.calls.any()]


def _col_size(shape: GridShape) -> int:
    return shape.sizes[1] if shape.algo in ("2d", "3d") else 1


def _column_term(blocks: ShapeBlocks, phase: str, op: str, width: int, sizes: SizeInfo) -> Term:
    pcol, p = _col_size(blocks.shape), blocks.shape.world_size
    chunk = int(feature_widths(width, pcol).max())
    nbytes = (pcol - 1) * chunk * blocks.local_rows * sizes.value
    return Term(phase, op, "col", pcol, np.ones(p, dtype=np.int64), nbytes.astype(np.int64))


def _dense_terms(blocks: ShapeBlocks, step: LayerStep, sizes: SizeInfo) -> list[Term]:
    pcol = _col_size(blocks.shape)
    if pcol == 1:
        return []
    terms = []
    for f_in, f_out, grad_in in step.products:
        if f_in <= f_out:  # gather the input's columns; backward reduce-scatters (if the input needs a grad)
            terms.append(_column_term(blocks, "dense", "all_gather", f_in, sizes))
            if grad_in:
                terms.append(_column_term(blocks, "dense", "reduce_scatter", f_in, sizes))
        else:
            terms += [_column_term(blocks, "dense", "reduce_scatter", f_out, sizes),
                      _column_term(blocks, "dense", "all_gather", f_out, sizes)]
    if step.row_norm:  # the row sums of squares, forward and backward
        p = blocks.shape.world_size
        nbytes = 2 * blocks.local_rows.astype(np.int64) * sizes.value * (pcol - 1) // pcol
        terms.append(Term("dense", "all_reduce", "col", pcol, np.full(p, 2, dtype=np.int64), 2 * nbytes))
    return terms


def _weight_grad_terms(shape: GridShape, spec: ModelSpec, sizes: SizeInfo) -> list[Term]:
    p = shape.world_size
    axis, size = ("row", shape.sizes[0]) if shape.algo in ("1d", "1.5d") else ("world", p)
    if size == 1:
        return []
    nbytes = 2 * spec.num_parameters() * sizes.value * (size - 1) // size
    return [Term("weight_grad", "all_reduce", axis, size, np.ones(p, dtype=np.int64),
                 np.full(p, nbytes, dtype=np.int64))]


def _loss_terms(blocks: ShapeBlocks, spec: ModelSpec, sizes: SizeInfo) -> list[Term]:
    p = blocks.shape.world_size
    terms = []
    if _col_size(blocks.shape) > 1:
        terms.append(_column_term(blocks, "loss", "all_gather", spec.num_classes, sizes))
    if p > 1:
        terms.append(Term("loss", "all_reduce", "world", p, np.ones(p, dtype=np.int64),
                          np.full(p, 2 * LOSS_BYTES * (p - 1) // p, dtype=np.int64)))
    return terms


def _intra_node(shape: GridShape, axis: str, per_node: int | None, order: tuple[str, ...] | None = None
                ) -> np.ndarray:
    """(P,) bool: the rank's ``axis`` group lies within one node (ranks fill nodes in order and take grid
    coordinates in ``order``, slowest axis first; default the grid's own order)."""
    p = shape.world_size
    if per_node is None or per_node >= p:
        return np.ones(p, dtype=bool)
    return within_node_by_position(shape, order or shape.axes, per_node, axis)


def comm_seconds(terms: list[Term], shape: GridShape, profile: MachineProfile) -> np.ndarray:
    """(P,) predicted seconds in collectives per rank (α·⌈log2 p⌉ per call + β·bytes, per link class).

    Ranks are placed on nodes as a run places them (`gridgnn.grid.placement.host_axis_order`: the axis
    that moves the most bytes varies fastest, so its groups stay within a node when they fit)."""
    total = np.zeros(shape.world_size)
    order = host_axis_order(shape, axis_bytes(terms), profile.procs_per_node)
    intra_by_axis: dict[str, np.ndarray] = {}
    for term in terms:
        if term.axis not in intra_by_axis:
            intra_by_axis[term.axis] = _intra_node(shape, term.axis, profile.procs_per_node, order)
        intra = intra_by_axis[term.axis]
        near, far = profile.link(term.op, False), profile.link(term.op, True)
        total += np.where(intra, near.time(term.group_size, term.calls, term.bytes),
                          far.time(term.group_size, term.calls, term.bytes))
    return total


def compute_seconds(blocks: ShapeBlocks, spec: ModelSpec, steps: list[LayerStep], stats: GraphStats,
                    profile: MachineProfile) -> np.ndarray:
    """(P,) predicted seconds of local work per rank: SpMM flops, dense flops, element-wise work."""
    shape = blocks.shape
    pcol = _col_size(shape)
    m = blocks.local_rows.astype(np.float64)
    j = blocks.coords.get("col")
    sparse, dense, elems = np.zeros(shape.world_size), np.zeros(shape.world_size), np.zeros(shape.world_size)
    for step in steps:
        f = step.spmm_width
        f_local = feature_widths(f, pcol)[j] if j is not None else f
        passes = 2 if step.spmm_backward else 1
        sparse += passes * 2.0 * blocks.mult_nnz * f_local
        for f_in, f_out, grad_in in step.products:
            dense += 2.0 * m * f_in * f_out / pcol * (3 if grad_in else 2)
        elems += m * (3 * step.f_in + 3 * step.f_out) / pcol
    elems += 4 * m * spec.num_classes
    return sparse / profile.sparse_flops + dense / profile.dense_flops + elems / profile.elementwise_per_s
