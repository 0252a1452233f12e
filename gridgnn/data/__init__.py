"""Graphs, readers, generators and transforms (layer 4' of docs/architecture.md §4)."""

from gridgnn.data.graph import Graph
from gridgnn.data.readers.native import load_native, save_graph
from gridgnn.data.registry import KNOWN_DATASETS, load_dataset, resolve_data_root
from gridgnn.data.stats import graph_statistics

__all__ = [
    "KNOWN_DATASETS",
    "Graph",
    "graph_statistics",
    "load_dataset",
    "load_native",
    "resolve_data_root",
    "save_graph",
]
