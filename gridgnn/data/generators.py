"""Synthetic graphs: a contextual stochastic block model (learnable) and R-MAT (Graph500 shape, for scale).

Both are seeded (``numpy.random.default_rng(seed)``) and vectorized: no Python loop runs over edges.
"""

from __future__ import annotations

import numpy as np

from gridgnn.data.bijection import mix_bits, seeded_keys
from gridgnn.data.csbm_parts import CsbmParts
from gridgnn.data.graph import Graph
from gridgnn.data.readers._common import adjacency_from_edges
from gridgnn.data.splits import per_class_split, random_split
from gridgnn.data.transforms import remove_self_loops, symmetrize
from gridgnn.errors import DataError


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise DataError(message)


def csbm(
    nodes: int = 2000,
    classes: int = 5,
    features: int = 32,
    avg_degree: float = 10.0,
    homophily: float = 0.8,
    p_in: float | None = None,
    p_out: float | None = None,
    signal: float = 0.3,
    seed: int = 0,
    directed: bool = False,
    labelled: float = 1.0,
    chunked: bool = False,
) -> Graph:
    """Contextual SBM: class labels drive both the edges and the features.

    Labels: balanced, ``classes`` classes in random order. Edges: about ``nodes * avg_degree / 2``
    undirected edges (``nodes * avg_degree`` directed ones when `directed`); each picks a uniform source,
    then with probability `homophily` a uniform target in the source's class, else one outside it.
    ``p_in``/``p_out`` (edge probabilities within/between classes) replace ``avg_degree`` and ``homophily``
    when both are given. Features (nodes, features) float32: ``mu[label] + N(0, 1)`` with class means
    ``mu ~ N(0, signal²)`` per coordinate. Split: 20 train / 30 validation nodes per class, rest test.
    The defaults give a graph that a 2-layer GCN classifies with > 0.9 test accuracy in a few seconds.

    ``labelled`` < 1 hides the other labels, as ogbn-papers100M does: ``max(1, round(labelled * nodes))``
    vertices drawn uniformly (``default_rng([seed, 1])``, so structure and features stay those of
    ``labelled=1``) keep their class, every other one is -1 (unlabelled), and the split is a random 60/20/20
    among the labelled vertices (`random_split`); ``meta["split"]`` says which split was drawn.

    ``chunked`` draws the same distributions in seeded parts (`gridgnn.data.csbm_parts`), so that
    ``prepare --nprocs P`` generates the very graph one process does, for any P; the default keeps the single
    stream (and every graph) of earlier versions.
    """
    parts = csbm_parts(nodes, classes, features, avg_degree, homophily, p_in, p_out, signal, seed, directed,
                       labelled)
    if chunked:
        return _chunked_csbm(parts)
    avg_degree, homophily = parts.avg_degree, parts.homophily
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.arange(nodes, dtype=np.int64) % classes)
    num_edges = int(round(nodes * avg_degree / (1 if directed else 2)))
    src, dst = _sbm_edges(labels, classes, num_edges, homophily, rng)
    adj = remove_self_loops(adjacency_from_edges(src, dst, nodes, "csbm"))
    if not directed:
        adj = symmetrize(adj)
    means = rng.normal(0.0, signal, size=(classes, features)).astype(np.float32)
    x = rng.standard_normal((nodes, features), dtype=np.float32)
    x += means[labels]
    meta = {"format": "csbm", "split": "per-class-20-30", "seed": seed, "homophily": homophily}
    if labelled < 1.0:
        kept = _labelled_share(nodes, labelled, seed)
        labels = np.where(kept, labels, -1).astype(np.int64)
        train, val, test = random_split(nodes, seed=seed, among=kept)
        meta |= {"split": "random-60-20-20-of-labelled", "labelled": labelled}
    else:
        train, val, test = per_class_split(labels, 20, 30, seed=seed)
    return Graph(
        adj=adj, features=x, labels=labels, train_mask=train, val_mask=val, test_mask=test,
        num_classes=classes, name="csbm", directed=directed, meta=meta,
    )  # fmt: skip


