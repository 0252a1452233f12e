"""Vertex reordering before sharding (``--reorder``, `gridgnn.config.REORDERS`): locality for sparse communication.

A reordering is a permutation ``order`` of the vertices: row r of the reordered graph is vertex ``order[r]``
of the original. It is applied once to the global graph (adjacency ``P A Pᵀ``, features, labels, masks) before
any rank cuts its blocks, so the row blocks of the grid are runs of the new order:

==============  ===================================================================================
none            the identity
random          a seeded pseudo-random permutation, computed vertex by vertex (`gridgnn.data.bijection`; the
                distributed preparation gives the same): balances non-zeros across blocks, destroys locality
double-random   the vertex order of ``random``, and Â's columns in a second seeded random order on 2D and 3D
                (Plexus's double permutation, `gridgnn.cost.column_order`): balances the Â blocks each
                process keeps, the diagonal's too; ``meta["column_seed"]`` keeps the seed
rcm             reverse Cuthill-McKee of the symmetrized pattern (`scipy.sparse.csgraph`): a narrow band
metis           METIS k-way (`gridgnn.data.metis`) into the grid's number of row blocks, parts laid out
                one after another (a part's vertices keep their original relative order) and their
                boundaries kept (``meta["reorder_bounds"]``): the grid's row blocks follow the parts
                (`gridgnn.cost.stages`), so the cut METIS minimized is exactly the cut the grid sees.
                METIS balances vertices (parts within its 3 % tolerance), not non-zeros.
metis-nnz       the same, each vertex weighted by its row of Â (its stored entries + 1, the self-loop):
                parts, hence row blocks, hold equal non-zeros (the SpMM's work) within 3 %, and unequal
                vertices (`benchmarks/metis_balance.py`: rows up to 1.25-1.76 x the mean at 4-16 parts)
metis-balanced  the same with both weights at once (METIS's multi-constraint mode): parts hold equal
                vertices (the dense work: activations, the products with W) and equal non-zeros (the
                SpMM), each within 3 %, for a somewhat larger cut
==============  ===================================================================================

``nest`` (3D's depth d; 1 elsewhere): each METIS part is cut again by METIS into ``nest`` sub-parts (its
induced subgraph, the same weights), laid out one after another inside the part. 3D's depth slices hold the
d balanced sub-blocks of every row block, which then nearly coincide with those sub-parts, so a slice's
partial product touches few rows of the other sub-blocks (sparse 3D's depth exchange,
`gridgnn.spmm.depth_rows`). The boundaries kept stay those of the ``parts`` top-level parts.

Everything a user sees stays in original ids: ``meta["vertex_ids"]`` names each new row's original id (outputs),
``meta["reorder_order"]`` is ``order`` itself (dropout draws its masks from original rows, so a reordered
run trains exactly the run of ``--reorder none``; outputs are written at original positions), and
``meta["content_digest"]`` is the digest of the graph in its original order (`gridgnn.data.prepared.graph_digest`:
a checkpoint's fingerprint, so a checkpoint resumes under any order). Not collective.
"""

from __future__ import annotations

import dataclasses
import resource
import time

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import reverse_cuthill_mckee

from gridgnn.config import REORDERS
from gridgnn.data import metis
from gridgnn.data.bijection import random_order
from gridgnn.data.edge_features import carry_rows
from gridgnn.data.graph import Graph
from gridgnn.data.prepared import graph_digest
from gridgnn.errors import ConfigError
from gridgnn.partition import block_bounds


def symmetric_pattern(adj: sp.spmatrix) -> sp.csr_matrix:
    """The pattern of ``A + Aᵀ`` without the diagonal, int32 CSR (what RCM and METIS partition)."""
    pattern = sp.csr_matrix(adj, copy=True)
    pattern.data = np.ones_like(pattern.data, dtype=np.int8)
    sym = (pattern + pattern.T).tocsr()
    sym.setdiag(0)
    sym.eliminate_zeros()
    sym.indices = sym.indices.astype(np.int32, copy=False)
    return sym


