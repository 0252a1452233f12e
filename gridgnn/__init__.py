"""gridgnn: full-graph GNN training over 1D, 1.5D, 2D and 3D process grids.

The public API is loaded on first use (``import gridgnn`` itself stays cheap): see `gridgnn.api` and
docs/python.md ("Use from Python"; docs/api.md is the reference generated from these docstrings). Training
is `fit` (``gridgnn.train`` is the subpackage of the loop).
"""

__version__ = "0.1.0"

_EXPORTS = {
    # train and use (gridgnn.api)
    "fit": "gridgnn.api", "TrainedModel": "gridgnn.api", "Predictions": "gridgnn.api",
    "predict": "gridgnn.api", "embed": "gridgnn.api", "save_model": "gridgnn.api", "load_model": "gridgnn.api",
    "to_pyg": "gridgnn.api", "graph_to_pyg": "gridgnn.data.interop", "as_graph": "gridgnn.api",
    "graph_from_arrays": "gridgnn.api",
    # building blocks of a custom loop
    "grid_aggregation": "gridgnn.parallel.custom_loop", "local_block": "gridgnn.parallel.custom_loop",
    "GCN": "gridgnn.nn.gcn", "MessagePassing": "gridgnn.nn.message_passing", "GINE": "gridgnn.nn.gine",
    "Graph": "gridgnn.data.graph", "load_dataset": "gridgnn.data.registry",
    "TrainConfig": "gridgnn.config", "GridOps": "gridgnn.parallel.grid_ops",
    "ProcessGrid": "gridgnn.grid.process_grid", "resolve_grid": "gridgnn.grid.shape",
    "masked_cross_entropy": "gridgnn.nn.loss", "normalize_adjacency": "gridgnn.sparse.adjacency:gcn_normalize",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    """Import a public name's module on first access (PEP 562)."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'gridgnn' has no attribute {name!r}")
    import importlib

    module, _, attribute = _EXPORTS[name].partition(":")
    value = getattr(importlib.import_module(module), attribute or name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
