"""Generated graphs for the multilabel and regression tasks (`gridgnn.data.targets`), whose targets depend on
neighbourhoods, so that a GNN beats a model of each vertex's own features.

- `multilabel`: a uniform random graph; target t of a vertex is 1 when the mean of a latent value over its
  in-neighbours (plus a little of its own) is positive; its features carry its own latent values in noise.
- `heat`: a random geometric graph in the unit square (a mesh-like graph); the target is the steady
  temperature of a plate with heat sources, losing heat to its surroundings and held at 0 on its edge (a
  screened Poisson problem on the graph Laplacian); the features are noisy local information.
- `mesh`: the same physics on a Delaunay triangulation whose plate conducts better along x, with edge
  features (the source's relative position and the distance): the target depends on the edges' directions.

Both are seeded (``numpy.random.default_rng(seed)``), vectorized, hide a share of their target entries (NaN)
and split the labelled vertices 60/20/20 at random (`gridgnn.data.splits.random_split`). Registered as
``--dataset multilabel:key=value,...``, ``heat:key=value,...`` and ``mesh:key=value,...``
(`gridgnn.data.registry.GENERATORS`).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import spsolve
from scipy.spatial import cKDTree

from gridgnn.data.edge_features import entry_rows
from gridgnn.data.generators import _require
from gridgnn.data.graph import Graph
from gridgnn.data.readers._common import adjacency_from_edges
from gridgnn.data.splits import random_split
from gridgnn.data.targets import labelled_vertices
from gridgnn.data.transforms import remove_self_loops, symmetrize


def _hide(targets: np.ndarray, missing: float, rng: np.random.Generator) -> np.ndarray:
    """``targets`` (n, T) float32 with each entry NaN with probability ``missing``."""
    hidden = targets.copy()
    hidden[rng.random(targets.shape) < missing] = np.nan
    return hidden


def _task_graph(adj: sp.csr_matrix, features: np.ndarray, targets: np.ndarray, task: str, name: str,
                seed: int, directed: bool, meta: dict) -> Graph:
    """A `Graph` of ``task`` with a random 60/20/20 split among the vertices with a present target."""
    train, val, test = random_split(adj.shape[0], seed=seed, among=labelled_vertices(targets, task))
    return Graph(adj=adj, features=features, labels=targets, train_mask=train, val_mask=val, test_mask=test,
                 num_classes=targets.shape[1], name=name, directed=directed, task=task,
                 meta={"format": name, "split": "random-60-20-20", "seed": seed, **meta})


def multilabel(
    nodes: int = 2000,
    targets: int = 4,
    features: int = 16,
    avg_degree: float = 10.0,
    own: float = 0.1,
    noise: float = 1.0,
    missing: float = 0.05,
    seed: int = 0,
    directed: bool = False,
) -> Graph:
    """A multilabel graph whose targets are read from neighbourhoods.

    Edges: about ``nodes * avg_degree / 2`` uniform random undirected edges (``nodes * avg_degree`` directed
    ones when `directed`), self-loops dropped. Latent values ``z`` (nodes, targets) ~ N(0, 1); target t of
    vertex v is 1 when ``mean(z[u, t] for u in-neighbours of v) + own * z[v, t] > 0``, else 0, so about half
    are 1. Features (nodes, features) float32: N(0, noise²), with ``z`` added to the first ``targets``
    columns: a vertex's own features say little of its targets (``own``), its neighbours' say much. Targets
    (nodes, targets) float32: NaN for a vertex without in-neighbours and for a ``missing`` share of entries.
    """
    _require(nodes >= 2, f"multilabel: nodes must be >= 2, got {nodes}")
    _require(1 <= targets <= features, f"multilabel: need 1 <= targets <= features, got {targets}, {features}")
    _require(avg_degree > 0, f"multilabel: avg_degree must be > 0, got {avg_degree}")
    _require(own >= 0 and noise >= 0, f"multilabel: own and noise must be >= 0, got {own}, {noise}")
    _require(0 <= missing < 1, f"multilabel: missing must lie in [0, 1), got {missing}")
    rng = np.random.default_rng(seed)
    num_edges = max(1, int(round(nodes * avg_degree / (1 if directed else 2))))
    src, dst = rng.integers(0, nodes, num_edges), rng.integers(0, nodes, num_edges)
    adj = remove_self_loops(adjacency_from_edges(src, dst, nodes, "multilabel"))
    if not directed:
        adj = symmetrize(adj)
    latent = rng.standard_normal((nodes, targets))
    degree = np.asarray(adj.sum(axis=1)).ravel()
    score = np.asarray(adj @ latent) / np.maximum(degree, 1)[:, None] + own * latent
    values = (score > 0).astype(np.float32)
    values[degree == 0] = np.nan  # no neighbourhood to read the target from
    x = (noise * rng.standard_normal((nodes, features))).astype(np.float32)
    x[:, :targets] += latent.astype(np.float32)
    return _task_graph(adj, x, _hide(values, missing, rng), "multilabel", "multilabel", seed, directed,
                       {"own": own, "noise": noise})


def heat(
    nodes: int = 2000,
    avg_degree: float = 8.0,
    sources: int = 6,
    width: float = 0.08,
    loss: float = 0.5,
    noise: float = 0.5,
    missing: float = 0.05,
    seed: int = 0,
    directed: bool = False,
) -> Graph:
    """A regression graph: the steady temperature of a heated plate, sampled on a random geometric graph.

    Vertices: ``nodes`` points uniform in the unit square; edges join points closer than ``r =
    sqrt(avg_degree / (pi * nodes))`` (scipy's cKDTree), so the mean degree is about ``avg_degree`` (less
    near the edge). Heat source f: ``sources`` Gaussian bumps of standard deviation ``width`` at uniform
    centres in [0.1, 0.9]², heights uniform in [0.5, 1.5]. Temperature u: 0 on the vertices within r of the
    square's edge (held there); inside, ``(L + loss * I) u = f`` with L = D - A the graph Laplacian (each
    edge conducts 1, each vertex loses ``loss`` per degree of temperature to its surroundings), solved by
    `scipy.sparse.linalg.spsolve`. Target (nodes, 1) float32: u scaled to unit standard deviation, NaN for a
    ``missing`` share. Features (nodes, 4) float32: x, y, f scaled to unit standard deviation plus N(0,
    noise²), and 1 on the edge (else 0). The graph is symmetric; `directed` only keeps it from being
    symmetrized again.
    """
    _require(nodes >= 2, f"heat: nodes must be >= 2, got {nodes}")
    _require(avg_degree > 0, f"heat: avg_degree must be > 0, got {avg_degree}")
    _require(sources >= 1, f"heat: sources must be >= 1, got {sources}")
    _require(width > 0 and loss > 0, f"heat: width and loss must be > 0, got {width}, {loss}")
    _require(noise >= 0, f"heat: noise must be >= 0, got {noise}")
    _require(0 <= missing < 1, f"heat: missing must lie in [0, 1), got {missing}")
    rng = np.random.default_rng(seed)
    position = rng.random((nodes, 2))
    radius = float(np.sqrt(avg_degree / (np.pi * nodes)))
    pairs = cKDTree(position).query_pairs(radius, output_type="ndarray")
    adj = symmetrize(adjacency_from_edges(pairs[:, 0], pairs[:, 1], nodes, "heat"))
    source = _heat_source(position, sources, width, rng)
    edge = (position.min(axis=1) < radius) | (position.max(axis=1) > 1 - radius)
    temperature = _steady_temperature(adj, source, edge, loss)
    values = (temperature / max(float(temperature.std()), 1e-12)).astype(np.float32)[:, None]
    x = _plate_features(position, source, edge, noise, rng)
    return _task_graph(adj, x, _hide(values, missing, rng), "regression", "heat", seed, directed,
                       {"radius": radius, "loss": loss, "noise": noise})


def _heat_source(position: np.ndarray, sources: int, width: float, rng: np.random.Generator) -> np.ndarray:
    """f (n,): ``sources`` Gaussian bumps of standard deviation ``width`` at uniform centres in [0.1, 0.9]²,
    heights uniform in [0.5, 1.5], at the points ``position`` (n, 2)."""
    centres = 0.1 + 0.8 * rng.random((sources, 2))
    heights = rng.uniform(0.5, 1.5, sources)
    squared = ((position[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2)
    return (heights * np.exp(-squared / (2 * width**2))).sum(axis=1)


def _plate_features(position: np.ndarray, source: np.ndarray, edge: np.ndarray, noise: float,
                    rng: np.random.Generator) -> np.ndarray:
    """(n, 4) float32: x, y, the source scaled to unit standard deviation plus N(0, noise²), 1 on the plate's
    edge (``edge``, bool (n,))."""
    f = source / max(float(source.std()), 1e-12) + noise * rng.standard_normal(len(position))
    return np.stack([position[:, 0], position[:, 1], f, edge.astype(np.float64)], axis=1).astype(np.float32)


def _steady_temperature(adj: sp.csr_matrix, source: np.ndarray, edge: np.ndarray, loss: float) -> np.ndarray:
    """u (n,) float64: 0 where ``edge`` (bool (n,)), else the solution of ``((D - A) + loss I) u = source``
    restricted to the other vertices (their neighbours on the edge enter with u = 0); A may be weighted (each
    entry an edge's conductance, D its row sums)."""
    inside = np.flatnonzero(~edge)
    temperature = np.zeros(adj.shape[0])
    if inside.size:
        degree = np.asarray(adj.sum(axis=1)).ravel()
        system = sp.diags(degree[inside] + loss) - adj[inside][:, inside]
        temperature[inside] = spsolve(sp.csc_matrix(system), source[inside])
    return temperature


def mesh(
    nodes: int = 2000,
    sources: int = 6,
    width: float = 0.08,
    loss: float = 0.5,
    anisotropy: float = 4.0,
    noise: float = 0.5,
    missing: float = 0.05,
    seed: int = 0,
    directed: bool = False,
) -> Graph:
    """A regression graph with edge features: anisotropic heat conduction on a triangulated plate.

    Vertices: ``nodes`` points uniform in the unit square; edges: their Delaunay triangulation (scipy's
    ``Delaunay``), both directions. Edge src -> dst has features (3,) float32: the source's position relative to
    the destination, ``(dx, dy) / h``, and the distance ``d / h`` (h: the mean edge length). It conducts
    ``w = (h / d)² (1 + anisotropy (dx / d)²)``: short edges conduct more (as a finite-volume stencil) and the
    plate conducts ``1 + anisotropy`` times better along x than along y, so the target depends on the edges'
    directions, which only their features say. Heat source, loss, the edge held at 0 (the triangulation's hull)
    and the target as `heat` (``(L_w + loss I) u = f`` with L_w the weighted Laplacian; u scaled to unit
    standard deviation, NaN for a ``missing`` share); features (nodes, 4): x, y, the noisy source, 1 on the
    hull. The graph is symmetric; `directed` only keeps it from being symmetrized again.
    """
    from scipy.spatial import Delaunay

    _require(nodes >= 4, f"mesh: nodes must be >= 4, got {nodes}")
    _require(sources >= 1, f"mesh: sources must be >= 1, got {sources}")
    _require(width > 0 and loss > 0, f"mesh: width and loss must be > 0, got {width}, {loss}")
    _require(anisotropy >= 0 and noise >= 0, f"mesh: anisotropy and noise must be >= 0, got {anisotropy}, {noise}")
    _require(0 <= missing < 1, f"mesh: missing must lie in [0, 1), got {missing}")
    rng = np.random.default_rng(seed)
    position = rng.random((nodes, 2))
    triangles = Delaunay(position).simplices
    pairs = np.concatenate([triangles[:, [0, 1]], triangles[:, [1, 2]], triangles[:, [2, 0]]])
    src, dst = np.concatenate([pairs[:, 0], pairs[:, 1]]), np.concatenate([pairs[:, 1], pairs[:, 0]])
    adj = adjacency_from_edges(src, dst, nodes, "mesh")  # canonical: rows are destinations
    rows = entry_rows(adj)
    offset = position[adj.indices] - position[rows]  # source relative to destination, one per stored edge
    distance = np.linalg.norm(offset, axis=1)
    h = float(distance.mean())
    conduct = (h / distance) ** 2 * (1 + anisotropy * (offset[:, 0] / distance) ** 2)
    weighted = sp.csr_matrix((conduct, adj.indices, adj.indptr), shape=adj.shape)
    source = _heat_source(position, sources, width, rng)
    hull = np.zeros(nodes, dtype=bool)
    hull[np.unique(Delaunay(position).convex_hull)] = True
    temperature = _steady_temperature(weighted, source, hull, loss)
    values = (temperature / max(float(temperature.std()), 1e-12)).astype(np.float32)[:, None]
    x = _plate_features(position, source, hull, noise, rng)
    edge_attr = (np.column_stack([offset, distance]) / h).astype(np.float32)
    graph = _task_graph(adj, x, _hide(values, missing, rng), "regression", "mesh", seed, directed,
                        {"mean_edge_length": h, "loss": loss, "anisotropy": anisotropy, "noise": noise})
    graph.edge_attr = edge_attr
    graph.validate()
    return graph