def vertex_order(adj: sp.spmatrix, method: str, parts: int, seed: int = 0,
                 nest: int = 1) -> tuple[np.ndarray, list[int] | None]:
    """The permutation (int64, length n; row r of the result is original vertex ``order[r]``) of ``method``,
    and the boundaries of the parts it laid out contiguously (``parts + 1`` ints; None: no partition);
    ``nest``: METIS's sub-parts per part (module docstring)."""
    n = adj.shape[0]
    if method == "none":
        return np.arange(n, dtype=np.int64), None
    if method in ("random", "double-random"):  # id by id: a distributed preparation computes the same order
        return random_order(n, seed), None
    if method == "rcm":
        return reverse_cuthill_mckee(symmetric_pattern(adj), symmetric_mode=True).astype(np.int64), None
    if method == "metis":
        return _metis_order(symmetric_pattern(adj), parts, method=method, nest=nest)
    if method == "metis-nnz":
        return _metis_order(symmetric_pattern(adj), parts, weights=_row_entries(adj), method=method, nest=nest)
    if method == "metis-balanced":
        row_entries = _row_entries(adj)
        weights = np.stack([np.ones_like(row_entries), row_entries], axis=1)
        return _metis_order(symmetric_pattern(adj), parts, weights=weights, method=method, nest=nest)
    raise ConfigError(f"unknown reordering {method!r}; choose one of {', '.join(REORDERS)}")


def _row_entries(adj: sp.spmatrix) -> np.ndarray:
    """Stored entries of each row of Â: A's row plus the self-loop (int64, length n)."""
    return np.diff(sp.csr_matrix(adj).indptr).astype(np.int64) + 1


def _metis_order(sym: sp.csr_matrix, parts: int, weights: np.ndarray | None = None, method: str = "metis",
                 nest: int = 1) -> tuple[np.ndarray, list[int] | None]:
    """METIS k-way into ``parts`` (``weights``: positive ints per vertex, shape (n,) or (n, ncon), each column
    balanced across parts; None: vertices), the parts in order (each cut again into ``nest`` sub-parts, laid
    out in order inside it), and the parts' boundaries."""
    n = sym.shape[0]
    if parts <= 1 or n <= parts:
        return _nested(sym, np.arange(n, dtype=np.int64), weights, method, nest), None
    membership = metis.membership(sym, parts, weights, method=method)
    sizes = np.bincount(membership, minlength=parts)
    order = np.argsort(membership, kind="stable")
    if not sizes.all():  # METIS left a part empty (tiny or disconnected graphs): no block may be empty
        return order, None
    bounds = [0, *np.cumsum(sizes).tolist()]
    if nest > 1:
        order = np.concatenate([_nested(sym, order[a:b], weights, method, nest)
                                for a, b in zip(bounds[:-1], bounds[1:], strict=True)])
    return order, bounds


def _nested(sym: sp.csr_matrix, members: np.ndarray, weights: np.ndarray | None, method: str,
            nest: int) -> np.ndarray:
    """``members`` (original ids, in order) reordered by METIS into ``nest`` sub-parts of their induced
    subgraph, sub-parts one after another; as they are when ``nest`` is 1 or they are too few."""
    if nest <= 1 or len(members) <= nest:
        return members
    inner = sym[members][:, members].tocsr()
    sub = metis.membership(inner, nest, None if weights is None else weights[members], method=method)
    return members[np.argsort(sub, kind="stable")]


def nnz_imbalance(adj: sp.spmatrix, parts: int, bounds: list[int] | None = None) -> float:
    """Max over mean of the stored entries per row block (``bounds``, default ``block_bounds(n, parts)``);
    1.0 is perfect."""
    indptr = np.asarray(sp.csr_matrix(adj).indptr, dtype=np.int64)
    bounds = block_bounds(adj.shape[0], parts) if bounds is None else bounds
    return block_imbalance(np.diff(indptr[np.asarray(bounds)]))


def block_imbalance(per_block: np.ndarray) -> float:
    """Max over mean of ``per_block`` (entries per row block; 1.0 for none); 1.0 is perfect."""
    mean = per_block.mean() if per_block.size else 0.0
    return float(per_block.max() / mean) if mean > 0 else 1.0


def cut_fraction(adj: sp.spmatrix, parts: int, bounds: list[int] | None = None) -> float:
    """Share of the stored entries of ``adj`` whose row and column lie in different row blocks (``bounds``,
    default ``block_bounds(n, parts)``): the entries a 1D grid's blocks cut, what sparse communication pays
    for; 0.0 is no cut. One pass over each block's column ids, no copy of the matrix."""
    csr = sp.csr_matrix(adj)
    bounds = block_bounds(csr.shape[0], parts) if bounds is None else bounds
    if csr.nnz == 0:
        return 0.0
    inside = 0
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        cols = csr.indices[csr.indptr[a]:csr.indptr[b]]
        inside += int(np.count_nonzero((cols >= a) & (cols < b)))
    return 1.0 - inside / csr.nnz


def row_imbalance(n: int, parts: int, bounds: list[int] | None = None) -> float:
    """Max over mean of the rows per row block (``bounds``, default balanced); 1.0 is perfect."""
    sizes = np.diff(np.asarray(block_bounds(n, parts) if bounds is None else bounds))
    return float(sizes.max() / sizes.mean()) if sizes.size and sizes.mean() > 0 else 1.0


