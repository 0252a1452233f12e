"""The operations a model asks of its layout in one training step (pure data: what the cost model prices).

A model is written once, as single-device math over `gridgnn.nn.layout.Layout`. `gridgnn.nn.trace` runs its
training forward once over a recording layout on ``meta`` tensors and writes down, in order, every layout
operation whose result depends on how rows and columns are split: its global widths, whether autograd runs its
backward (its input needs a gradient), and which parameters it reads. These records are the model's only
description for the cost model: each algorithm lowers each record into collectives
(`gridgnn.cost.epoch_model.step_terms`, `gridgnn.cost.algorithms`), and the memory and compute models read the
same records. Nothing here, nor in the rest of `gridgnn.cost`, knows a model kind: a new model is its forward
over `Layout`, and its price follows.

==================  =======================================================================================
record              the layout call it stands for (`gridgnn.nn.layout.Layout`)
==================  =======================================================================================
`Aggregate`         ``aggregate(x)``: ``M x`` for the model's operator, x of global width ``width``
`Attend`            ``attend(x, s_dst, s_src, heads=K, width=w)``: graph attention on the operator's pattern
`Product`           ``linear(h, W)``: ``h @ W`` with W (f_in, f_out), parameter number ``weight``
`Bias`              ``add_bias(z, b)``: parameter number ``param`` of ``width`` entries; also
                    ``scale_columns(z, g)``, read the same way (a per-column vector, its column block)
`HeadSum`           ``head_sum(x, K, w)``: each row's sum over each of K heads
`HeadMean`          ``head_mean(x, K, w)``: the mean of the K heads
`RowSum`            ``row_sum(x)``: each row's sum over its ``width`` columns
`EdgeSum`           ``edge_sum(v)``: per-edge values (``width`` per edge) summed over the feature columns'
                    processes (a message-passing layer's per-head scores, from partial sums of its columns)
`FullRows`          ``full_rows(z, w)``: every column of the rows (the class-column gather)
`SourceRows`        ``source_rows(x)``: the rows a message-passing layer's edges read (its halo), x of global
                    width ``width`` (`gridgnn.nn.message_passing`)
==================  =======================================================================================

``backward`` is True when the operation's input needs a gradient, so autograd runs its transpose (the
features need none: a first layer that aggregates them first runs no backward SpMM). ``reads_features``
marks an operation whose input is the model's input features themselves (after dropout): when every such
operation is a `Product`, a grid may keep full feature rows and run those products locally
(``--full-feature-rows``, `ModelOps.transforms_features`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Aggregate:
    """``aggregate(x)`` of global width ``width``; ``backward``: its transpose runs in backward."""

    width: int
    backward: bool
    reads_features: bool = False


@dataclass(frozen=True)
class Attend:
    """``attend`` on x' of global width ``width`` in ``heads`` heads; ``dropout``: attention coefficients are
    dropped out (masks drawn per edge)."""

    width: int
    heads: int
    backward: bool
    dropout: bool = False
    reads_features: bool = False


@dataclass(frozen=True)
class Product:
    """``linear(h, W)`` with W (f_in, f_out), the model's parameter number ``weight``; ``input_grad``: h needs
    a gradient (autograd computes ``G Wᵀ``)."""

    f_in: int
    f_out: int
    input_grad: bool
    weight: int
    reads_features: bool = False


@dataclass(frozen=True)
class Bias:
    """``add_bias(z, b)`` with b of ``width`` entries, the model's parameter number ``param``."""

    width: int
    param: int


@dataclass(frozen=True)
class HeadSum:
    """``head_sum(x, heads, width)``: (m, heads) sums of x's ``width`` columns."""

    width: int
    heads: int
    backward: bool


@dataclass(frozen=True)
class HeadMean:
    """``head_mean(x, heads, width)``: the mean of x's ``heads`` heads of ``width / heads`` columns."""

    width: int
    heads: int
    backward: bool


