"""Summary numbers of a `Graph`, as printed by ``gridgnn info``."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from gridgnn.data.graph import Graph


def graph_statistics(graph: Graph) -> dict:
    """Plain-Python dict of the graph's sizes and shape.

    Keys: name, nodes, stored_edges (adj.nnz), undirected_edges (off-diagonal pairs; absent when
    directed), self_loops, features, classes, directed, density (nnz / n²), in_degree_min/mean/max
    (stored entries per row, i.e. per target), out_degree_max, isolated_nodes (no entry in its row or
    column, self-loops aside), train/val/test/in_no_split node counts, features_sparse, feature_density
    (non-zero share of the n x f feature matrix) and feature_sparsity (1 - feature_density); for a graph with
    edge features also edge_features (d, per stored edge) and edge_feature_bytes (their float32 bytes).
    """
    adj = graph.adj
    n = graph.num_nodes
    loop = (adj.diagonal() != 0).astype(np.int64)
    self_loops = int(loop.sum())
    in_degree = np.diff(adj.indptr)
    out_degree = np.bincount(adj.indices, minlength=n)
    isolated = int(np.count_nonzero((in_degree - loop == 0) & (out_degree - loop == 0)))
    feature_nnz = graph.features.nnz if sp.issparse(graph.features) else np.count_nonzero(graph.features)
    feature_density = float(feature_nnz) / float(n * graph.num_features) if graph.num_features else 0.0
    stats = {
        "name": graph.name,
        "nodes": n,
        "stored_edges": int(adj.nnz),
        "undirected_edges": None if graph.directed else (int(adj.nnz) - self_loops) // 2,
        "self_loops": self_loops,
        "features": graph.num_features,
        "classes": int(graph.num_classes),
        "directed": bool(graph.directed),
        "density": float(adj.nnz) / float(n) / float(n),
        "in_degree_min": int(in_degree.min()),
        "in_degree_mean": float(in_degree.mean()),
        "in_degree_max": int(in_degree.max()),
        "out_degree_max": int(out_degree.max()),
        "isolated_nodes": isolated,
        "train": int(graph.train_mask.sum()),
        "val": int(graph.val_mask.sum()),
        "test": int(graph.test_mask.sum()),
        "in_no_split": int((~(graph.train_mask | graph.val_mask | graph.test_mask)).sum()),
        "features_sparse": bool(sp.issparse(graph.features)),
        "feature_density": feature_density,
        "feature_sparsity": 1.0 - feature_density,
    }
    if graph.directed:
        del stats["undirected_edges"]
    if getattr(graph, "edge_attr", None) is not None:
        stats["edge_features"] = graph.num_edge_features
        stats["edge_feature_bytes"] = int(graph.edge_attr.nbytes)
    return stats
