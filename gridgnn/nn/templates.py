"""The built-in model kinds' traces as templates, so that `gridgnn plan` prices them without importing torch.

A layer's operations (`gridgnn.cost.operations`) depend on its kind and the kind's options, its position in the
stack (``only``, ``first``, ``middle``, ``last``: the first reads the features, which need no gradient; the
last averages GAT's heads), its resolved order, and its widths. `layer_templates` traces each such layer once
(`gridgnn.nn.trace.trace_model`, the models' own forward) at distinct widths and writes every width as a
symbol of the layer's input width ``i``, output width ``o`` and heads ``k``; `gridgnn.plan.op_templates`
instantiates them for any widths without torch. `scripts/op_templates.py` writes the table into
`gridgnn/plan/op_templates.json`, and ``tests/plan/test_op_templates.py`` checks that the committed table is
what this module generates and that every instantiation equals the live trace. Not collective.
"""

from __future__ import annotations

import dataclasses
import itertools

from gridgnn.cost.epoch_model import ModelSpec
from gridgnn.cost.operations import Bias, Product
from gridgnn.nn.models import MODELS
from gridgnn.nn.trace import model_spec

F_IN, CHANNELS, CLASSES, HEADS, OUTPUT_HEADS = 1009, 1013, 1019, 3, 5
"""Distinct widths to trace at (primes, so that every width in a trace names its symbol)."""

OPTIONS = {"sage_normalize": (False, True), "gin_train_eps": (False, True), "gin_norm": ("none", "layer"),
           "heads": (1, HEADS), "output_heads": (1, OUTPUT_HEADS), "attn_dropout": (0.0, 0.5)}
"""The `ModelSpec` options a kind may read, each at two values (a template keys on which of the two)."""

ORDERS = ("aggregate-first", "transform-first")
WIDTH_FIELDS = ("width", "f_in", "f_out", "heads")
"""The integer fields of the records that hold widths (the others: flags and parameter numbers)."""


def _symbols(i: int, o: int, k: int) -> dict[int, str]:
    """Value -> symbol for a layer of input width ``i``, output width ``o`` and ``k`` heads (the simplest
    symbol wins where two coincide: a middle layer's ``i`` is its ``o``)."""
    table = {}
    for symbol, value in (("i", i), ("o", o), ("k", k), ("k*o", k * o), ("o/k", o // k), ("1", 1)):
        table.setdefault(value, symbol)
    return table


def _symbolize(value, table: dict[int, str]):
    if value not in table:
        raise ValueError(f"width {value} of a traced layer is no symbol of its widths {table}")
    return table[value]


def _layer_template(layer, heads: int, first_param: int) -> dict:
    """One traced layer as a template: its records with symbolic widths and parameter numbers relative to the
    layer's first parameter."""
    table = _symbols(layer.f_in, layer.f_out, heads)
    ops = []
    for op in layer.ops:  # [record name, its fields' values in their order]
        values = []
        for field in dataclasses.fields(op):
            value = getattr(op, field.name)
            if field.name in WIDTH_FIELDS:
                value = _symbolize(value, table)
            elif field.name in ("weight", "param"):
                value = value - first_param
            values.append(value)
        ops.append([type(op).__name__, values])
    return {"ops": ops}


def _positions(layers: int) -> list[str]:
    return ["only"] if layers == 1 else ["first"] + ["middle"] * (layers - 2) + ["last"]


def layer_templates() -> dict:
    """The table: ``defaults`` (each option's first value), ``kinds`` (kind -> operator, self-loops, label, the
    options it reads, whether its hidden width is ``hidden`` times the heads) and ``layers``
    (``kind|options|position|order`` -> the layer's template with its parameter shapes)."""
    kinds, layers = {}, {}
    for kind, cls in sorted(MODELS.items()):  # the registry's kinds (one registered later is traced live)
        if cls.edge_inputs:  # its parameters' shapes name the edge features' width: traced live
            continue
        base = ModelSpec(F_IN, CLASSES, 3, CHANNELS, model=kind)
        read = [name for name, values in OPTIONS.items()
                if _trace_layers(dataclasses.replace(base, **{name: values[1]})) != _trace_layers(base)]
        wide = model_spec(dataclasses.replace(base, heads=HEADS), None).ops.widths[1]
        kinds[kind] = {"operator": cls.operator, "self_loops": model_spec(base, None).self_loops,
                       "label": cls.label or kind, "options": read,
                       "hidden_times_heads": wide == CHANNELS * HEADS}  # GAT's hidden layers concatenate heads
        for values in itertools.product(*(OPTIONS[name] for name in read)):
            options = dict(zip(read, values, strict=True))
            for depth, order in itertools.product((1, 3), ORDERS):
                spec = model_spec(dataclasses.replace(base, layers=depth, order=order, **options), None)
                first = 0
                for position, layer in zip(_positions(depth), spec.ops.layers, strict=True):
                    heads = options.get("output_heads" if position in ("only", "last") else "heads", 1)
                    count = _parameters_of(spec, layer)
                    template = _layer_template(layer, heads, first)
                    template["parameters"] = [[_symbolize(d, _symbols(layer.f_in, layer.f_out, heads)) for d in shape]
                                              for shape in spec.ops.parameters[first:first + count]]
                    layers[layer_key(kind, [options[name] != OPTIONS[name][0] for name in read], position, order)] = \
                        template
                    first += count
    return {"defaults": {name: values[0] for name, values in OPTIONS.items()}, "kinds": kinds, "layers": layers}


def layer_key(kind: str, flags: list[bool], position: str, order: str) -> str:
    """The table's key of a layer: its kind, which of its options are at their second value, its position and
    its resolved order."""
    return f"{kind}|{''.join('1' if f else '0' for f in flags)}|{position}|{order}"


def _trace_layers(spec: ModelSpec):
    return model_spec(spec, None).ops


def _parameters_of(spec: ModelSpec, layer) -> int:
    """How many of the model's parameters belong to ``layer`` (its records name them; a parameter no record
    names, GIN's ε or GAT's attention vectors, sits among them, in the layer's own module)."""
    numbers = [op.weight if isinstance(op, Product) else op.param for op in layer.ops
               if isinstance(op, (Product, Bias))]
    per_layer = len(spec.ops.parameters) // len(spec.ops.layers)
    if len(spec.ops.parameters) % len(spec.ops.layers) or (numbers and max(numbers) - min(numbers) >= per_layer):
        raise ValueError("the built-in kinds have the same parameters in every layer")
    return per_layer
