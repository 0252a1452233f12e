"""The whole training step of a GCN on a grid, per rank: communication by phase, memory, time (pure).

The model is not described here: `predict_epoch` prices the layout operations its forward issues
(`gridgnn.cost.operations`, recorded by `gridgnn.nn.trace` from the model's own code), each lowered onto the
grid's algorithm as `gridgnn.parallel.grid_ops.GridOps` executes it, in the byte convention of
`gridgnn.grid.comm` (evaluation is not counted, as in `gridgnn.train.loop.distributed.DistributedTrainer.train_step`):

==============  ================================================================================
phase           collectives (P ranks; m = the rank's dense rows; pcol = size of the ``col`` axis)
==============  ================================================================================
spmm_forward    each layer's ``Â X`` (`gridgnn.cost.sparse_cost.comm_spmm_terms`, width by the layer's order)
spmm_backward   each ``Âᵀ G``; none for a first layer that aggregates first (X needs no gradient)
dense           2D/3D only, each `Product` with a weight (``linear``: GCN one, SAGE two, GIN two) on
                ``col``: all-gather of the input's columns when f_in <= f_out, else reduce-scatter of the
                partial products; (pcol-1)·⌈width/pcol⌉·m values. Backward: the transpose collective,
                except an all-gather whose input needs no gradient (the features). None for the first
                layer's products with the features when each process keeps their full rows
                (``--full-feature-rows``, `Product.reads_features`). Each `RowSum` (SAGE with
                normalize): an all-reduce of the m row sums on ``col``, forward and backward; each
                `EdgeSum` (GAT's scores with edge features) the same of the rank's edges' values
weight_grad     1D/1.5D (and 2D/3D with one column block): one all-reduce of every parameter's gradient
                (`ModelSpec.num_parameters`; GIN's trainable ε included) on ``row`` (or ``world``). 2D/3D:
                each process's gradient is non-zero only in its column block of each weight and bias
                (`ModelOps.parameter_slices`), so those blocks, packed, are summed over the processes of the same
                column block (2D: all-reduce on ``row``; 3D: reduce-scatter on ``row``, all-reduce on
                ``depth``, all-gather on ``row``) and all-gathered on ``col`` (not with
                ``--defer-weight-gather``: each process updates only its blocks); the parameters read whole
                (GAT's attention vectors, GIN's trained ε) are all-reduced on ``world``. 1D/1.5D and 2D
                (3D with d = 1) with ``--defer-weight-gather`` on sparse features: the weights only the
                features' products read (`ModelOps.feature_weights`) are not summed whole but moved by rows
                (`gridgnn.cost.feature_row_cost`): an all-to-all on ``row`` of the gradient rows each
                block row touches to their owners, and after the step an all-to-all of the updated rows
                back, from `GraphStats.feature_touch_in`; the other parameters as above
loss            2D/3D: all-gather of the class columns on ``col`` (forward only); then the all-reduce of
                the float64 loss on ``world`` (`GridOps.global_sum`)
other           nothing in the training step
==============  ================================================================================

An `Attend` (GAT, `gridgnn.spmm.attention`) replaces a layer's SpMM, with x' = H W of width f = K·C and
the K score terms per vertex. 1D/1.5D: forward, the ``row`` broadcasts of an SpMM of width K (the score
terms; no replica all-reduce), two ``rep`` all-reduces of m·K values (row maximum and sum), then the SpMM of
width f; backward, the ``row`` broadcasts of width f again (for the SDDMM), the backward SpMM of width f, two
``rep`` all-reduces of m·K (the softmax's row sums, the score terms' gradient) and the backward SpMM of
width K (the source score terms' gradient, reduced to their owners). 2D and 3D: ``attention_terms`` of
`gridgnn.cost.algorithms.summa` and `split3d` (coefficients with the panels on ``col``, the SDDMM reduced to
each panel's owner), and in ``dense`` the ``col`` all-reduces of the score terms' head sums (two forward, two
backward) and, for an output layer of several heads, the column exchange of their mean.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from gridgnn.config.sections import ExecutionOptions
from gridgnn.cost.algorithms import costs_of
from gridgnn.cost.column_steps import column_steps
from gridgnn.cost.feature_row_cost import feature_row_axis, row_exchange_terms, weight_groups
from gridgnn.cost.graph_stats import GraphStats
from gridgnn.cost.halo_cost import edge_counts, halo_setup_terms, halo_terms
from gridgnn.cost.memory_model import memory_per_rank, sparse_features
from gridgnn.cost.operations import Attend, LayerOps, ModelOps
from gridgnn.cost.profile import MachineProfile
from gridgnn.cost.rank_cost import (
    ShapeBlocks,
    Term,
    cached_orientations,
    feature_widths,
    panel_cache_terms,
    shape_blocks,
)
from gridgnn.cost.setup_cost import cover_setup_seconds
from gridgnn.cost.sparse_cost import comm_spmm_terms, cover_setup_terms, index_exchange_terms
from gridgnn.cost.spmm_cost import FLOAT32, SizeInfo
from gridgnn.cost.terms import gather_term, scatter_sum_term, sum_terms
from gridgnn.cost.terms import term as make_term
from gridgnn.cost.weight_grad_steps import weight_grad_steps
from gridgnn.grid.comm_records import PHASES, WIRE_PHASES
from gridgnn.grid.placement import axis_bytes, host_axis_order, within_node_by_position
from gridgnn.grid.shape import GridShape

LOSS_BYTES = 8  # the loss is all-reduced as one float64


@dataclass(frozen=True)
class ModelSpec:
    """The model being trained, as the cost model prices it.

    Descriptive fields (as ``gridgnn train`` flags name them: widths in ``num_features``, out ``num_classes``;
    ``model`` the kind, with its options) say which model it is, for printing and for building it; the price
    reads only ``ops``, the model's layout operations (`gridgnn.cost.operations.ModelOps`), which
    `gridgnn.nn.trace.model_spec` records from the model's own forward. ``full_feature_rows`` and
    ``defer_weight_gather`` are execution options the pricing applies where they take effect."""

    num_features: int
    num_classes: int
    layers: int = 2
    hidden: int = 16
    order: str = "auto"
    bias: bool = True
    model: str = "gcn"
    sage_normalize: bool = False
    gin_train_eps: bool = False
    gin_norm: str = "none"
    heads: int = 1
    output_heads: int = 1
    attn_dropout: float = 0.0
    full_feature_rows: bool = False
    defer_weight_gather: bool = False
    ops: ModelOps | None = None
    edge_features: int = 0

    @classmethod
    def describe(cls, model, num_features: int, num_classes: int, edge_features: int = 0) -> ModelSpec:
        """The untraced `ModelSpec` of ``model`` (a `TrainConfig` or anything with its model fields; absent
        ones at their defaults) for ``num_features`` inputs, ``num_classes`` outputs and ``edge_features`` features
        per edge (a kind that reads none is described with 0)."""
        return cls(int(num_features), int(num_classes), int(model.layers), int(model.hidden),
                   str(getattr(model, "order", "auto")), model=str(getattr(model, "model", "gcn")),
                   sage_normalize=bool(getattr(model, "sage_normalize", False)),
                   gin_train_eps=bool(getattr(model, "gin_train_eps", False)),
                   gin_norm=str(getattr(model, "gin_norm", "none")),
                   heads=int(getattr(model, "heads", 1)), output_heads=int(getattr(model, "output_heads", 1)),
                   attn_dropout=float(getattr(model, "attn_dropout", 0.0)),
                   full_feature_rows=bool(getattr(model, "full_feature_rows", False)),
                   defer_weight_gather=bool(getattr(model, "defer_weight_gather", False)),
                   edge_features=int(edge_features))

    @property
    def traced(self) -> ModelOps:
        """`ops`, which pricing needs (ValueError naming where to get them when absent)."""
        if self.ops is None:
            raise ValueError("this ModelSpec has no traced operations: build it with "
                             "gridgnn.nn.trace.model_spec(config, graph)")
        return self.ops

    @property
    def self_loops(self) -> bool:
        """Whether the model's operator has the diagonal of A + I (GCN's Â, GAT's pattern) or only A's."""
        return self.traced.self_loops

    @property
    def widths(self) -> list[int]:
        """Layer widths (a GAT hidden layer is its heads' channels, concatenated)."""
        return self.traced.widths

    def keeps_feature_rows(self, shape: GridShape) -> bool:
        """Whether ``--full-feature-rows`` takes effect on ``shape`` (`ModelOps.keeps_feature_rows`)."""
        return self.full_feature_rows and self.traced.keeps_feature_rows(shape.col_blocks)

    def defers_weight_gather(self, shape: GridShape, sparse_features: bool = False) -> bool:
        """Whether ``--defer-weight-gather`` takes effect on ``shape``: a grid that splits feature columns over
        more than one column block (each process reads column blocks of the weights), or 1D/1.5D where the
        feature weights are reduced by rows (`reduces_feature_rows`)."""
        if not self.defer_weight_gather:
            return False
        if shape.splits_features:
            return shape.col_blocks > 1
        return self.reduces_feature_rows(shape, sparse_features)

    def reduces_feature_rows(self, shape: GridShape, sparse_features: bool = False) -> bool:
        """Whether ``--defer-weight-gather`` reduces the feature weights by rows on ``shape``
        (`gridgnn.parallel.feature_weight_rows`): the input features stay sparse (``sparse_features``,
        `gridgnn.cost.memory_model.sparse_features`), some weight is read only by the features' products, and
        the grid has an axis to do it on (`gridgnn.cost.feature_row_cost.feature_row_axis`)."""
        return (self.defer_weight_gather and sparse_features and feature_row_axis(shape) is not None
                and bool(self.traced.feature_weights))

    def num_parameters(self) -> int:
        """Trained values (every parameter of the model that requires a gradient)."""
        return self.traced.num_parameters


def stats_for(model, graph) -> GraphStats:
    """``graph`` itself when it is `GraphStats`, else exact statistics of the loaded graph's operator for
    ``model`` (a traced `ModelSpec`: A + I's pattern when its operator has self-loops, else A's)."""
    if isinstance(graph, GraphStats):
        return graph
    return GraphStats.from_graph(graph, self_loops=model.self_loops)


@dataclass
class EpochPrediction:
    """Per-rank prediction for one training step (arrays of shape (P,), rank order of `GridShape`).

    ``setup_terms`` / ``setup_s``: what runs once before the first step, not in ``bytes`` or ``epoch_s``: the
    index exchange of a sparse SpMM (`gridgnn.cost.sparse_cost.index_exchange_terms`: all-to-alls) or of a cover
    SpMM (`gridgnn.cost.sparse_cost.cover_setup_terms`: what each receiver tells its senders) and the
    Â panels of ``--cache-panels`` (`gridgnn.cost.rank_cost.panel_cache_terms`: broadcasts), and their seconds
    (with a cover's local work: `gridgnn.cost.setup_cost`)."""

    shape: GridShape
    spec: ModelSpec
    stats_exact: bool
    terms: list[Term]
    memory: dict[str, np.ndarray]
    comm_s: np.ndarray
    compute_s: np.ndarray
    profile_name: str
    setup_terms: list[Term] = field(default_factory=list)
    setup_s: np.ndarray | None = None
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
    def setup_bytes(self) -> np.ndarray:
        """(P,) bytes each rank receives once, at set-up (the index exchange of ``--comm sparse``, the panels of
        ``--cache-panels``; 0 for neither)."""
        return self.setup_sum("bytes")

    @property
    def setup_calls(self) -> np.ndarray:
        """(P,) collective calls each rank runs once, at set-up (as `setup_bytes`)."""
        return self.setup_sum("calls")

    def setup_sum(self, what: str, op: str | None = None) -> np.ndarray:
        """(P,) ``bytes`` or ``calls`` of the set-up terms, of the collective ``op`` only when given (the
        index exchange is ``all_to_all``, the panel cache ``broadcast``)."""
        chosen = [getattr(t, what) for t in self.setup_terms if op is None or t.op == op]
        return sum(chosen, np.zeros(self.shape.world_size, dtype=np.int64))

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


def predict_epoch(model: ModelSpec, graph, shape: GridShape, *, profile: MachineProfile | None = None,
                  sizes: SizeInfo = FLOAT32, blocks: ShapeBlocks | None = None,
                  comm: str = "dense", cache_panels: bool = False, device: str = "cpu",
                  comm_precision: str | None = None) -> EpochPrediction:
    """Communication, memory and time of one training step on every rank of ``shape``.

    ``model``: a `ModelSpec` with its traced operations (`gridgnn.nn.trace.model_spec`: from a `TrainConfig`
    or a `ModelSpec`). ``graph``: a `GraphStats`, or a loaded `Graph` (exact block nnz; pass the preprocessed
    graph that training uses). ``profile``: prices the time (default: `gridgnn.cost.profile.GPU_CLUSTER`).
    ``comm``: ``dense`` or ``sparse`` (the SpMM variant of ``--comm``); ``cache_panels``: ``--cache-panels``
    (2D/3D receive their Â panels once, at set-up: in ``setup_terms``, not in the step). ``device``: the
    device type training runs on, which decides whether sparse input features stay sparse (memory and
    compute; `gridgnn.cost.memory_model.sparse_features`); the planner passes its profile's
    (`MachineProfile.device`). ``comm_precision`` (``--comm-precision``; default ``sizes.precision``): the wire
    precision of the activation phases (`gridgnn.cost.spmm_cost.wire_row_bytes`). Pure: no process group, any P.
    """
    from gridgnn.cost.profile import GPU_CLUSTER

    if not isinstance(model, ModelSpec):
        raise TypeError("predict_epoch prices a ModelSpec: build it with gridgnn.nn.trace.model_spec(config, graph)")
    spec = model
    if comm_precision is not None:
        sizes = dataclasses.replace(sizes, precision=comm_precision)
    ops = spec.traced
    stats = stats_for(spec, graph)
    blocks = shape_blocks(shape, stats) if blocks is None else blocks
    feature_rows = spec.keeps_feature_rows(shape)
    terms = step_terms(blocks, spec, sizes, comm, cache_panels, sparse_features(stats, device))
    profile = GPU_CLUSTER if profile is None else profile
    comm_s = comm_seconds(terms, shape, profile)
    compute_s = compute_seconds(blocks, ops, feature_rows, stats, profile, device)
    panels = panel_cache_terms(blocks, sizes, cached_orientations(ops.operator) if cache_panels else ())
    kept = sum((t.bytes for t in panels), np.zeros(shape.world_size, dtype=np.int64))  # received once, kept
    memory = memory_per_rank(blocks, ops, feature_rows, stats, sizes, comm, kept, device)
    setup = {"sparse": index_exchange_terms, "cover": cover_setup_terms}.get(comm, lambda _: [])(blocks) + panels
    if ops.passes_messages:
        setup += halo_setup_terms(blocks, ops.messages_separable)
    setup_s = comm_seconds(setup, shape, profile, placed_by=terms)
    if comm == "cover":
        setup_s = setup_s + cover_setup_seconds(blocks)  # each receiver's cuts and matchings, on the host
    return EpochPrediction(shape, spec, stats.exact, terms, memory, comm_s, compute_s, profile.name, setup,
                           setup_s)


def predict_run(model: ModelSpec, graph, shape: GridShape, options: ExecutionOptions, **overrides) -> EpochPrediction:
    """`predict_epoch` of a run: its execution options read from ``options`` (an `ExecutionOptions`, or the
    whole `TrainConfig`): ``comm`` (``sparse``, ``cover``, else dense), ``cache_panels`` and ``comm_precision``,
    so a new option reaches every pricing of a run here. ``overrides`` replace any keyword of `predict_epoch` (another
    ``comm`` to compare, a ``profile``, a ``device``)."""
    keywords = {"comm": options.comm if options.comm in ("sparse", "cover") else "dense",
                "cache_panels": bool(options.cache_panels), "comm_precision": options.comm_precision}
    return predict_epoch(model, graph, shape, **{**keywords, **overrides})


def step_terms(blocks: ShapeBlocks, spec: ModelSpec, sizes: SizeInfo, comm: str = "dense",
               cached: bool = False, sparse_features: bool = False) -> list[Term]:
    """Every collective of the training step: each of the model's layout operations
    (`gridgnn.cost.operations`) lowered onto ``blocks``' algorithm, layer by layer (its aggregation first, then
    its dense operations in call order), then the weight-gradient reduction and the loss (see the module
    table). ``sparse_features``: the input features stay sparse in training (`ModelSpec.defers_weight_gather`)."""
    ops = spec.traced
    feature_rows = spec.keeps_feature_rows(blocks.shape)
    terms: list[Term] = []
    for layer in ops.layers:
        terms += _aggregation_terms(blocks, layer, sizes, comm, cached)
        for halo in layer.halos:  # message passing (`gridgnn.cost.halo_cost`)
            terms += halo_terms(blocks, halo.width, False, sizes, halo.separable)
            if halo.backward:
                terms += halo_terms(blocks, halo.width, True, sizes, halo.separable)
        terms += _dense_terms(blocks, layer, feature_rows, sizes)
    terms += _weight_grad_terms(blocks, spec, feature_rows, sizes, sparse_features)
    terms += _loss_terms(blocks, ops, sizes)
    return [t for t in terms if t.calls.any()]


def _aggregation_terms(blocks: ShapeBlocks, layer: LayerOps, sizes: SizeInfo, comm: str, cached: bool) -> list[Term]:
    """Each of the layer's SpMMs (forward, and backward when its input needs a gradient) and attentions."""
    terms: list[Term] = []
    for agg in layer.aggregations:
        if isinstance(agg, Attend):
            terms += attention_terms(blocks, agg.width, agg.heads, sizes, cached)
            continue
        terms += comm_spmm_terms(blocks, agg.width, backward=False, sizes=sizes, comm=comm, cached=cached)
        if agg.backward:
            terms += comm_spmm_terms(blocks, agg.width, backward=True, sizes=sizes, comm=comm, cached=cached)
    return terms


def attention_terms(blocks: ShapeBlocks, width: int, heads: int, sizes: SizeInfo,
                    cached: bool = False) -> list[Term]:
    """The collectives of one attention operation, x' of width ``width`` (see the module docstring; each
    algorithm's in its module of `gridgnn.cost.algorithms`); ``cached``: with ``--cache-panels``."""
    return costs_of(blocks.shape.algo).attention_terms(blocks, width, heads, sizes, cached)


def _col_size(shape: GridShape) -> int:
    return shape.col_blocks


def _column_term(blocks: ShapeBlocks, phase: str, op: str, width: int, sizes: SizeInfo) -> Term:
    """An all-gather or reduce-scatter on ``col`` of the column blocks of a (local rows x ``width``) matrix,
    carried transposed (`gridgnn.grid.comm.Communicator.all_gather_cols`: a row of the wire is one column of the
    rank's rows); in the wire precision each vertex row of a block is encoded (bytes per row: its block's
    `SizeInfo.row_bytes`), the all-gather padded to the largest block, the reduce-scatter an all-to-all."""
    pcol, p = _col_size(blocks.shape), blocks.shape.world_size
    widths = feature_widths(width, pcol)
    chunk = int(widths.max())
    rows = blocks.local_rows.astype(np.int64)
    if phase in WIRE_PHASES and not sizes.exact:
        per_row = sizes.row_bytes(widths)  # (pcol,) bytes of one vertex row of each column block
        if op == "all_gather":
            return make_term(phase, "all_gather", "col", pcol, 1, (pcol - 1) * int(per_row.max()) * rows, p)
        return make_term(phase, "all_to_all", "col", pcol, 1, (pcol - 1) * per_row[blocks.coords["col"]] * rows, p)
    if op == "all_gather":
        return gather_term(phase, "col", pcol, chunk, rows, sizes, 1, p)
    return scatter_sum_term(phase, "col", pcol, chunk, widths[blocks.coords["col"]], rows, sizes, 1, p)


def _dense_terms(blocks: ShapeBlocks, layer: LayerOps, feature_rows: bool, sizes: SizeInfo) -> list[Term]:
    """The layer's operations on feature columns, lowered onto a grid that splits them over ``col`` (none on
    one column block): the steps of `gridgnn.cost.column_steps` (what `GridOps` runs), priced; the all-reduces
    of an operation as one term of their calls, an edge sum's over the rank's edges."""
    if _col_size(blocks.shape) == 1:
        return []
    pcol, p = _col_size(blocks.shape), blocks.shape.world_size
    terms = []
    for op in layer.ops:
        steps = column_steps(op, feature_rows)
        reduces = [step for step in steps if step.op == "all_reduce"]
        if reduces:
            rows = edge_counts(blocks) if reduces[0].per_edge else blocks.local_rows
            at = dataclasses.replace(sizes, precision="fp32") if reduces[0].float32 else sizes
            terms += sum_terms("dense", "col", pcol, rows, reduces[0].width, blocks.coords["col"], at,
                               len(reduces), p)
        terms += [_column_term(blocks, step.phase, step.op, step.width, sizes) for step in steps
                  if step.op != "all_reduce"]
    return terms


def _weight_grad_terms(blocks: ShapeBlocks, spec: ModelSpec, feature_rows: bool, sizes: SizeInfo,
                       sparse_features: bool = False) -> list[Term]:
    """The steps of the weight-gradient reduction (`gridgnn.cost.weight_grad_steps`, which `GridOps` runs),
    each priced on every rank: the parameters read whole (1D/1.5D: all but the feature weights moved by rows;
    2D/3D: `gridgnn.cost.operations.ModelOps.parameter_slices` with no dim), each rank's column blocks of the
    others, packed (padded to the largest block's in the ``col`` all-gather), and with
    `ModelSpec.reduces_feature_rows` the feature weights' rows (`gridgnn.cost.feature_row_cost`). A step
    with nothing to move on a rank (an empty column block) is not counted there, as `GridOps` skips it."""
    shape = blocks.shape
    p = shape.world_size
    ops = spec.traced
    by_rows = ops.feature_weights if spec.reduces_feature_rows(shape, sparse_features) else ()
    if by_rows and (blocks.stats is None or blocks.stats.feature_indices is None):
        by_rows = ()  # statistics from counts: the touched rows are unknown, priced as the plain reduction
    groups = _feature_row_groups(blocks, spec, by_rows, feature_rows) if by_rows else []
    by_rows_values = sum(int(np.prod(ops.parameters[k])) for k in by_rows)
    per_block = np.zeros(max(shape.col_blocks, 1), dtype=np.int64)
    if shape.splits_features and shape.col_blocks > 1:
        slices = ops.parameter_slices(feature_rows)
        whole = sum(int(np.prod(dims)) for dims, dim in slices if dim is None)
        per_block = sum((_slice_sizes(dims, dim, shape.col_blocks) for k, (dims, dim) in enumerate(slices)
                         if dim is not None and k not in by_rows), per_block)
    else:
        whole = spec.num_parameters() - by_rows_values
    steps = weight_grad_steps(shape, whole=whole > 0, blocks=bool(per_block.any()), row_groups=len(groups),
                              defer=spec.defer_weight_gather)
    own = per_block[blocks.coords["col"]] if shape.splits_features and shape.col_blocks > 1 else per_block[:1]
    rows = [row_exchange_terms(blocks, ranges, widths, sizes) for ranges, widths in groups]
    terms, part = [], None
    taken = {"reduce": 0, "sum": 0, "refresh": 0}  # the row groups' steps priced so far, by kind
    for step in steps:
        size = p if step.axis == "world" else shape.size(step.axis)
        if step.part == "whole":
            terms.append(_all_reduce_term(step.axis, size, np.full(p, whole, np.int64), sizes))
        elif step.part == "rows":  # group by group: its reduce, its sum on depth; after the step the refreshes
            kind = "refresh" if step.after_step else ("sum" if step.op == "all_reduce" else "reduce")
            terms.append(rows[taken[kind]][kind])
            taken[kind] += 1
        elif step.axis == "col":  # the blocks gathered, padded to the largest
            terms.append(Term("weight_grad", "all_gather", "col", size, np.ones(p, dtype=np.int64),
                              np.full(p, (size - 1) * int(per_block.max()) * sizes.value, dtype=np.int64)))
        elif step.op == "all_reduce" and part is None:  # the blocks summed on one axis
            terms.append(_all_reduce_term(step.axis, size, own, sizes, (own > 0).astype(np.int64)))
        elif step.op == "all_reduce":  # the reduce-scattered part summed on the second axis
            terms.append(_all_reduce_term(step.axis, size, part, sizes, (part > 0).astype(np.int64)))
        else:  # the reduce-scatter of balanced parts (padded to the largest), and their all-gather
            base, extra = np.divmod(own, size)
            part = base + (blocks.coords[step.axis] < extra)
            terms.append(Term("weight_grad", step.op, step.axis, size, (own > 0).astype(np.int64),
                              ((size - 1) * -(-own // size) * sizes.value).astype(np.int64)))
    return terms


def _feature_row_groups(blocks: ShapeBlocks, spec: ModelSpec, by_rows: tuple[int, ...],
                        feature_rows: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    """The groups of feature weights ``by_rows`` moved together (`gridgnn.cost.feature_row_cost.weight_groups`:
    one on 1D/1.5D; on 2D/3D those read by input-column block, then by output-column block)."""
    ops, shape = spec.traced, blocks.shape
    dims = ops.parameter_slices(feature_rows) if shape.splits_features else [(s, None) for s in ops.parameters]
    return weight_groups([ops.parameters[k] for k in by_rows], [dims[k][1] for k in by_rows], shape.col_blocks,
                         blocks.stats.num_features)


def _slice_sizes(dims: tuple[int, ...], dim: int, pcol: int) -> np.ndarray:
    """(pcol,) values of each column block of a parameter of shape ``dims`` split along ``dim``."""
    rest = int(np.prod(dims)) // dims[dim]
    return feature_widths(dims[dim], pcol).astype(np.int64) * rest


def _all_reduce_term(axis: str, size: int, values: np.ndarray, sizes: SizeInfo,
                     calls: np.ndarray | None = None) -> Term:
    """One ``weight_grad`` all-reduce of ``values`` (P,) values per rank on ``axis`` (``size`` processes);
    ``calls``: (P,) 0 where a rank skips it (default 1 everywhere)."""
    nbytes = 2 * values.astype(np.int64) * sizes.value * (size - 1) // size
    calls = np.ones(len(values), dtype=np.int64) if calls is None else calls
    return Term("weight_grad", "all_reduce", axis, size, calls, nbytes * (calls > 0))


def _loss_terms(blocks: ShapeBlocks, ops: ModelOps, sizes: SizeInfo) -> list[Term]:
    """The stack's gathers of full rows (on ``col``, forward only), then the all-reduce of the float64 loss on
    ``world`` (`GridOps.global_sum`)."""
    p = blocks.shape.world_size
    terms = []
    if _col_size(blocks.shape) > 1:
        terms += [_column_term(blocks, step.phase, step.op, step.width, sizes) for op in ops.tail
                  for step in column_steps(op)]
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


def comm_seconds(terms: list[Term], shape: GridShape, profile: MachineProfile,
                 placed_by: list[Term] | None = None) -> np.ndarray:
    """(P,) predicted seconds in collectives per rank (α·⌈log2 p⌉ per call + β·bytes, per link class).

    Ranks are placed on nodes as a run places them (`gridgnn.grid.placement.host_axis_order`: the axis
    that moves the most bytes of a training step varies fastest, so its groups stay within a node when they
    fit); ``placed_by``: the step's terms when ``terms`` are not (the set-up's), default ``terms``."""
    total = np.zeros(shape.world_size)
    order = host_axis_order(shape, axis_bytes(terms if placed_by is None else placed_by), profile.procs_per_node)
    intra_by_axis: dict[str, np.ndarray] = {}
    for term in terms:
        if term.axis not in intra_by_axis:
            intra_by_axis[term.axis] = _intra_node(shape, term.axis, profile.procs_per_node, order)
        intra = intra_by_axis[term.axis]
        near, far = profile.link(term.op, False), profile.link(term.op, True)
        total += np.where(intra, near.time(term.group_size, term.calls, term.bytes),
                          far.time(term.group_size, term.calls, term.bytes))
    return total


def compute_seconds(blocks: ShapeBlocks, ops: ModelOps, feature_rows: bool, stats: GraphStats,
                    profile: MachineProfile, device: str = "cpu") -> np.ndarray:
    """(P,) predicted seconds of local work per rank: SpMM flops, dense flops, element-wise work; input
    features that stay sparse on ``device`` (`sparse_features`) count their stored values; ``feature_rows``:
    the first layer reads its rows' full features (``--full-feature-rows`` in effect)."""
    shape = blocks.shape
    pcol = _col_size(shape)
    m = blocks.local_rows.astype(np.float64)
    j = blocks.coords.get("col")
    sparse, dense, elems = np.zeros(shape.world_size), np.zeros(shape.world_size), np.zeros(shape.world_size)
    stored = stats.feature_nnz / stats.num_nodes if sparse_features(stats, device) else None  # per row of sparse X
    for layer in ops.layers:
        for agg in layer.aggregations:
            f_local = feature_widths(agg.width, pcol)[j] if j is not None else agg.width
            passes = 2 if agg.backward else 1
            sparse += passes * 2.0 * blocks.mult_nnz * f_local
        for product in layer.products:
            dense += 2.0 * m * product.f_in * product.f_out / pcol * (3 if product.input_grad else 2)
        sparse_in = layer.index == 0 and stored is not None and not layer.aggregates_first  # else made dense
        per_row = stored if sparse_in else layer.f_in  # sparse X into a sparse product: its stored values
        held = per_row if (feature_rows and layer.index == 0) else per_row / pcol  # full rows: every column
        elems += m * (3 * held + 3 * layer.f_out / pcol)
    elems += 4 * m * ops.widths[-1]
    return sparse / profile.sparse_flops + dense / profile.dense_flops + elems / profile.elementwise_per_s