def csbm_parts(nodes: int = 2000, classes: int = 5, features: int = 32, avg_degree: float = 10.0,
               homophily: float = 0.8, p_in: float | None = None, p_out: float | None = None, signal: float = 0.3,
               seed: int = 0, directed: bool = False, labelled: float = 1.0, **_) -> CsbmParts:
    """`csbm`'s parameters checked (`DataError`, one line) and resolved (``p_in``/``p_out`` into ``avg_degree``
    and ``homophily``), as a `gridgnn.data.csbm_parts.CsbmParts`; other keywords (``chunked``) are ignored."""
    _require(nodes >= 1 and 1 <= classes <= nodes, f"csbm: need 1 <= classes <= nodes, got {classes}, {nodes}")
    _require(features >= 1, f"csbm: features must be >= 1, got {features}")
    if (p_in is None) != (p_out is None):
        raise DataError("csbm: give both p_in and p_out, or neither")
    if p_in is not None:
        avg_degree, homophily = _from_probabilities(nodes, classes, p_in, p_out)
    _require(avg_degree >= 0, f"csbm: avg_degree must be >= 0, got {avg_degree}")
    _require(0.0 <= homophily <= 1.0, f"csbm: homophily must lie in [0, 1], got {homophily}")
    _require(signal >= 0, f"csbm: signal must be >= 0, got {signal}")
    _require(0.0 < labelled <= 1.0, f"csbm: labelled must lie in (0, 1], got {labelled}")
    return CsbmParts(nodes, classes, features, avg_degree, homophily, signal, seed, directed, labelled)


def _chunked_csbm(parts: CsbmParts) -> Graph:
    """The whole graph of a chunked csbm, drawn part by part as P processes draw theirs."""
    src, dst = parts.edges(0, parts.num_chunks)
    adj = remove_self_loops(adjacency_from_edges(src, dst, parts.nodes, "csbm"))
    if not parts.directed:
        adj = symmetrize(adj)
    x, labels, (train, val, test) = parts.node_rows(0, parts.nodes)
    return Graph(adj=adj, features=x, labels=labels, train_mask=train, val_mask=val, test_mask=test,
                 num_classes=parts.classes, name="csbm", directed=parts.directed, meta=parts.meta())


def _labelled_share(nodes: int, share: float, seed: int) -> np.ndarray:
    """Bool (nodes,): ``max(1, round(share * nodes))`` vertices drawn with ``default_rng([seed, 1])``."""
    chosen = np.random.default_rng([seed, 1]).choice(nodes, size=max(1, int(round(share * nodes))), replace=False)
    mask = np.zeros(nodes, dtype=bool)
    mask[chosen] = True
    return mask


def _from_probabilities(nodes: int, classes: int, p_in: float, p_out: float | None) -> tuple[float, float]:
    """(avg_degree, homophily) equivalent to within/between-class edge probabilities p_in, p_out."""
    _require(0 <= p_in <= 1 and 0 <= p_out <= 1, f"csbm: p_in and p_out must lie in [0, 1], got {p_in}, {p_out}")
    size = nodes / classes
    within, between = p_in * (size - 1), p_out * (nodes - size)
    degree = within + between
    return degree, (within / degree if degree > 0 else 1.0)


