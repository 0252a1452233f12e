"""A model's training step as layout operations: its forward run once on a recording layout over meta tensors.

`trace_model` gives the model (any `gridgnn.nn.stack.LayerStack`) a `RecordingLayout` and ``meta`` inputs
(no memory, no arithmetic), in training mode, and collects the `gridgnn.cost.operations` records of every
layout call: global widths, whether autograd runs the call's backward (its input requires a gradient, which
meta tensors track as real ones do), the parameters each product and bias reads. `model_spec` builds the
model a configuration describes on the meta device and returns the `gridgnn.cost.epoch_model.ModelSpec` that
carries those records: the only description of a model the cost model, the planner and the memory guard
read. A new model kind therefore needs nothing in `gridgnn.cost`: its forward over `Layout` is its price.
Not collective.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor, nn

from gridgnn.cost.epoch_model import ModelSpec
from gridgnn.cost.operations import (
    Aggregate,
    Attend,
    Bias,
    EdgeSum,
    FullRows,
    HeadMean,
    HeadSum,
    LayerOps,
    ModelOps,
    Operation,
    Product,
    RowSum,
    SourceRows,
)
from gridgnn.data.operators import has_self_loops
from gridgnn.nn.message_passing import EdgeSet
from gridgnn.nn.stack import LayerStack

TRACE_ROWS = 4
"""Rows of the meta activations (any count: only widths and gradient flags are recorded)."""
TRACE_EDGES = 6
"""Edges of the meta `gridgnn.nn.message_passing.EdgeSet` (two halo rows beyond the rows)."""


class RecordingLayout:
    """A `gridgnn.nn.layout.Layout` of one process over ``meta`` tensors that records each call (see
    `gridgnn.cost.operations`). ``parameters``: the model's parameters in order (products and biases name
    them by number). The current layer is set by `trace_model` (forward pre-hooks)."""

    def __init__(self, operator: str, parameters: Sequence[nn.Parameter], rows: int = TRACE_ROWS,
                 edge_features: int = 0):
        self.operator, self.rows, self.edge_features = operator, rows, edge_features
        self.defer_gather = False
        self.numbers = {id(p): k for k, p in enumerate(parameters)}
        self.layers: list[list[Operation]] = []
        self.tail: list[Operation] = []
        self.features: Tensor | None = None  # layer 0's input: the (dropped-out) input features
        self.current: list[Operation] = self.tail

    def start_layer(self, h: Tensor) -> None:
        """Open the next layer's record; the first layer's input is the features."""
        if not self.layers:
            self.features = h
        self.layers.append([])
        self.current = self.layers[-1]

    def end_layer(self) -> None:
        self.current = self.tail

    @property
    def device(self) -> torch.device:
        return torch.device("meta")

    @property
    def row_range(self) -> tuple[int, int]:
        return 0, self.rows

    def col_range(self, width: int) -> tuple[int, int]:
        return 0, width

    def input_range(self, width: int) -> tuple[int, int]:
        return 0, width

    def row_ids(self, device: torch.device) -> Tensor:
        return torch.arange(self.rows, device=device)

    def set_vertex_order(self, order: Sequence[int] | np.ndarray | None) -> None:
        """Nothing to rename: no real rows."""

    def _reads_features(self, x: Tensor) -> bool:
        return x is self.features

    def _result(self, shape: tuple[int, ...], *inputs: Tensor) -> Tensor:
        """A meta tensor of ``shape`` that requires a gradient when any input does (as autograd's would)."""
        return torch.empty(shape, device="meta").requires_grad_(any(t.requires_grad for t in inputs))

    def _number(self, parameter: Tensor) -> int:
        if id(parameter) not in self.numbers:
            raise TypeError("a model passes its parameters themselves to linear and add_bias (a parameter of "
                            "the model, not a tensor derived from one)")
        return self.numbers[id(parameter)]

    def aggregate(self, x: Tensor) -> Tensor:
        self.current.append(Aggregate(int(x.shape[1]), x.requires_grad, self._reads_features(x)))
        return self._result(tuple(x.shape), x)

    def linear(self, h: Tensor, weight: Tensor) -> Tensor:
        f_in, f_out = (int(d) for d in weight.shape)
        self.current.append(Product(f_in, f_out, h.requires_grad, self._number(weight), self._reads_features(h)))
        return self._result((int(h.shape[0]), f_out), h, weight)

    def add_bias(self, z: Tensor, bias: Tensor) -> Tensor:
        self.current.append(Bias(int(bias.numel()), self._number(bias)))
        return z + bias

    def scale_columns(self, z: Tensor, gain: Tensor) -> Tensor:
        # priced as a bias: a per-column vector each process reads in its column block, no communication
        self.current.append(Bias(int(gain.numel()), self._number(gain)))
        return z * gain

    def row_sum(self, x: Tensor) -> Tensor:
        self.current.append(RowSum(int(x.shape[1]), x.requires_grad))
        return self._result((int(x.shape[0]), 1), x)

    def full_rows(self, z: Tensor, width: int) -> Tensor:
        self.current.append(FullRows(int(width)))
        return z

    def head_sum(self, x: Tensor, heads: int, width: int) -> Tensor:
        self.current.append(HeadSum(int(width), int(heads), x.requires_grad))
        return self._result((int(x.shape[0]), int(heads)), x)

    def head_mean(self, x: Tensor, heads: int, width: int) -> Tensor:
        self.current.append(HeadMean(int(width), int(heads), x.requires_grad))
        return self._result((int(x.shape[0]), int(width) // int(heads)), x)

    def edge_sum(self, values: Tensor) -> Tensor:
        self.current.append(EdgeSum(int(values.shape[1]), values.requires_grad))
        return self._result(tuple(values.shape), values)

    def attend(self, x: Tensor, s_dst: Tensor, s_src: Tensor, *, heads: int, width: int, negative_slope: float,
               drop=None) -> Tensor:
        grad = x.requires_grad or s_dst.requires_grad or s_src.requires_grad
        self.current.append(Attend(int(width), int(heads), grad, drop is not None, self._reads_features(x)))
        return self._result(tuple(x.shape), x, s_dst, s_src)

    def edges(self) -> EdgeSet:
        meta = torch.device("meta")
        attr = torch.empty((TRACE_EDGES, self.edge_features), device=meta) if self.edge_features else None
        index = torch.empty(TRACE_EDGES, dtype=torch.int64, device=meta)
        return EdgeSet(index, index, attr, self.rows, self.rows + 2,
                       torch.empty(self.rows + 2, dtype=torch.int64, device=meta))

    def source_rows(self, x: Tensor) -> Tensor:
        self.current.append(SourceRows(int(x.shape[1]), x.requires_grad, self._reads_features(x),
                                       self.edge_features))
        return self._result((self.rows + 2, int(x.shape[1])), x)

    def reduce_gradients(self, params: list[nn.Parameter]) -> None:
        """Recorded by the cost model from the parameters' reads, not here."""

    def after_step(self, params) -> None:
        """Recorded by the cost model from the parameters' reads, not here."""

    def gather_parameters(self, params, optimizer=None, copies=None) -> None:
        """Nothing to gather."""

    def global_sum(self, values: Tensor) -> Tensor:
        return values


def trace_model(model: LayerStack, edge_features: int = 0) -> ModelOps:
    """The layout operations of one training forward of ``model`` (built on the ``meta`` device: run on meta
    inputs in training mode, so dropout and attention dropout are on as in a training step; the model's own
    mode is left as it was); its edges carry ``edge_features`` features each."""
    parameters = [p for p in model.parameters() if p.requires_grad]
    layout = RecordingLayout(model.operator, parameters, edge_features=edge_features)
    hooks = [layer.register_forward_pre_hook(lambda _m, args: layout.start_layer(args[0]))
             for layer in model.layers]
    hooks += [layer.register_forward_hook(lambda _m, _a, _o: layout.end_layer()) for layer in model.layers]
    was_training = model.training
    try:
        model.train()
        model(torch.empty((layout.rows, model.layers[0].in_channels), device="meta"), layout)
    finally:
        model.train(was_training)
        for hook in hooks:
            hook.remove()
    layers = tuple(LayerOps(k, int(layer.in_channels), int(layer.out_channels), tuple(_edge_values(layer, ops)))
                   for k, (layer, ops) in enumerate(zip(model.layers, layout.layers, strict=True)))
    return ModelOps(model.operator, has_self_loops(model.operator), layers, tuple(layout.tail),
                    tuple(tuple(int(d) for d in p.shape) for p in parameters))


def _edge_values(layer: nn.Module, ops: list[Operation]) -> list[Operation]:
    """``ops`` with each `SourceRows` record carrying the per-edge values ``layer`` keeps and those alive only
    while it runs (its ``edge_values`` and ``edge_temporaries``, `gridgnn.nn.message_passing.MessagePassing`),
    for the memory model, and whether its message is separable over feature columns (its
    ``column_separable``)."""
    kept, temporaries = getattr(layer, "edge_values", None), getattr(layer, "edge_temporaries", None)
    separable = bool(getattr(layer, "column_separable", False))
    return [dataclasses.replace(op, separable=separable,
                                edge_values=int(kept(op.width, op.edge_features)) if kept else None,
                                edge_temporaries=int(temporaries(op.width, op.edge_features)) if temporaries else None)
            if isinstance(op, SourceRows) else op for op in ops]


def model_spec(model, graph) -> ModelSpec:
    """The `ModelSpec` of ``model`` (a `TrainConfig`, anything with its model fields, or a `ModelSpec`) for a
    graph of ``graph.num_features`` inputs and ``graph.num_classes`` outputs (a `Graph`, `PreparedGraph` or
    `GraphStats`; ignored for a `ModelSpec`), its `ModelSpec.ops` traced. Not collective."""
    spec = model if isinstance(model, ModelSpec) else ModelSpec.describe(
        model, graph.num_features, graph.num_classes, edge_features_of(model, graph))
    if spec.ops is None:
        spec = dataclasses.replace(spec, ops=_ops_of(dataclasses.replace(spec, full_feature_rows=False,
                                                                         defer_weight_gather=False)))
    return spec


@functools.lru_cache(maxsize=256)
def _ops_of(spec: ModelSpec) -> ModelOps:
    """The traced operations of the model ``spec`` describes (cached: the planner prices one model on many
    grids)."""
    from gridgnn.nn.models import build_model

    with torch.device("meta"):
        model = build_model(_ModelFields(spec), spec.num_features, spec.num_classes,
                            num_edge_features=spec.edge_features)
    return trace_model(model, spec.edge_features)


def edge_features_of(model, graph) -> int:
    """The edge features ``model`` reads of ``graph`` (a `Graph`, `GraphStats`, ...): the graph's count for a
    model that reads them (`gridgnn.nn.models.reads_edges`), else 0 (an unregistered kind too)."""
    from gridgnn.nn.models import MODELS, reads_edges

    reads = str(getattr(model, "model", "gcn")) in MODELS and reads_edges(model)
    return int(getattr(graph, "num_edge_features", 0) or 0) if reads else 0


@dataclasses.dataclass(frozen=True)
class _ModelFields:
    """The fields `gridgnn.nn.models.build_model` reads, from a `ModelSpec` (dropout on: a training step;
    ε's value and the seed do not change which operations run)."""

    spec: ModelSpec

    def __getattr__(self, name: str):
        from gridgnn.nn.models import MODELS

        kind = MODELS.get(self.spec.model)
        defaults = {"dropout": 0.5, "seed": 0, "gin_eps": 0.0, "edge_dim": 0,
                    **(kind.options_from_spec(self.spec) if kind else {})}  # a kind's options the spec fixes
        if name in defaults:
            return defaults[name]
        return getattr(self.spec, name)
