"""A model file's configuration checked before any model is built (untrusted input: a model file may come from
anywhere). Pure checks, not collective.

`check_model_config` refuses wrong types and values out of range (a negative width, a boolean for a count, a NaN
dropout) in the fields every kind shares, then asks the kind's class for its own fields
(`gridgnn.nn.stack.LayerStack.check_file_config`, written with the field checks below); `check_state_covers`
refuses a configuration whose weights the file's own state could not hold: the weight matrices of layers
``in -> hidden -> ... -> out`` have at least ``sum(w_k x w_(k+1))`` elements whatever the kind (GCN, SAGE, GIN
and GAT all hold such a matrix per layer), so a 21 KB file cannot make gridgnn allocate gigabytes before
`load_state_dict` would find the mismatch.
"""

from __future__ import annotations

import math

import torch

from gridgnn.config import MAX_SEED, ORDERS
from gridgnn.limits import MAX_LAYERS, MAX_TENSOR_ELEMENTS

_WIDTHS = ("in_channels", "hidden_channels", "out_channels")


def integer_field(config: dict, key: str, low: int, high: int) -> int:
    """``config[key]`` when it is an integer (not a boolean) in [low, high], else ValueError naming it."""
    value = config.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{key} must be an integer in [{low}, {high}], got {value!r}")
    return value


def fraction_field(config: dict, key: str) -> None:
    """ValueError naming ``key`` unless ``config[key]`` is a number in [0, 1)."""
    value = config.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise ValueError(f"{key} must be a number in [0, 1), got {value!r}")


def flag_field(config: dict, key: str) -> None:
    """ValueError naming ``key`` unless ``config[key]`` is true or false."""
    if not isinstance(config.get(key), bool):
        raise ValueError(f"{key} must be true or false, got {config.get(key)!r}")


def finite_field(config: dict, key: str) -> None:
    """ValueError naming ``key`` unless ``config[key]`` is a finite number (not a boolean)."""
    value = config.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{key} must be a finite number, got {value!r}")


def check_model_config(model_class, config: dict) -> list[int]:
    """Raise ValueError naming the first bad field of the ``config`` of a model of class ``model_class`` (a
    `gridgnn.nn.stack.LayerStack` subclass with a model-file layout; the layout of `gridgnn.nn.export`); returns
    the layer widths ``[in, hidden, ..., hidden, out]`` (GAT: ``hidden`` is ``heads`` times the width of one
    head, its hidden layers concatenating them: the multiplier the class's ``check_file_config`` returns)."""
    widths = {key: integer_field(config, key, 1, MAX_TENSOR_ELEMENTS) for key in _WIDTHS}
    layers = integer_field(config, "num_layers", 1, MAX_LAYERS)
    fraction_field(config, "dropout")
    integer_field(config, "seed", 0, MAX_SEED)
    if config.get("order") not in ORDERS:
        raise ValueError(f"order must be one of {', '.join(ORDERS)}, got {config.get('order')!r}")
    spans = model_class.check_file_config(config)
    hidden = [widths["hidden_channels"] * spans] * (layers - 1)  # GAT's hidden layers concatenate their heads
    return [widths["in_channels"], *hidden, widths["out_channels"]]


def check_state_covers(widths: list[int], state: dict) -> None:
    """Raise ValueError when the tensors of ``state`` hold fewer elements than the weight matrices of layers
    ``widths`` need (checked before the model is built, so nothing is allocated for a configuration the file
    cannot fill)."""
    needed = sum(a * b for a, b in zip(widths[:-1], widths[1:], strict=False))
    held = sum(value.numel() for value in state.values() if isinstance(value, torch.Tensor))
    if needed > held:
        raise ValueError(f"its layers {' -> '.join(map(str, widths))} need at least {needed} weights, its state "
                         f"holds {held}")
