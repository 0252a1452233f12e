"""Schemas of the small structured (JSON) parts of dataset files, checked before anything uses them.

``meta``: the `Graph.meta` object of a native ``.npz`` (``meta_json``) or a prepared folder's manifest: a
JSON object (its entries round-trip as they are) whose entries that gridgnn itself reads have fixed scalar
types (`META_TYPES`). The prepared-graph manifest: the counts are
non-negative integers (never booleans or strings), ``name`` and ``digest`` strings, ``directed`` and
``sparse_features`` booleans. A file that breaks its schema is a `DataError` naming the file and the field.
Not collective.
"""

from __future__ import annotations

import math

from gridgnn.errors import DataError
from gridgnn.limits import MAX_CLASSES

META_TYPES: dict[str, tuple[type, ...]] = {
    "format": (str,), "source": (str,), "split": (str,), "feature_normalization": (str,),
    "features": (str,), "labels": (str,), "seed": (int,), "padded_nodes": (int,), "symmetrized": (bool,),
    "homophily": (int, float),
}
"""The meta entries gridgnn reads, and the JSON types each must have."""

_COUNTS = {"num_nodes": (1, None), "num_edges": (0, None), "norm_nnz": (0, None), "num_features": (1, None),
           "num_classes": (1, MAX_CLASSES)}


def _scalar(value: object) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or isinstance(value, (str, int, bool))


def check_meta(meta: object, where: object) -> dict:
    """``meta`` itself when it follows the schema above, else `DataError` naming ``where`` and the entry."""
    if not isinstance(meta, dict):
        raise DataError(f"{where}: graph meta must be a JSON object, got {type(meta).__name__}")
    for key, value in meta.items():
        expected = META_TYPES.get(key)
        if expected is not None and not _scalar(value):
            raise DataError(f"{where}: graph meta entry {key!r} must be a string, number, boolean or null")
        if expected is not None and value is not None and (
                not isinstance(value, expected) or (bool not in expected and isinstance(value, bool))):
            names = " or ".join(t.__name__ for t in expected)
            raise DataError(f"{where}: graph meta entry '{key}' must be a {names}, got {value!r}")
    return meta


def check_prepared_manifest(manifest: object, where: object, name: str) -> dict:
    """The prepared graph's manifest ``manifest`` (file ``name``) when it follows the schema, else
    `DataError` naming the field."""
    if not isinstance(manifest, dict):
        raise DataError(f"{where}: {name} is not a JSON object")
    for key, (low, high) in _COUNTS.items():
        value = manifest.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < low or (high and value > high):
            bound = f"[{low}, {high}]" if high else f"at least {low}"
            raise DataError(f"{where}: {name} field '{key}' must be an integer {bound}, got {value!r}")
    for key, kind in (("name", str), ("digest", str), ("directed", bool), ("sparse_features", bool)):
        if key in manifest and not isinstance(manifest[key], kind):
            raise DataError(f"{where}: {name} field '{key}' must be a {kind.__name__}, got {manifest[key]!r}")
    check_meta(manifest.get("meta", {}), f"{where}: {name}")
    return manifest
