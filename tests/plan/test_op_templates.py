"""The committed templates of the built-in kinds' traces (`gridgnn.plan.op_templates`, what `gridgnn plan` prices
without torch) are what the models' own forward gives: the table is the one `scripts/op_templates.py` writes
today, and every instantiation equals the live trace (`gridgnn.nn.trace.model_spec`)."""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
from pathlib import Path

import pytest

from gridgnn.cost.epoch_model import ModelSpec
from gridgnn.nn.trace import model_spec
from gridgnn.plan import op_templates

REPO = Path(__file__).resolve().parents[2]


def test_the_committed_table_is_what_the_models_trace_today():
    spec = importlib.util.spec_from_file_location("op_templates_script", REPO / "scripts" / "op_templates.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    committed = (REPO / "gridgnn" / "plan" / "op_templates.json").read_text(encoding="utf-8")
    assert script.render() == committed, "a built-in model changed: run python scripts/op_templates.py"


WIDTHS = [(13, 16, 5), (100, 16, 5), (5, 5, 5), (2, 8, 1), (30, 64, 200)]
KINDS = ([dict(model="gcn")] + [dict(model="sage", sage_normalize=v) for v in (False, True)]
         + [dict(model="gin", gin_train_eps=v, gin_norm=n) for v, n in ((False, "none"), (True, "none"),
                                                                         (False, "layer"))]
         + [dict(model="gat", heads=h, output_heads=o, attn_dropout=d)
            for h, o, d in itertools.product((1, 3), (1, 2), (0.0, 0.3))])


def _cases(widths, depths, orders):
    for kind, (f_in, hidden, classes), layers, order in itertools.product(KINDS, widths, depths, orders):
        if kind["model"] != "gat" or order == "auto":  # attention transforms first whatever the order
            yield ModelSpec(f_in, classes, layers, hidden, order, **kind)


def _check(specs) -> int:
    checked = 0
    for spec in specs:
        assert op_templates.spec_for(spec, None).ops == model_spec(spec, None).ops, spec
        checked += 1
    return checked


def test_instantiations_equal_the_live_trace_on_every_kind_position_and_order():
    # one layer (only), three (first, middle, last); widths growing and shrinking (both orders under auto)
    assert _check(_cases(WIDTHS[:2], (1, 3), ("auto", "aggregate-first"))) == 2 * 2 * (2 * 6 + 8)
    traced = model_spec(ModelSpec(13, 5, model="gat", heads=3), None)
    assert op_templates.spec_for(dataclasses.replace(traced, ops=None), None) == traced
    assert [op_templates.self_loops_of(k) for k in ("gcn", "sage", "gin", "gat")] == [True, False, False, True]
    assert op_templates.label_of("sage") == "GraphSAGE-mean"


@pytest.mark.slow  # the default tier checks every kind, position and order above
def test_every_instantiation_equals_the_live_trace():
    assert _check(_cases(WIDTHS, (1, 2, 4), ("auto", "aggregate-first", "transform-first"))) == 345