@dataclass(frozen=True)
class RowSum:
    """``row_sum(x)``: (m, 1) sums of x's ``width`` columns."""

    width: int
    backward: bool


@dataclass(frozen=True)
class EdgeSum:
    """``edge_sum(v)``: (E, ``width``) per-edge partial sums of this process's feature columns, summed over
    all of them (one value per edge of the block row, E its edges; GAT's scores with edge features)."""

    width: int
    backward: bool


@dataclass(frozen=True)
class FullRows:
    """``full_rows(z, width)``: all ``width`` columns of the rows (forward only: backward keeps the block's)."""

    width: int


@dataclass(frozen=True)
class SourceRows:
    """``source_rows(x)`` of global width ``width``: the halo rows a message-passing layer's edges read move in
    (1D/1.5D: `gridgnn.parallel.edge_halo`); ``backward``: x needs a gradient (their gradients move back);
    ``edge_features``: the d features each edge carries (0: none); ``edge_values``: the float values per edge its
    layer's autograd keeps for backward, and ``edge_temporaries`` those alive at once only while the layer runs
    (gathered rows, message temporaries, gradients in backward); None: the memory model's defaults, two arrays
    of ``width`` each; a layer says its own with ``MessagePassing.edge_values`` and ``edge_temporaries``;
    ``separable``: the message is separable over feature columns
    (``MessagePassing.column_separable``), so 2D runs it on each process's columns."""

    width: int
    backward: bool
    reads_features: bool = False
    edge_features: int = 0
    edge_values: int | None = None
    edge_temporaries: int | None = None
    separable: bool = False


DEFAULT_EDGE_ARRAYS = 2
"""Per-edge arrays of its source rows' width that a message-passing layer keeps for backward, and holds while it
runs, unless it says otherwise (`SourceRows.edge_values` and ``edge_temporaries`` None;
`gridgnn.nn.message_passing.MessagePassing.edge_values`): the message before and after its non-linearity; the
gathered rows and a gradient."""

Operation = Aggregate | Attend | Product | Bias | HeadSum | HeadMean | RowSum | EdgeSum | FullRows | SourceRows
"""One recorded layout call."""

RECORDS: dict[str, type] = {cls.__name__: cls for cls in (Aggregate, Attend, Product, Bias, HeadSum, HeadMean, RowSum,
                                                          EdgeSum, FullRows, SourceRows)}
"""Record name -> record class (the committed trace templates name records, `gridgnn.plan.op_templates`)."""


@dataclass(frozen=True)
class LayerOps:
    """The operations of layer ``index`` (input width ``f_in``, output width ``f_out``), in call order."""

    index: int
    f_in: int
    f_out: int
    ops: tuple[Operation, ...]

    @property
    def products(self) -> tuple[Product, ...]:
        return tuple(op for op in self.ops if isinstance(op, Product))

    @property
    def aggregations(self) -> tuple[Aggregate | Attend, ...]:
        """The layer's SpMMs and attentions, in call order (SGC's K hops are K of them)."""
        return tuple(op for op in self.ops if isinstance(op, (Aggregate, Attend)))

    @property
    def aggregation(self) -> Aggregate | Attend | None:
        """The layer's first SpMM or attention (None for a layer without one)."""
        return next(iter(self.aggregations), None)

    @property
    def aggregates_first(self) -> bool:
        """The aggregation runs before the first product with a weight (GCN's ``aggregate-first`` order)."""
        kinds = [type(op) for op in self.ops]
        first_product = kinds.index(Product) if Product in kinds else len(kinds)
        agg = self.aggregation
        return agg is not None and self.ops.index(agg) < first_product

    @property
    def halos(self) -> tuple[SourceRows, ...]:
        """The layer's message-passing halo exchanges, in call order."""
        return tuple(op for op in self.ops if isinstance(op, SourceRows))

    @property
    def spmm_width(self) -> int:
        """Global width of the layer's widest aggregation (0 without one)."""
        return max((op.width for op in self.aggregations), default=0)

    @property
    def heads(self) -> int:
        """Attention heads of the layer (1 without attention)."""
        agg = self.aggregation
        return agg.heads if isinstance(agg, Attend) else 1


