"""Non-finite numbers (NaN, ±inf) in JSON documents: the metrics file and the checkpoint manifest.

JSON has no NaN or infinity. A training run that diverges still writes its records, so every non-finite
float is written as ``null`` and listed under the document's top-level key ``"nonfinite"``: an object that
maps the JSON Pointer (RFC 6901) of each such value to ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``, e.g.
``{"/epochs/2/loss": "NaN"}``. `decode_nonfinite` puts the floats back, so a checkpoint's history survives a
round trip exactly. Not collective.
"""

from __future__ import annotations

import copy
import math

NONFINITE_KEY = "nonfinite"
_NAMES = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _name(value: float) -> str:
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def encode_nonfinite(document: dict) -> dict:
    """A copy of ``document`` with every non-finite float replaced by None and listed under ``nonfinite``
    (the key is absent when every number is finite)."""
    found: dict[str, str] = {}

    def walk(value: object, pointer: str) -> object:
        if isinstance(value, float) and not math.isfinite(value):
            found[pointer] = _name(value)
            return None
        if isinstance(value, dict):
            return {key: walk(item, f"{pointer}/{_escape(str(key))}") for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [walk(item, f"{pointer}/{index}") for index, item in enumerate(value)]
        return value

    encoded = walk({key: value for key, value in document.items() if key != NONFINITE_KEY}, "")
    if found:
        encoded[NONFINITE_KEY] = found
    return encoded


def decode_nonfinite(document: dict) -> dict:
    """A copy of ``document`` with the values listed under ``nonfinite`` restored to floats (the key removed).

    Raises ValueError when the list is malformed or points at a value that is not null.
    """
    listed = document.get(NONFINITE_KEY, {})
    if not isinstance(listed, dict):
        raise ValueError(f"'{NONFINITE_KEY}' must be an object")
    decoded = copy.deepcopy({key: value for key, value in document.items() if key != NONFINITE_KEY})
    for pointer, name in listed.items():
        if name not in _NAMES or not isinstance(pointer, str) or not pointer.startswith("/"):
            raise ValueError(f"'{NONFINITE_KEY}' entry {pointer!r}: {name!r}")
        parent, last = _resolve_parent(decoded, pointer)
        if parent[last] is not None:
            raise ValueError(f"'{NONFINITE_KEY}' entry {pointer!r} points at a value that is not null")
        parent[last] = _NAMES[name]
    return decoded


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _resolve_parent(document: object, pointer: str) -> tuple:
    """(container, key or index) of the value ``pointer`` names; ValueError when it names nothing."""
    parts = [part.replace("~1", "/").replace("~0", "~") for part in pointer[1:].split("/")]
    node = document
    for depth, part in enumerate(parts):
        key: object = part
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise ValueError(f"'{NONFINITE_KEY}' entry {pointer!r} names no value")
            key = int(part)
        elif not isinstance(node, dict) or part not in node:
            raise ValueError(f"'{NONFINITE_KEY}' entry {pointer!r} names no value")
        if depth == len(parts) - 1:
            return node, key
        node = node[key]
    raise ValueError(f"'{NONFINITE_KEY}' entry {pointer!r} names no value")