def permute(graph: Graph, order: np.ndarray) -> Graph:
    """``graph`` with its vertices in ``order`` (adjacency, features, labels, masks, edge features); meta unchanged."""
    adj = sp.csr_matrix(graph.adj)[order][:, order].tocsr()
    adj.sort_indices()
    features = graph.features[order]
    edge_attr = None if graph.edge_attr is None else carry_rows(graph.adj, graph.edge_attr, adj, order=order)
    return dataclasses.replace(graph, adj=adj, features=features, labels=graph.labels[order], edge_attr=edge_attr,
                               train_mask=graph.train_mask[order], val_mask=graph.val_mask[order],
                               test_mask=graph.test_mask[order], meta=dict(graph.meta))


def with_column_order(graph, method: str, seed: int = 0):
    """``graph`` (a `Graph` or prepared folder already in the vertex order of ``random``) for ``method``, one of
    ``random`` and ``double-random``, which share that vertex order: without a column seed for ``random``; with
    one for ``double-random`` (its own, when it records one, else ``seed``). Nothing is reordered."""
    meta = {k: v for k, v in graph.meta.items() if k != "column_seed"}
    if method == "double-random":
        meta["column_seed"] = int(graph.meta.get("column_seed", seed))
    meta["reorder"] = method
    return dataclasses.replace(graph, meta=meta)


def same_vertex_order(have: str, method: str) -> bool:
    """Whether a graph reordered by ``have`` is already in the vertex order ``method`` asks (the same method, or
    ``random`` and ``double-random``, which differ only in Â's column order: `with_column_order`)."""
    return have == method or {have, method} == {"random", "double-random"}


def reorder_graph(graph: Graph, method: str, parts: int, seed: int = 0, nest: int = 1) -> Graph:
    """``graph`` reordered by ``method`` for ``parts`` row blocks, with the meta keys of the module docstring
    and ``reorder`` (the method), ``reorder_parts``, ``reorder_seconds``, ``reorder_peak_rss_bytes`` and
    ``nnz_imbalance_before`` / ``nnz_imbalance_after`` (max/mean stored entries per row block: balanced
    blocks before, the blocks the grid will cut after), ``row_imbalance_after`` (max/mean rows of those
    blocks) and ``cut_fraction_before`` / ``cut_fraction_after`` (`cut_fraction` of the same blocks);
    ``nest``: METIS's sub-parts per part (module docstring), recorded as ``reorder_nest``."""
    before, cut_before = nnz_imbalance(graph.adj, parts), cut_fraction(graph.adj, parts)
    start = time.perf_counter()
    order, bounds = vertex_order(graph.adj, method, parts, seed, nest)
    out = permute(graph, order) if method != "none" else dataclasses.replace(graph, meta=dict(graph.meta))
    seconds = time.perf_counter() - start
    ids = graph.meta.get("vertex_ids")
    base = graph.meta.get("id_base") if isinstance(graph.meta.get("id_base"), int) else 0
    original = np.asarray(ids, dtype=np.int64) if ids is not None else np.arange(graph.num_nodes) + base
    out.meta.update(reorder=method, reorder_parts=int(parts), reorder_nest=int(nest), reorder_seconds=seconds,
                    reorder_peak_rss_bytes=int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024,
                    nnz_imbalance_before=before, nnz_imbalance_after=nnz_imbalance(out.adj, parts, bounds),
                    row_imbalance_after=row_imbalance(graph.num_nodes, parts, bounds),
                    cut_fraction_before=cut_before, cut_fraction_after=cut_fraction(out.adj, parts, bounds))
    out.meta.pop("reorder_bounds", None)
    if method != "none":
        out.meta.update(vertex_ids=original[order], reorder_order=order,
                        content_digest=graph.meta.get("content_digest") or graph_digest(graph))
    if bounds is not None:
        out.meta["reorder_bounds"] = bounds
    if method == "double-random":
        out.meta["column_seed"] = int(seed)
    else:
        out.meta.pop("column_seed", None)
    return out


def reorder_info(meta: dict, row_blocks: str = "balanced") -> dict:
    """The ``setup.reorder`` object of the metrics file from a graph's meta (method ``none`` if never set);
    ``row_blocks``: ``parts`` when the grid's row blocks followed METIS's parts (one or several consecutive
    parts per block), else ``balanced``."""
    keys = ("reorder_parts", "reorder_nest", "reorder_seconds", "reorder_peak_rss_bytes", "nnz_imbalance_before",
            "nnz_imbalance_after", "row_imbalance_after", "cut_fraction_before", "cut_fraction_after")
    return {"method": meta.get("reorder", "none"), **{key: meta.get(key) for key in keys},
            "row_blocks": row_blocks}
