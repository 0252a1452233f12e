"""Edge features: one row of ``d`` floats per stored edge, aligned with the adjacency's CSR entries.

`gridgnn.data.graph.Graph.edge_attr` is (E, d) float32 with row e the features of the adjacency's e-th stored
entry in CSR order (by target vertex, then source vertex: ``adj[dst, src]`` is the edge src -> dst). The
adjacency of a graph with edge features is canonical (sorted column ids, no duplicate entries), so an edge has
exactly one row. What each step of loading does to them (documented in docs/edge-features.md):

- read: a source's edges in its own order (an edge list's lines, OGB's ``edge.csv.gz`` rows, PyG's
  ``edge_index`` columns) are placed by `edge_positions`; an edge given twice gets the **mean** of its rows
  (`collapse_rows`);
- symmetrize (undirected graphs): an edge stored in both directions keeps each direction's own features; a
  reverse edge the symmetrization adds gets a **copy** of its forward edge's features (`carry_rows`,
  ``reverse=True``);
- duplicate and self-loop removal: a removed self-loop's features are dropped;
- reordering (`gridgnn.data.reorder.permute`): the rows follow their edges (`carry_rows` with ``order``);
- sharding: a process keeps the rows of its block rows' edges only (`block_rows`);
- an operator with self-loops (GAT's A + I): a loop gets the mean of its vertex's incoming edges' rows
  (`operator_rows`).

Not collective.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from gridgnn.errors import DataError


def entry_rows(matrix) -> np.ndarray:
    """(E,) int64: the row of every stored entry of the CSR ``matrix``."""
    return np.repeat(np.arange(matrix.shape[0], dtype=np.int64), np.diff(matrix.indptr))


def entry_keys(adj: sp.csr_matrix) -> np.ndarray:
    """(E,) int64 ``row * n + column`` of every stored entry of the canonical CSR ``adj`` (n, n): ascending."""
    return entry_rows(adj) * adj.shape[1] + adj.indices.astype(np.int64)


def _group_mean(values: np.ndarray, groups: np.ndarray, num_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """(the mean (num_groups, d) float32 of the rows of ``values`` (E, d) in each group, 0 for an empty one;
    the counts (num_groups,)), ``groups`` (E,) naming each row's group: summed in float64 by one sparse product
    (not ``np.add.at``, which is slow on many rows)."""
    counts = np.bincount(groups, minlength=num_groups)
    members = sp.csr_matrix((np.ones(len(groups)), (groups, np.arange(len(groups)))),
                            shape=(num_groups, len(groups)))
    sums = members @ np.asarray(values, dtype=np.float64)
    return (sums / np.maximum(counts, 1)[:, None]).astype(np.float32), counts


def group_mean(values: np.ndarray, groups: np.ndarray, num_groups: int) -> np.ndarray:
    """(num_groups, d) float32: the mean of the rows of ``values`` in each group (``groups`` (E,)), summed in
    float64 in the rows' order (0 for an empty group): how every mean of edge-feature rows here is taken."""
    return _group_mean(values, groups, num_groups)[0]