@dataclass(frozen=True)
class ModelOps:
    """A model's training step as layout operations: ``layers`` in order, then ``tail`` (what the stack does
    after its last layer: the class-column gather); ``parameters``: the shape of every trained parameter in
    the model's order (the numbers `Product.weight` and `Bias.param` refer to); ``operator``: the aggregation
    operator (`gridgnn.data.operators`), ``self_loops``: whether its pattern has A + I's diagonal."""

    operator: str
    self_loops: bool
    layers: tuple[LayerOps, ...]
    tail: tuple[Operation, ...]
    parameters: tuple[tuple[int, ...], ...]

    @property
    def widths(self) -> list[int]:
        """``[f_in of layer 0] + [f_out of every layer]``."""
        return [self.layers[0].f_in] + [layer.f_out for layer in self.layers]

    @property
    def num_parameters(self) -> int:
        total = 0
        for shape in self.parameters:
            size = 1
            for dim in shape:
                size *= dim
            total += size
        return total

    @property
    def attends(self) -> bool:
        """Some layer runs attention (per-edge arrays in memory)."""
        return any(isinstance(op, Attend) for layer in self.layers for op in layer.aggregations)

    @property
    def passes_messages(self) -> bool:
        """Some layer passes messages over the edges (`SourceRows`): 1D and 1.5D, and 2D when
        `messages_separable`."""
        return any(layer.halos for layer in self.layers)

    @property
    def messages_separable(self) -> bool:
        """Every message is separable over feature columns (it also runs on 2D)."""
        return all(op.separable for layer in self.layers for op in layer.halos)

    @property
    def transforms_features(self) -> bool:
        """Every operation that reads the input features is a `Product` (and there is one): a grid may then
        keep each process's full feature rows and run those products locally (``--full-feature-rows``)."""
        readers = [op for layer in self.layers for op in layer.ops if getattr(op, "reads_features", False)]
        return bool(readers) and all(isinstance(op, Product) for op in readers)

    def keeps_feature_rows(self, col_blocks: int) -> bool:
        """Whether ``--full-feature-rows`` takes effect on a grid of ``col_blocks`` column blocks: more than
        one, an input at least 2 wide (so that no column block holds all of it), and `transforms_features`."""
        return col_blocks > 1 and self.widths[0] > 1 and self.transforms_features

    @property
    def feature_weights(self) -> tuple[int, ...]:
        """The numbers of the weights read only by products of the input features (a first layer's ``X W``):
        on sparse features a process's gradient of such a weight is zero outside the rows of the feature
        columns its vertices have, which 1D and 1.5D reduce sparsely with ``--defer-weight-gather``
        (`gridgnn.parallel.feature_weight_rows`). In parameter order."""
        readers: dict[int, bool] = {}
        for layer in self.layers:
            for op in layer.products:
                readers[op.weight] = readers.get(op.weight, True) and op.reads_features
        return tuple(sorted(number for number, only_features in readers.items() if only_features))

    def parameter_slices(self, feature_rows: bool) -> list[tuple[tuple[int, ...], int | None]]:
        """(shape, dim) of every parameter as a grid that splits feature columns reads it: ``dim`` is the axis
        of which each process reads only its column block (a weight's columns when its product gathers the
        input (f_in <= f_out) or takes full feature rows (``feature_rows``), its rows when it reduce-scatters
        the partial products; a bias's entries), None for a parameter no product or bias reads (read whole:
        GAT's attention vectors, GIN's trained ε)."""
        dims: dict[int, int] = {}
        for layer in self.layers:
            for op in layer.ops:
                if isinstance(op, Product):
                    local = feature_rows and op.reads_features
                    dims[op.weight] = 1 if local or op.f_in <= op.f_out else 0
                elif isinstance(op, Bias):
                    dims[op.param] = 0
        return [(shape, dims.get(number)) for number, shape in enumerate(self.parameters)]
