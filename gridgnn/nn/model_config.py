"""A model file's configuration checked before any model is built (untrusted input: a model file may come from
anywhere). Pure checks, not collective.

`check_model_config` refuses wrong types and values out of range (a negative width, a boolean for a count, a NaN
dropout); `check_state_covers` refuses a configuration whose weights the file's own state could not hold: the
weight matrices of layers ``in -> hidden -> ... -> out`` have at least ``sum(w_k x w_(k+1))`` elements whatever
the kind (GCN, SAGE, GIN and GAT all hold such a matrix per layer), so a 21 KB file cannot make gridgnn
allocate gigabytes before `load_state_dict` would find the mismatch.
"""

from __future__ import annotations

import math

import torch

from gridgnn.config import MAX_SEED, ORDERS
from gridgnn.limits import MAX_LAYERS, MAX_TENSOR_ELEMENTS

MAX_HEADS = 1024
"""The most attention heads a model file may ask for (as ``--heads``)."""

_WIDTHS = ("in_channels", "hidden_channels", "out_channels")
_FLAGS = {"gcn": ("bias",), "sage": ("normalize",), "gin": ("train_eps",), "gat": ()}


def _integer(config: dict, key: str, low: int, high: int) -> int:
    value = config.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{key} must be an integer in [{low}, {high}], got {value!r}")
    return value


def _fraction(config: dict, key: str) -> None:
    value = config.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise ValueError(f"{key} must be a number in [0, 1), got {value!r}")


def check_model_config(kind: str, config: dict) -> list[int]:
    """Raise ValueError naming the first bad field of a ``kind`` model's ``config`` (the model file layout of
    `gridgnn.nn.export`); returns the layer widths ``[in, hidden, ..., hidden, out]`` (GAT: ``hidden`` is
    ``heads`` times the width of one head, its hidden layers concatenating them)."""
    widths = {key: _integer(config, key, 1, MAX_TENSOR_ELEMENTS) for key in _WIDTHS}
    layers = _integer(config, "num_layers", 1, MAX_LAYERS)
    _fraction(config, "dropout")
    _integer(config, "seed", 0, MAX_SEED)
    if config.get("order") not in ORDERS:
        raise ValueError(f"order must be one of {', '.join(ORDERS)}, got {config.get('order')!r}")
    for flag in _FLAGS.get(kind, ()):
        if not isinstance(config.get(flag), bool):
            raise ValueError(f"{flag} must be true or false, got {config.get(flag)!r}")
    if kind == "gin" and (isinstance(config.get("eps"), bool) or not isinstance(config.get("eps"), (int, float))
                          or not math.isfinite(config["eps"])):
        raise ValueError(f"eps must be a finite number, got {config.get('eps')!r}")
    heads = 1
    if kind == "gat":
        heads = _integer(config, "heads", 1, MAX_HEADS)
        _integer(config, "output_heads", 1, MAX_HEADS)
        _fraction(config, "attn_dropout")
    hidden = [widths["hidden_channels"] * heads] * (layers - 1)  # GAT's hidden layers concatenate their heads
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
