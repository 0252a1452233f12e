"""One loader for the commands that read a dataset whole (``info``, ``plan``): a name, a generator spec, a
path, or a folder written by ``gridgnn prepare`` (read back as the `Graph` it was prepared from, or, for
``plan`` of the model it was prepared for, kept on disk as the `PreparedGraph`)."""

from __future__ import annotations

from gridgnn.data.attach import NodeFiles, refuse_on_prepared
from gridgnn.data.graph import Graph
from gridgnn.data.prepared import PreparedGraph, graph_of_prepared, is_prepared, open_prepared
from gridgnn.data.registry import load_dataset
from gridgnn.errors import ConfigError


def load_any(spec: str, data_root: str | None = None, directed: bool = False,
             normalize_features: bool | None = None, seed: int = 0, node_files: NodeFiles | None = None,
             in_place_for: str | None = None) -> Graph | PreparedGraph:
    """`load_dataset` (with ``node_files`` attached), or the graph of a prepared folder; flags a prepared folder
    fixed differently when it was written (``directed``, ``normalize_features``, node data files) are refused
    (`ConfigError`) rather than ignored. ``in_place_for`` (an operator): a folder prepared for that operator is
    returned as the `PreparedGraph` itself, memory-mapped (``plan`` prices it block by block, as ``train``
    does), not read back whole."""
    if not is_prepared(spec):
        return load_dataset(spec, data_root=data_root, directed=directed, normalize_features=normalize_features,
                            seed=seed, node_files=node_files)
    refuse_on_prepared(spec, node_files or NodeFiles())
    prepared = open_prepared(spec)
    graph = prepared if prepared.operator == in_place_for else graph_of_prepared(prepared)
    where = f"'{spec}' is a prepared graph (gridgnn prepare)"
    if directed and not graph.directed:
        raise ConfigError(f"{where}, prepared undirected: drop --directed, or prepare it again with --directed")
    if normalize_features is not None:
        raise ConfigError(f"{where}: its features were normalized (or not) when it was prepared; drop "
                          "--normalize-features/--no-normalize-features, or prepare it again with it")
    return graph
