"""One process's row block of the operator, built from the entries routed to it. Not collective except
`operator_values` (which gathers every row's degree for GCN).

Entries are (row, column) pairs of global ids with rows in [r0, r1). As the one-process preprocessing does
(`gridgnn.data.registry.preprocess`, `gridgnn.data.operators`): duplicates collapse to one 0/1 entry,
self-loops are dropped, and the operator's values are computed with the same arithmetic, so that the arrays
are equal to the bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gridgnn.prepare.exchange import all_gather_rows


@dataclass
class RowBlock:
    """A CSR row block: rows [r0, r1) of an (n, n) matrix; ``indptr`` (r1 - r0 + 1,) int64 from 0,
    ``indices`` (nnz,) int64 sorted within each row, ``data`` (nnz,) float32 or None for a 0/1 pattern."""

    r0: int
    r1: int
    n: int
    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray | None = None

    @property
    def counts(self) -> np.ndarray:
        return np.diff(self.indptr)

    def local_rows(self) -> np.ndarray:
        """The block row (0-based) of every stored entry, (nnz,) int64."""
        return np.repeat(np.arange(self.r1 - self.r0, dtype=np.int64), self.counts)


def pattern_block(rows: np.ndarray, cols: np.ndarray, r0: int, r1: int, n: int) -> RowBlock:
    """The 0/1 pattern of entries (``rows``, ``cols``) (global ids, rows in [r0, r1)) without duplicates and
    without self-loops, as a `RowBlock`."""
    keep = rows != cols
    local, cols = rows[keep] - r0, cols[keep]
    if (r1 - r0) < np.iinfo(np.int64).max // max(n, 1):  # one int64 key per entry
        keys = np.unique(local * n + cols)
        local, cols = keys // n, keys % n
    else:  # a key would overflow: sort the pairs instead
        order = np.lexsort((cols, local))
        local, cols = local[order], cols[order]
        first = np.ones(local.size, dtype=bool)
        first[1:] = (local[1:] != local[:-1]) | (cols[1:] != cols[:-1])
        local, cols = local[first], cols[first]
    indptr = np.zeros(r1 - r0 + 1, dtype=np.int64)
    np.cumsum(np.bincount(local, minlength=r1 - r0), out=indptr[1:])
    return RowBlock(r0, r1, n, indptr, cols.astype(np.int64, copy=False))


def keys_overflow(r0: int, r1: int, n: int) -> bool:
    """True when a (block row, column) key ``local * n + column`` of rows [r0, r1) would overflow int64."""
    return (r1 - r0) >= np.iinfo(np.int64).max // max(n, 1)


def pattern_from_keys(keys: np.ndarray, r0: int, r1: int, n: int) -> RowBlock:
    """`pattern_block` of entries given as int64 keys ``local row * n + column`` (no self-loops): sorted in place
    (``keys`` is consumed), duplicates dropped in place, the columns returned in the narrowest type
    (`gridgnn.data.prepared.index_dtype`). Peak: the keys (8 bytes per entry), then 8 + 4 while narrowing."""
    from gridgnn.data.prepared import index_dtype

    keys.sort()
    keys = _drop_repeats(keys)
    indptr = np.searchsorted(keys, np.arange(r1 - r0 + 1, dtype=np.int64) * n).astype(np.int64)
    np.remainder(keys, n, out=keys)
    return RowBlock(r0, r1, n, indptr, keys.astype(index_dtype(n)))


def _drop_repeats(keys: np.ndarray) -> np.ndarray:
    """The distinct values of sorted ``keys``, compacted in place a chunk at a time (no second full array)."""
    write, previous = 0, None
    for lo in range(0, keys.size, CHUNK_ENTRIES):
        chunk = keys[lo:lo + CHUNK_ENTRIES]
        first = np.empty(chunk.size, dtype=bool)
        first[0] = previous is None or chunk[0] != previous
        np.not_equal(chunk[1:], chunk[:-1], out=first[1:])
        previous = chunk[-1]
        kept = chunk[first]  # a copy: the writes below may cover this chunk
        keys[write:write + kept.size] = kept
        write += kept.size
    keys.resize(write, refcheck=False)
    return keys


CHUNK_ENTRIES = 1 << 18
"""Entries whose temporaries (positions, float64 values) a process computes at a time."""


def _row_chunks(indptr: np.ndarray):
    """Row ranges [a, b) of about `CHUNK_ENTRIES` entries each, covering every row."""
    rows = len(indptr) - 1
    a = 0
    while a < rows:
        b = int(np.searchsorted(indptr, indptr[a] + CHUNK_ENTRIES, side="right")) - 1
        b = min(rows, max(b, a + 1))
        yield a, b
        a = b


def diagonal_places(block: RowBlock, a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
    """Where the entries of block rows [a, b) of a loop-free pattern block of A go in A + I (each row gains its
    diagonal at its sorted place): (the place of each stored entry [indptr[a], indptr[b]), the place of each
    row's diagonal), both global places in A + I's arrays of the block."""
    lo, hi = int(block.indptr[a]), int(block.indptr[b])
    local = np.repeat(np.arange(a, b, dtype=np.int64), np.diff(block.indptr[a:b + 1]))
    above = np.asarray(block.indices[lo:hi], dtype=np.int64) > local + block.r0  # after the diagonal: one further
    below = np.bincount(local[~above] - a, minlength=b - a)
    rows = np.arange(a, b, dtype=np.int64)
    return np.arange(lo, hi, dtype=np.int64) + local + above, block.indptr[a:b] + rows + below


def with_diagonal(block: RowBlock) -> RowBlock:
    """The pattern of A + I from a loop-free pattern block of A (`diagonal_places`). Computed `CHUNK_ENTRIES`
    at a time."""
    rows = block.r1 - block.r0
    indptr = block.indptr + np.arange(rows + 1, dtype=np.int64)
    from gridgnn.data.prepared import index_dtype

    out = np.empty(block.indices.size + rows, dtype=index_dtype(block.n))  # the diagonal's ids fit it too
    for a, b in _row_chunks(block.indptr):
        entries, loops = diagonal_places(block, a, b)
        out[entries] = block.indices[int(block.indptr[a]):int(block.indptr[b])]
        out[loops] = np.arange(a, b, dtype=np.int64) + block.r0
    return RowBlock(block.r0, block.r1, block.n, indptr, out)


def operator_values(operator: str, block: RowBlock) -> RowBlock:
    """Collective on the world (``gcn`` gathers every row's degree): the block of ``operator``'s matrix
    (`gridgnn.data.operators`) from this process's loop-free pattern block of A (every process passes its own
    block, the blocks in rank order covering all rows). Consumes ``block.indices`` where the operator adds the
    diagonal (a new array replaces them)."""
    if operator == "sum":
        return RowBlock(block.r0, block.r1, block.n, block.indptr, block.indices,
                        np.ones(block.indices.size, dtype=np.float32))
    if operator == "mean":  # D_in⁻¹ A: as `mean_operator`
        counts = block.counts
        return RowBlock(block.r0, block.r1, block.n, block.indptr, block.indices,
                        np.repeat((1.0 / np.maximum(counts, 1)).astype(np.float32), counts))
    full = with_diagonal(block)
    block.indices = None  # A's columns are in ``full``'s
    if operator == "gat":
        return RowBlock(full.r0, full.r1, full.n, full.indptr, full.indices,
                        np.ones(full.indices.size, dtype=np.float32))
    if operator != "gcn":
        raise ValueError(f"unknown operator {operator!r}")
    # every vertex's degree in A + I (4 bytes per vertex): cheaper than asking owners for ~n distinct columns
    degrees = all_gather_rows(full.counts.astype(np.int32 if full.counts.max(initial=0) < 2**31 else np.int64))
    inv_sqrt = 1.0 / np.sqrt(full.counts.astype(np.float64))
    data = np.empty(full.indices.size, dtype=np.float32)
    for a, b in _row_chunks(full.indptr):  # as `gcn_normalize`: (1.0 * d_i^-1/2) * d_j^-1/2 in float64
        lo, hi = int(full.indptr[a]), int(full.indptr[b])
        local = np.repeat(np.arange(a, b, dtype=np.int64), np.diff(full.indptr[a:b + 1]))
        column_inv_sqrt = 1.0 / np.sqrt(degrees[full.indices[lo:hi]].astype(np.float64))
        data[lo:hi] = np.ones(hi - lo, dtype=np.float64) * inv_sqrt[local] * column_inv_sqrt
    return RowBlock(full.r0, full.r1, full.n, full.indptr, full.indices, data)