def edge_positions(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> np.ndarray:
    """(E_in,) int64: the CSR entry of each input edge src -> dst in the adjacency built from these edges with
    duplicates collapsed (`gridgnn.data.readers._common.adjacency_from_edges`): ``adj[dst, src]``."""
    keys = np.asarray(dst, dtype=np.int64) * num_nodes + np.asarray(src, dtype=np.int64)
    return np.searchsorted(np.unique(keys), keys)


def collapse_rows(rows: np.ndarray, positions: np.ndarray, num_entries: int, where: str) -> np.ndarray:
    """(num_entries, d) float32: the mean of the input rows (E_in, d) that land on each entry (``positions``,
    `edge_positions`); `DataError` when the counts differ or an entry has no row."""
    rows = check_edge_rows(rows, len(positions), where)
    counts = np.bincount(positions, minlength=num_entries)
    if counts.size != num_entries or (counts == 0).any():
        raise DataError(f"{where}: the edge features do not cover every edge of the graph")
    if (counts == 1).all():
        out = np.empty_like(rows)
        out[positions] = rows
        return out
    return _group_mean(rows, positions, num_entries)[0]


def check_edge_rows(rows, num_edges: int, where: str) -> np.ndarray:
    """``rows`` as a C-contiguous (num_edges, d) float32 array (a 1-D array is one feature per edge);
    `DataError` (one line) on another row count, another rank, a non-numeric dtype or NaN/inf."""
    rows = np.asarray(rows)
    if rows.ndim == 1:
        rows = rows[:, None]
    if rows.ndim != 2:
        raise DataError(f"{where}: edge features must be (E, d), got an array of shape {rows.shape}")
    if not (np.issubdtype(rows.dtype, np.floating) or np.issubdtype(rows.dtype, np.integer)
            or rows.dtype == np.bool_):
        raise DataError(f"{where}: edge features must be numbers, got dtype {rows.dtype}")
    if rows.shape[0] != num_edges:
        raise DataError(f"{where}: {rows.shape[0]} edge-feature rows for {num_edges} edges")
    if rows.shape[1] == 0:
        raise DataError(f"{where}: edge features have no columns")
    rows = np.ascontiguousarray(rows, dtype=np.float32)
    if not np.isfinite(rows).all():
        raise DataError(f"{where}: edge features contain NaN or inf")
    return rows


def carry_rows(old: sp.csr_matrix, rows: np.ndarray, new: sp.csr_matrix, *, order: np.ndarray | None = None,
               reverse: bool = False) -> np.ndarray:
    """The edge-feature rows of ``new``'s entries, taken from ``old``'s (``rows``: (E_old, d), aligned).

    ``order``: ``new`` is ``old`` with its vertices renumbered, new vertex v being old vertex ``order[v]``.
    ``reverse``: an entry of ``new`` missing from ``old`` takes the row of its reverse edge (the
    symmetrization's added edges). Raises ValueError for an entry found neither way (a caller's bug)."""
    n = new.shape[0]
    new_rows, new_cols = entry_rows(new), new.indices.astype(np.int64)
    if order is not None:
        order = np.asarray(order, dtype=np.int64)
        new_rows, new_cols = order[new_rows], order[new_cols]
    keys = entry_keys(old)
    at = _find(keys, new_rows * n + new_cols)
    if reverse:
        missing = at < 0
        at[missing] = _find(keys, new_cols[missing] * n + new_rows[missing])
    if (at < 0).any():
        raise ValueError("an edge of the new adjacency has no row among the old edge features")
    return rows[at]


def _find(sorted_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Position of each key in ``sorted_keys`` (ascending), -1 where absent."""
    at = np.searchsorted(sorted_keys, keys)
    inside = at < sorted_keys.size
    found = np.zeros(keys.size, dtype=bool)
    found[inside] = sorted_keys[at[inside]] == keys[inside]
    return np.where(found, at, -1)


def block_rows(edge_attr, indptr, rows: tuple[int, int]) -> np.ndarray:
    """The edge-feature rows of the edges of block rows ``[r0, r1)`` (CSR ``indptr`` of the adjacency they are
    aligned with): a copy, so that a memory-mapped array's pages can leave. Not collective."""
    r0, r1 = rows
    return np.array(edge_attr[int(indptr[r0]):int(indptr[r1])], dtype=np.float32)


def operator_rows(adj: sp.csr_matrix, edge_attr: np.ndarray | None, operator: sp.csr_matrix) -> np.ndarray | None:
    """The edge-feature rows of the stored entries of ``operator`` (an operator matrix of ``adj``,
    `gridgnn.data.operators`): an edge's own row; a diagonal entry ``adj`` lacks (the self-loop of ``gat``'s A + I)
    gets the **mean** of its vertex's incoming edges' rows (zeros without any), as PyG's ``add_self_loops(...,
    fill_value="mean")`` in ``GATConv(edge_dim=...)``. None for a graph without edge features. Not collective."""
    if edge_attr is None:
        return None
    n = adj.shape[0]
    rows, cols = entry_rows(operator), operator.indices.astype(np.int64)
    at = _find(entry_keys(adj), rows * n + cols)
    loops = at < 0
    if (loops & (rows != cols)).any():
        raise ValueError("an off-diagonal entry of the operator is no edge of the adjacency")
    out = np.empty((len(at), edge_attr.shape[1]), dtype=np.float32)
    out[~loops] = edge_attr[at[~loops]]
    if loops.any():  # a loop's row: the mean of its vertex's in-edges (an adjacency row's entries)
        out[loops] = _group_mean(edge_attr, entry_rows(adj), n)[0][rows[loops]]
    return out