def _sbm_edges(
    labels: np.ndarray, classes: int, num_edges: int, homophily: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(src, dst) int64 arrays of shape (num_edges,) drawn as described in `csbm`."""
    nodes = labels.shape[0]
    by_class = np.argsort(labels, kind="stable")  # node ids grouped by class
    count = np.bincount(labels, minlength=classes)
    start = np.concatenate([[0], np.cumsum(count)[:-1]])
    src = rng.integers(0, nodes, num_edges)
    c = labels[src]
    same = rng.random(num_edges) < (homophily if classes > 1 else 1.0)
    inside = start[c] + (rng.random(num_edges) * count[c]).astype(np.int64)
    outside = (rng.random(num_edges) * (nodes - count[c])).astype(np.int64)
    outside = np.where(outside >= start[c], outside + count[c], outside)  # skip the source's class block
    position = np.minimum(np.where(same, inside, outside), nodes - 1)
    return src, by_class[position]


RMAT_ROW_CHUNK = 1 << 16
"""Vertices whose features, labels and split one generator draws (`rmat_node_rows`)."""
_DRAW_ROWS = 1 << 12
"""Rows of features drawn at a time from a chunk's generator (the same stream as drawing the chunk whole)."""


def rmat(
    scale: int = 10,
    edge_factor: int = 16,
    a: float = 0.57,
    b: float = 0.19,
    c: float = 0.19,
    features: int = 16,
    classes: int = 2,
    seed: int = 0,
    directed: bool = False,
    chunk_edges: int = 1 << 16,
) -> Graph:
    """R-MAT graph with ``2**scale`` nodes and ``edge_factor * 2**scale`` sampled edges (Graph500 defaults).

    Each edge descends `scale` levels of the adjacency quadrants (a: top-left, b: top-right, c: bottom-left,
    d = 1 - a - b - c), generated `chunk_edges` at a time into int32/int64 arrays; vertex ids are then
    scrambled by a seeded bijection (`rmat_scramble`; as Graph500 permutes them) so that degree does not follow
    id. Duplicates and self-loops are dropped, so fewer edges remain. Features (n, features) float32 are
    N(0, 1), labels uniform in [0, classes), each vertex in train/validation/test with probability
    0.6/0.2/0.2; none of them relates to the structure (a systems benchmark).

    Every chunk of edges and of vertices has its own generator (``default_rng([seed, 0, chunk])`` for edges,
    ``[seed, 1, chunk]`` for `RMAT_ROW_CHUNK` vertices), so that any process can generate any part alone and
    ``gridgnn prepare --nprocs P`` builds the same graph for every P (`rmat_edge_chunks`, `rmat_node_rows`).
    """
    check_rmat(scale, edge_factor, a, b, c, features, classes, chunk_edges)
    nodes = 1 << scale
    src, dst = rmat_edge_chunks(scale, edge_factor, (a, b, c), chunk_edges, seed, 0, rmat_chunks(scale, edge_factor,
                                                                                                    chunk_edges))
    adj = adjacency_from_edges(src, dst, nodes, "rmat")
    del src, dst
    adj = remove_self_loops(adj if directed else symmetrize(adj))
    x, labels, (train, val, test) = rmat_node_rows(0, nodes, features, classes, seed)
    return Graph(
        adj=adj, features=x, labels=labels, train_mask=train, val_mask=val,
        test_mask=test, num_classes=classes, name=f"rmat-{scale}-{edge_factor}", directed=directed,
        meta={"format": "rmat", "split": "per-vertex-60-20-20", "seed": seed},
    )  # fmt: skip


def check_rmat(scale: int, edge_factor: int, a: float, b: float, c: float, features: int, classes: int,
               chunk_edges: int) -> None:
    """`DataError` (one line) on parameters `rmat` cannot use."""
    _require(1 <= scale <= 40, f"rmat: scale must lie in [1, 40], got {scale}")
    _require(edge_factor >= 1, f"rmat: edge_factor must be >= 1, got {edge_factor}")
    _require(min(a, b, c) >= 0 and a + b + c <= 1, f"rmat: need a, b, c >= 0 and a + b + c <= 1, got {a}, {b}, {c}")
    _require(features >= 1 and classes >= 1, f"rmat: features and classes must be >= 1, got {features}, {classes}")
    _require(chunk_edges >= 1, f"rmat: chunk_edges must be >= 1, got {chunk_edges}")


def rmat_chunks(scale: int, edge_factor: int, chunk_edges: int) -> int:
    """The number of edge chunks of an R-MAT graph."""
    return -(-(edge_factor << scale) // chunk_edges)


def rmat_edge_chunks(scale: int, edge_factor: int, abc: tuple[float, float, float], chunk_edges: int, seed: int,
                     first: int, last: int) -> tuple[np.ndarray, np.ndarray]:
    """(src, dst) of edge chunks [first, last) (ids already scrambled), int32 when ids fit, else int64.
    Chunk k holds edges [k * chunk_edges, (k + 1) * chunk_edges) of the ``edge_factor * 2**scale`` and draws
    them from ``default_rng([seed, 0, k])``."""
    a, b, c = abc
    dtype = np.int32 if scale <= 30 else np.int64
    num_edges = edge_factor << scale
    begin, end = first * chunk_edges, min(last * chunk_edges, num_edges)
    src = np.zeros(max(0, end - begin), dtype=dtype)
    dst = np.zeros_like(src)
    for k in range(first, last):
        lo, hi = k * chunk_edges - begin, min((k + 1) * chunk_edges, num_edges) - begin
        s, d = src[lo:hi], dst[lo:hi]  # views, filled in place
        rng = np.random.default_rng([seed, 0, k])
        for level in range(scale):
            r = rng.random(s.shape[0], dtype=np.float32)
            lower = r >= a + b  # quadrants c and d: the source bit is 1
            right = (r >= a) ^ lower ^ (r >= a + b + c)  # quadrants b and d: the target bit is 1
            s |= lower.astype(dtype) << level
            d |= right.astype(dtype) << level
    return rmat_scramble(src, scale, seed), rmat_scramble(dst, scale, seed)


def rmat_scramble(ids: np.ndarray, scale: int, seed: int) -> np.ndarray:
    """A seeded bijection of [0, 2**scale) applied to ``ids`` (same dtype): `gridgnn.data.bijection.mix_bits`
    keyed by ``default_rng([seed, 2])``. Computed per id, so any process scrambles its own edges without a
    permutation table."""
    return mix_bits(ids, scale, seeded_keys(seed, 2)).astype(ids.dtype)


def rmat_node_rows(r0: int, r1: int, features: int, classes: int, seed: int):
    """Features (r1 - r0, features) float32, labels (r1 - r0,) int64 and (train, val, test) masks of R-MAT
    vertices [r0, r1): vertex chunk j (`RMAT_ROW_CHUNK` vertices) draws from ``default_rng([seed, 1, j])``
    its features, then its labels, then one uniform per vertex (< 0.6 train, < 0.8 validation, else test)."""
    rows = r1 - r0
    x = np.empty((rows, features), dtype=np.float32)
    labels = np.empty(rows, dtype=np.int64)
    draw = np.empty(rows, dtype=np.float64)
    for j in range(r0 // RMAT_ROW_CHUNK, -(-r1 // RMAT_ROW_CHUNK)):
        lo, hi = j * RMAT_ROW_CHUNK, (j + 1) * RMAT_ROW_CHUNK
        rng = np.random.default_rng([seed, 1, j])
        a, b = max(lo, r0), min(hi, r1)
        for s in range(lo, hi, _DRAW_ROWS):  # the chunk's features in slices of one stream: little memory
            slice_x = rng.standard_normal((min(_DRAW_ROWS, hi - s), features), dtype=np.float32)
            c, d = max(s, a), min(s + len(slice_x), b)
            if d > c:
                x[c - r0:d - r0] = slice_x[c - s:d - s]
        chunk_labels = rng.integers(0, classes, RMAT_ROW_CHUNK, dtype=np.int64)
        chunk_draw = rng.random(RMAT_ROW_CHUNK)
        labels[a - r0:b - r0] = chunk_labels[a - lo:b - lo]
        draw[a - r0:b - r0] = chunk_draw[a - lo:b - lo]
    return x, labels, (draw < 0.6, (draw >= 0.6) & (draw < 0.8), draw >= 0.8)
