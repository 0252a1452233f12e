"""Conversions between `Graph` and PyTorch Geometric's ``Data`` (torch and torch_geometric import lazily)."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from gridgnn.data import registry
from gridgnn.data.edge_features import collapse_rows, edge_positions
from gridgnn.data.graph import Graph
from gridgnn.data.readers._common import adjacency_from_edges, build_graph, is_symmetric
from gridgnn.data.splits import random_split
from gridgnn.data.synthetic import placeholder_features
from gridgnn.data.targets import canonical_targets, labelled_vertices
from gridgnn.errors import DataError

_MASKS = ("train_mask", "val_mask", "test_mask")


def _numpy(tensor: Any) -> np.ndarray:
    """A torch tensor (dense or sparse) or array-like as a dense numpy array."""
    if hasattr(tensor, "is_sparse") and tensor.is_sparse:
        tensor = tensor.to_dense()
    if hasattr(tensor, "detach"):
        return tensor.detach().cpu().numpy()
    return np.asarray(tensor)


def graph_from_pyg(data: Any, name: str = "pyg", split: int = 0, seed: int = 0, *, directed: bool = False,
                   normalize_features: bool | None = None, preprocess: bool = True, task: str = "auto") -> Graph:
    """Build a `Graph` from a torch_geometric ``Data``, preprocessed as ``gridgnn train`` preprocesses every
    dataset (`gridgnn.data.registry.preprocess`: symmetrized unless ``directed``, duplicate edges and
    self-loops dropped, features row-normalized only when ``normalize_features`` is True, as for any format
    without a default). ``preprocess=False`` returns the graph as read (``directed`` then says whether its
    adjacency is symmetric).

    ``edge_index`` (2, E) gives edges src -> dst (``adj[dst, src] = 1``; edge weights are ignored, the
    adjacency is binary and duplicates collapse). ``edge_attr`` (E, d) or (E,), when present, becomes the
    graph's edge features (`gridgnn.data.edge_features`: a duplicate edge gets the mean of its rows).
    ``x`` (n, f) becomes dense float32 (placeholder features
    when absent); ``y`` gives the targets of ``task`` (`gridgnn.data.targets`; ``auto``: inferred): (n,)
    classes with -1 or NaN for an unlabelled vertex, (n, T) 0/1 multilabel targets or real values with NaN for a
    missing entry (all class 0 when absent); masks (which must name labelled vertices only) of shape
    (n, k) (several splits, as in WikiCS) use column `split`; without masks a seeded 60/20/20 split is used.
    """
    where = f"PyG data '{name}'"
    num_nodes = int(data.num_nodes) if data.num_nodes is not None else 0
    edge_index = edge_ids(_numpy(data.edge_index), where)
    adj = adjacency_from_edges(edge_index[0], edge_index[1], num_nodes, where)
    order = edge_positions(edge_index[0], edge_index[1], num_nodes)
    raw_attr = getattr(data, "edge_attr", None)
    edge_attr = None if raw_attr is None else collapse_rows(_numpy(raw_attr), order, adj.nnz, f"{where} edge_attr")
    x = getattr(data, "x", None)
    features = placeholder_features(adj, seed=seed) if x is None else _numpy(x).astype(np.float32)
    y = getattr(data, "y", None)
    targets = canonical_targets(np.zeros(num_nodes, dtype=np.int64) if y is None else _numpy(y), num_nodes, task,
                                where)
    labelled = labelled_vertices(targets.values, targets.task)
    graph = build_graph(
        where,
        adj=adj,
        features=features,
        labels=targets.values,
        task=targets.task,
        **_masks(data, num_nodes, split, seed, where, labelled),
        num_classes=targets.num_outputs,
        name=name,
        directed=not is_symmetric(adj),
        meta={"format": "pyg", **({"labels": "none"} if y is None else {})},
        edge_attr=edge_attr,
        edge_order=order,
    )
    return registry.preprocess(graph, directed, normalize_features) if preprocess else graph


def edge_ids(edge_index: np.ndarray, where: str) -> np.ndarray:
    """``edge_index`` (2, E) as int64 vertex ids; `DataError` for another shape, a non-numeric type, or float
    ids that are not whole numbers (never truncated)."""
    if edge_index.ndim != 2 or edge_index.shape[0] != 2:
        raise DataError(f"{where}: edge_index must have shape (2, E), got {edge_index.shape}")
    if edge_index.dtype.kind not in "iuf":
        raise DataError(f"{where}: edge_index must hold integer vertex ids, got {edge_index.dtype}")
    if edge_index.dtype.kind == "f":
        whole = np.isfinite(edge_index) & (edge_index == np.round(edge_index))
        if not whole.all():
            bad = float(edge_index[~whole][0])
            raise DataError(f"{where}: edge_index holds {bad:g}, not a whole vertex id (ids are never truncated)")
    return edge_index.astype(np.int64)


def _masks(data: Any, num_nodes: int, split: int, seed: int, where: str,
           labelled: np.ndarray) -> dict[str, np.ndarray]:
    """The three bool masks (n,) of `data`, column `split` of 2-D masks, or a random 60/20/20 split of the
    ``labelled`` vertices (bool (n,))."""
    if any(getattr(data, m, None) is None for m in _MASKS):
        return dict(zip(_MASKS, random_split(num_nodes, seed=seed, among=labelled), strict=True))
    masks = {}
    for mask_name in _MASKS:
        mask = _numpy(getattr(data, mask_name)).astype(bool)
        if mask.ndim == 2:
            if not 0 <= split < mask.shape[1]:
                raise DataError(f"{where}: split {split} not in the {mask.shape[1]} columns of {mask_name}")
            mask = mask[:, split]
        masks[mask_name] = np.ascontiguousarray(mask)
    return masks


def graph_to_pyg(graph: Graph) -> Any:
    """A torch_geometric ``Data`` with ``edge_index`` (2, nnz) src -> dst, ``edge_weight`` (nnz,) holding
    the adjacency values, ``edge_attr`` (nnz, d) when the graph has edge features, dense ``x`` (n, f) float32,
    ``y`` (n,) int64 and the three masks."""
    import torch
    from torch_geometric.data import Data

    coo = sp.coo_matrix(graph.adj)
    edge_index = torch.from_numpy(np.vstack([coo.col, coo.row]).astype(np.int64))
    return Data(
        x=torch.from_numpy(graph.dense_features()),
        edge_index=edge_index,
        edge_weight=torch.from_numpy(coo.data.astype(np.float32)),
        **({} if graph.edge_attr is None else {"edge_attr": torch.from_numpy(np.asarray(graph.edge_attr))}),
        y=torch.from_numpy(graph.labels),
        num_nodes=graph.num_nodes,
        **{mask: torch.from_numpy(getattr(graph, mask)) for mask in _MASKS},
    )
