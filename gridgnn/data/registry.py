"""One entry point from a dataset spec (known name, generator spec or path) to a ready `Graph`.

Preprocessing in `load_dataset`, in this order: symmetrize (unless ``directed``), drop duplicate edges
(0/1 adjacency), remove self-loops (the GCN normalization adds them back), row-normalize features.
Feature normalization defaults to on for Planetoid data only (Kipf & Welling and PyG's Planetoid examples
use ``NormalizeFeatures``); off for everything else, including the gnn-benchmark datasets, whose reference
code (Shchur et al., ``normalize_features: false``) feeds raw binary bag-of-words.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType

from gridgnn.data.formats import read_path
from gridgnn.data.generators import csbm, rmat
from gridgnn.data.graph import Graph
from gridgnn.data.transforms import drop_duplicate_edges, remove_self_loops, row_normalize_features, symmetrize
from gridgnn.errors import DataError

KNOWN_DATASETS = ("cora", "citeseer", "amazon-photo", "amazon-computers", "coauthor-cs", "coauthor-physics")
GENERATORS: Mapping[str, Callable[..., Graph]] = MappingProxyType({"csbm": csbm, "rmat": rmat})
DATA_ROOT_ENV = "GRIDGNN_DATA_ROOT"
_NORMALIZED_FORMATS = ("planetoid",)


def default_data_roots() -> tuple[Path, ...]:
    """Fallback data roots, in order: ``../shared/datasets`` (from the cwd), ``~/.gridgnn/datasets``."""
    return (Path.cwd() / ".." / "shared" / "datasets", Path.home() / ".gridgnn" / "datasets")


def resolve_data_root(flag: str | None = None) -> Path:
    """The data root: `flag` if given, else $GRIDGNN_DATA_ROOT, else the first existing default root
    (the last default when none exists). The path is not required to exist."""
    if flag:
        return Path(flag).expanduser()
    if os.environ.get(DATA_ROOT_ENV):
        return Path(os.environ[DATA_ROOT_ENV]).expanduser()
    roots = default_data_roots()
    return next((root.resolve() for root in roots if root.is_dir()), roots[-1])


def load_dataset(
    spec: str,
    data_root: str | None = None,
    directed: bool = False,
    normalize_features: bool | None = None,
    seed: int = 0,
) -> Graph:
    """Load a known dataset name, a generator spec (``csbm:nodes=20000,classes=5``, ``rmat:scale=18``)
    or a file/folder path, and preprocess it (see the module docstring). `seed` drives random splits,
    generators and placeholder features. The result's ``directed`` is True exactly when `directed` is."""
    text = spec.strip()
    if not text:
        raise DataError("empty dataset spec: give a known name, a generator spec or a path")
    name = text.split(":", 1)[0].lower()
    if name in GENERATORS:
        graph = _generate(text, directed, seed)
    elif text.lower().replace("_", "-") in KNOWN_DATASETS:
        graph = _read_known(text.lower().replace("_", "-"), data_root, seed)
    elif Path(text).expanduser().exists():
        graph = read_path(text, seed=seed)
    else:
        known = ", ".join(KNOWN_DATASETS)
        raise DataError(
            f"unknown dataset '{text}': not a known name ({known}), not a generator spec "
            f"(csbm:key=value,..., rmat:key=value,...) and no such file or folder"
        )
    return preprocess(graph, directed, normalize_features)


def preprocess(graph: Graph, directed: bool = False, normalize_features: bool | None = None) -> Graph:
    """New `Graph`: symmetrized unless `directed`, binary, loop-free, features row-normalized if asked
    (None: only for Planetoid data)."""
    adj = graph.adj if directed else symmetrize(graph.adj)
    adj = remove_self_loops(drop_duplicate_edges(adj))
    if normalize_features is None:
        normalize_features = graph.meta.get("format") in _NORMALIZED_FORMATS
    features = row_normalize_features(graph.features) if normalize_features else graph.features
    meta = {
        **graph.meta,
        "symmetrized": not directed,
        "feature_normalization": "l1-row" if normalize_features else "none",
    }
    return dataclasses.replace(graph, adj=adj, features=features, directed=directed, meta=meta)


def _read_known(name: str, data_root: str | None, seed: int) -> Graph:
    root = resolve_data_root(data_root)
    folder = root / name
    if not folder.is_dir():
        raise DataError(
            f"{folder}: dataset '{name}' not found under data root {root} (set --data-root or ${DATA_ROOT_ENV})"
        )
    graph = read_path(folder, seed=seed)
    return dataclasses.replace(graph, name=name)


def _generate(spec: str, directed: bool, seed: int) -> Graph:
    """Run the generator named in ``name[:key=value,...]`` with the parsed keyword arguments."""
    name, _, body = spec.partition(":")
    generator = GENERATORS[name.lower()]
    parameters = inspect.signature(generator).parameters
    allowed = {k: p.default for k, p in parameters.items() if k != "directed"}
    kwargs: dict[str, object] = {"seed": seed}
    given: set[str] = set()
    for item in filter(None, (part.strip() for part in body.split(","))):
        key, eq, value = (s.strip() for s in item.partition("="))
        if not eq or key not in allowed:
            raise DataError(f"dataset spec '{spec}': unknown or malformed '{item}' (keys: {', '.join(allowed)})")
        if key in given:
            raise DataError(f"dataset spec '{spec}': '{key}' given twice")
        given.add(key)
        kwargs[key] = _parse_value(spec, key, value, allowed[key])
    graph = generator(**kwargs, directed=directed)
    return dataclasses.replace(graph, name=spec)


def _parse_value(spec: str, key: str, value: str, default: object) -> object:
    """Parse `value` to the type of the parameter's default (float where the default is None)."""
    try:
        if isinstance(default, bool):
            lowered = value.lower()
            if lowered not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(value)
            return lowered in ("true", "1", "yes")
        if isinstance(default, int):
            try:
                return int(value)
            except ValueError:
                number = float(value)  # accepts 1e6
                if not number.is_integer():
                    raise
                return int(number)
        number = float(value)
        if not math.isfinite(number):
            raise ValueError(value)
        return number
    except (ValueError, OverflowError):
        kind = type(default).__name__ if default is not None else "float"
        raise DataError(f"dataset spec '{spec}': {key}={value!r} is not a valid {kind}") from None
