"""A built-in model's layout operations from the committed templates, without torch (what `gridgnn plan` prices).

`gridgnn.nn.templates` traces each layer shape of the built-in kinds once, from the models' own forward, and
`scripts/op_templates.py` commits the result as the package file ``gridgnn/plan/op_templates.json``; ``tests/plan/
test_op_templates.py`` checks that the committed table is what the traces give and that every instantiation here
equals the live trace (`gridgnn.nn.trace.model_spec`). `spec_for` uses the table for a built-in kind and traces
any other kind live (which imports torch). Not collective.
"""

from __future__ import annotations

import dataclasses
import json
from importlib import resources

from gridgnn.config import resolve_order
from gridgnn.cost.epoch_model import ModelSpec
from gridgnn.cost.operations import RECORDS, FullRows, LayerOps, ModelOps

TABLE: dict = json.loads(resources.files("gridgnn.plan").joinpath("op_templates.json").read_text(encoding="utf-8"))
"""The committed templates: ``defaults`` (option values), ``kinds`` (operator, label, options of each built-in
kind) and the layer templates (`gridgnn.nn.templates.layer_templates`)."""


def known(kind: str) -> bool:
    """Whether ``kind`` is a built-in kind the table covers."""
    return kind in TABLE["kinds"]


def self_loops_of(kind: str) -> bool:
    """Whether the operator of the built-in ``kind`` has A + I's pattern (as `gridgnn.nn.models.self_loops_of`,
    without importing the models); another kind is asked of its class."""
    if known(kind):
        return TABLE["kinds"][kind]["self_loops"]
    from gridgnn.nn.models import self_loops_of as of_class

    return of_class(kind)


def label_of(kind: str) -> str:
    """How summaries name ``kind`` (as `gridgnn.nn.models.label_of`, without importing the models for a
    built-in kind)."""
    if known(kind):
        return TABLE["kinds"][kind]["label"]
    from gridgnn.nn.models import label_of as of_class

    return of_class(kind)


def spec_for(model, graph) -> ModelSpec:
    """`gridgnn.nn.trace.model_spec` of ``model`` (a `TrainConfig`-like object or a `ModelSpec`) for ``graph``'s
    feature and class counts: from the table for a built-in kind, else traced live."""
    if not isinstance(model, ModelSpec) and (not known(str(getattr(model, "model", "gcn")))
                                             or getattr(model, "edge_dim", 0)):
        from gridgnn.nn.trace import model_spec

        return model_spec(model, graph)  # a kind the table lacks (message passing: its edge features' width)
    spec = model if isinstance(model, ModelSpec) else ModelSpec.describe(model, graph.num_features, graph.num_classes)
    if spec.ops is not None:
        return spec
    if not known(spec.model) or spec.edge_features:  # the table holds no edge-feature layer
        from gridgnn.nn.trace import model_spec

        return model_spec(spec, graph)
    return dataclasses.replace(spec, ops=ops_of(spec))


def ops_of(spec: ModelSpec) -> ModelOps:
    """The layout operations of the built-in model ``spec`` describes, instantiated from the table."""
    kind = TABLE["kinds"][spec.model]
    flags = "".join("1" if getattr(spec, name) != TABLE["defaults"][name] else "0" for name in kind["options"])
    hidden = spec.hidden * (spec.heads if kind["hidden_times_heads"] else 1)
    widths = [spec.num_features] + [hidden] * (spec.layers - 1) + [spec.num_classes]
    positions = ["only"] if spec.layers == 1 else ["first"] + ["middle"] * (spec.layers - 2) + ["last"]
    layers, parameters = [], []
    for index, (position, f_in, f_out) in enumerate(zip(positions, widths[:-1], widths[1:], strict=True)):
        heads = spec.output_heads if position in ("only", "last") else spec.heads
        heads = heads if kind["hidden_times_heads"] else 1
        order = resolve_order(spec.order, f_in, f_out)
        template = TABLE["layers"][f"{spec.model}|{flags}|{position}|{order}"]
        values = {"i": f_in, "o": f_out, "k": heads, "k*o": heads * f_out, "o/k": f_out // heads, "1": 1}
        first = len(parameters)
        ops = []
        for name, stored in template["ops"]:
            fields = [f.name for f in dataclasses.fields(RECORDS[name])]
            ops.append(RECORDS[name](**{key: (values[v] if isinstance(v, str) else
                                          first + v if key in ("weight", "param") else v)
                                    for key, v in zip(fields, stored, strict=True)}))
        layers.append(LayerOps(index, f_in, f_out, tuple(ops)))
        parameters += [tuple(values[d] for d in shape) for shape in template["parameters"]]
    return ModelOps(kind["operator"], kind["self_loops"], tuple(layers), (FullRows(spec.num_classes),),
                    tuple(parameters))
