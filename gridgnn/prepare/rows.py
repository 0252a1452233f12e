"""One process's row block of the operator, built from the entries routed to it. Not collective except
`operator_values` (which asks the owners of the columns for their degrees).

Entries are (row, column) pairs of global ids with rows in [r0, r1). As the one-process preprocessing does
(`gridgnn.data.registry.preprocess`, `gridgnn.data.operators`): duplicates collapse to one 0/1 entry,
self-loops are dropped, and the operator's values are computed with the same arithmetic, so that the arrays
are equal to the bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gridgnn.prepare.exchange import ask_owners


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


def with_diagonal(block: RowBlock) -> RowBlock:
    """The pattern of A + I from a loop-free pattern block of A (each row gains its diagonal, sorted in)."""
    rows = block.local_rows()
    diagonal = np.arange(block.r1 - block.r0, dtype=np.int64)
    all_rows = np.concatenate([rows, diagonal])
    all_cols = np.concatenate([block.indices, diagonal + block.r0])
    order = np.lexsort((all_cols, all_rows))
    indptr = block.indptr + np.arange(block.r1 - block.r0 + 1, dtype=np.int64)
    return RowBlock(block.r0, block.r1, block.n, indptr, all_cols[order])


def operator_values(operator: str, block: RowBlock, owner_of) -> RowBlock:
    """Collective on the world (``gcn`` only asks the columns' owners for their degrees): the block of
    ``operator``'s matrix (`gridgnn.data.operators`) from this process's loop-free pattern block of A.
    ``owner_of(ids)``: the process owning each vertex id's row."""
    if operator == "sum":
        return RowBlock(block.r0, block.r1, block.n, block.indptr, block.indices,
                        np.ones(block.indices.size, dtype=np.float32))
    if operator == "mean":  # D_in⁻¹ A: as `mean_operator`
        counts = block.counts
        return RowBlock(block.r0, block.r1, block.n, block.indptr, block.indices,
                        np.repeat((1.0 / np.maximum(counts, 1)).astype(np.float32), counts))
    full = with_diagonal(block)
    if operator == "gat":
        return RowBlock(full.r0, full.r1, full.n, full.indptr, full.indices,
                        np.ones(full.indices.size, dtype=np.float32))
    if operator != "gcn":
        raise ValueError(f"unknown operator {operator!r}")
    inv_sqrt = 1.0 / np.sqrt(full.counts.astype(np.float64))  # D of A + I: every degree is at least 1
    columns, where = np.unique(full.indices, return_inverse=True)
    column_inv_sqrt = ask_owners(columns, owner_of(columns), lambda asked: inv_sqrt[asked - block.r0])
    data = np.ones(full.indices.size, dtype=np.float64) * inv_sqrt[full.local_rows()] * column_inv_sqrt[where]
    return RowBlock(full.r0, full.r1, full.n, full.indptr, full.indices, data.astype(np.float32))
