"""One entry point from a dataset spec (known name, generator spec or path) to a ready `Graph`.

Preprocessing in `load_dataset`, in this order: symmetrize (unless ``directed``), drop duplicate edges
(0/1 adjacency), remove self-loops (the GCN normalization adds them back), row-normalize features. Edge
features follow their edges (`gridgnn.data.edge_features`: an added reverse edge copies its forward edge's).
Feature normalization defaults to L1 rows for Planetoid data (Kipf & Welling and PyG's Planetoid examples
use ``NormalizeFeatures``) and to L2 rows for the gnn-benchmark datasets: with their raw binary
bag-of-words (about 260 active words per node on Amazon Photo, as Shchur et al.'s code feeds them), Adam's
first steps kill most hidden ReLUs on some seeds (seed 6: 20.7 % test accuracy; 10-seed mean 78.6 %), while
L2 rows give 89.4 % (min 85.7 %); L1 rows make the features so small that weight decay dominates (64.6 %).
Other formats are left as they are.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import numbers
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType

from gridgnn.data.attach import NodeFiles, attach_node_data
from gridgnn.data.edge_features import carry_rows
from gridgnn.data.formats import read_path
from gridgnn.data.generators import csbm, rmat
from gridgnn.data.graph import Graph
from gridgnn.data.task_generators import heat, mesh, multilabel
from gridgnn.data.transforms import drop_duplicate_edges, remove_self_loops, row_normalize_features, symmetrize
from gridgnn.errors import ConfigError, DataError

KNOWN_DATASETS = ("cora", "citeseer", "amazon-photo", "amazon-computers", "coauthor-cs", "coauthor-physics")
GENERATORS: Mapping[str, Callable[..., Graph]] = MappingProxyType(
    {"csbm": csbm, "rmat": rmat, "multilabel": multilabel, "heat": heat, "mesh": mesh})
DATA_ROOT_ENV = "GRIDGNN_DATA_ROOT"
_DEFAULT_FEATURE_NORM = MappingProxyType({"planetoid": "l1", "gnn-benchmark": "l2"})


DATASETS_DOC = "docs/datasets.md"
"""Where each named dataset comes from and how to fetch it by hand (named by the missing-dataset error)."""


def default_data_roots() -> tuple[Path, ...]:
    """The fallback data root: ``~/.gridgnn/datasets`` (never a folder relative to the current one)."""
    return (Path.home() / ".gridgnn" / "datasets",)


def resolve_data_root(flag: str | None = None) -> Path:
    """The data root: `flag` if given, else $GRIDGNN_DATA_ROOT, else ``~/.gridgnn/datasets``
    (`default_data_roots`). The same from any current folder, except that a relative `flag` or variable is
    read from it. The path is not required to exist."""
    if flag:
        return Path(flag).expanduser()
    if os.environ.get(DATA_ROOT_ENV):
        return Path(os.environ[DATA_ROOT_ENV]).expanduser()
    roots = default_data_roots()
    return next((root for root in roots if root.is_dir()), roots[-1])


def load_dataset(
    spec: str,
    data_root: str | None = None,
    directed: bool = False,
    normalize_features: bool | None = None,
    seed: int = 0,
    node_files: NodeFiles | None = None,
) -> Graph:
    """Load a known dataset name, a generator spec (``csbm:nodes=20000,classes=5``, ``rmat:scale=18``)
    or a file/folder path, attach the node data of ``node_files`` (``--features``, ``--labels``, ``--split``:
    `gridgnn.data.attach`), and preprocess it (see the module docstring). `seed` drives random splits,
    generators and placeholder features. The result's ``directed`` is True exactly when `directed` is."""
    text = spec.strip()
    if not text:
        raise DataError("empty dataset spec: give a known name, a generator spec or a path")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer, got {seed!r}")
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
            f"({', '.join(f'{g}:key=value,...' for g in GENERATORS)}) and no such file or folder"
        )
    if node_files:
        graph = attach_node_data(graph, node_files, seed=seed)
    return preprocess(graph, directed, normalize_features)


def preprocess(graph: Graph, directed: bool = False, normalize_features: bool | None = None) -> Graph:
    """New `Graph`: symmetrized unless `directed`, binary, loop-free, features row-normalized if asked.

    ``normalize_features``: None uses the format's default (L1 rows for Planetoid, L2 rows for gnn-benchmark,
    none otherwise); True normalizes with that norm (L1 where the format has none); False keeps features.
    """
    adj = graph.adj if directed else symmetrize(graph.adj)
    adj = remove_self_loops(drop_duplicate_edges(adj))
    edge_attr = None  # each stored direction keeps its own rows; an added reverse edge copies its forward edge's
    if graph.edge_attr is not None:
        edge_attr = carry_rows(graph.adj, graph.edge_attr, adj, reverse=not directed)
    default_norm = _DEFAULT_FEATURE_NORM.get(graph.meta.get("format"))
    if normalize_features is None:
        norm = default_norm
    else:
        norm = (default_norm or "l1") if normalize_features else None
    features = row_normalize_features(graph.features, norm) if norm else graph.features
    meta = {
        **graph.meta,
        "symmetrized": not directed,
        "feature_normalization": f"{norm}-row" if norm else "none",
    }
    return dataclasses.replace(graph, adj=adj, features=features, directed=directed, meta=meta, edge_attr=edge_attr,
                               edge_order=None)


def _read_known(name: str, data_root: str | None, seed: int) -> Graph:
    root = resolve_data_root(data_root)
    folder = root / name
    if not folder.is_dir():
        raise DataError(missing_dataset_message(name, data_root))
    graph = read_path(folder, seed=seed)
    return dataclasses.replace(graph, name=name)


def missing_dataset_message(name: str, data_root: str | None) -> str:
    """One line for a named dataset that is not under its data root: the folders looked in, what chose the root
    (``--data-root``, ``$GRIDGNN_DATA_ROOT`` or the default), and how to get the data."""
    root = resolve_data_root(data_root)
    if data_root:
        chosen = "from --data-root"
    elif os.environ.get(DATA_ROOT_ENV):
        chosen = f"from ${DATA_ROOT_ENV}"
    else:
        chosen = f"the default: no --data-root, ${DATA_ROOT_ENV} unset"
    looked = " and ".join(str(r / name) for r in ((root,) if data_root or os.environ.get(DATA_ROOT_ENV)
                                                   else default_data_roots()))
    return (f"dataset '{name}' not found under data root {root} ({chosen}): looked in {looked}; fetch it by hand "
            f"as {DATASETS_DOC} says (section '{name}') into <root>/{name}, then give --data-root <root> or set "
            f"${DATA_ROOT_ENV}")


def _generate(spec: str, directed: bool, seed: int) -> Graph:
    """Run the generator named in ``name[:key=value,...]`` with the parsed keyword arguments."""
    generator, kwargs = generator_arguments(spec, seed)
    try:
        graph = generator(**kwargs, directed=directed)
    except MemoryError as exc:
        detail = " ".join(str(exc).split()) or "MemoryError"
        raise DataError(f"dataset spec '{spec}': too large to generate in memory ({detail})") from None
    return dataclasses.replace(graph, name=spec)


def generator_arguments(spec: str, seed: int) -> tuple[Callable[..., Graph], dict]:
    """(the generator, its keyword arguments: every parameter but ``directed``, defaults filled in) of a
    generator spec ``name[:key=value,...]``; `DataError` (one line) on an unknown or malformed key."""
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
    return generator, {**allowed, **kwargs}


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
