"""Edge features in a distributed preparation (``prepare EDGES --nprocs P --edge-features F.npy``).

Row e of ``F.npy`` belongs to the e-th edge of the edge list (its e-th data line, or row of a ``.npy`` edge
array), as `gridgnn.data.attach` reads it in one process. Here each process reads the rows of its own edges
(`read_part_rows`: its first edge's number is the count of every earlier process's edges), and the rows travel
with their entries to the owner of each entry's row, with the edge's number and whether the entry is the edge
itself or the reverse entry symmetrization adds. The owner then gives every distinct entry of A what one
process gives it (`gridgnn.data.edge_features`):

- an entry that is an edge of the list (once or more): the **mean** of those edges' rows;
- an entry only the symmetrization adds (its reverse is an edge): the mean of the reverse edges' rows, the
  **copy** one process makes of that edge's collapsed row;

each mean summed in float64 in the order of the edge numbers, as one process sums them, so the rows are equal
to the bit. A self-loop's row leaves with the self-loop (dropped by the sender). For an operator with
self-loops (GCN's and GAT's A + I), each loop takes the mean of its vertex's entries (`operator_rows`), as
`gridgnn.data.edge_features.operator_rows` does.

Collective on the world: `read_part_rows`; the rest is local.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gridgnn.data.edge_features import check_edge_rows, group_mean
from gridgnn.errors import DataError
from gridgnn.prepare.exchange import agree, gather_all, world
from gridgnn.prepare.rows import RowBlock, diagonal_places


def read_part_rows(path: str, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Collective on the world: (the (count, d) float32 rows of this process's ``count`` edges, their edge
    numbers (count,) int64), from the memory-mapped ``.npy`` at ``path``; every process stops with the line one
    process prints when the file's row count is not the edge list's, or a row holds NaN or inf."""
    rank, _ = world()
    counts = gather_all(np.array([count], dtype=np.int64))[:, 0]
    first, edges = int(counts[:rank].sum()), int(counts.sum())
    where = f"{path} (one row per edge of the source, in its order)"
    array, problem = None, None
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except Exception as exc:  # noqa: BLE001 - a file one host lacks: every process must hear of it
        problem = f"{path}: {exc}"
    agree(problem)
    agree(None if array.shape[0] == edges else f"{where}: {array.shape[0]} edge-feature rows for {edges} edges")
    rows = None
    try:
        rows = check_edge_rows(array[first:first + count], count, where)
    except Exception as exc:  # noqa: BLE001 - as above
        problem = str(exc) or repr(exc)
    agree(problem)
    return rows, np.arange(first, first + count, dtype=np.int64)


def entry_rows_of(keys: np.ndarray, rows: np.ndarray, numbers: np.ndarray, reverse: np.ndarray) -> np.ndarray:
    """(distinct keys, d) float32: the row of every distinct entry of ``keys`` (the owner's int64 entry keys, in
    any order), in ascending key order (the pattern's CSR order), from the rows that travelled with them: the
    mean of the entries that are edges, else of the reverse entries (``reverse``), in edge-number order."""
    unique, inverse = np.unique(keys, return_inverse=True)
    has_edge = np.bincount(inverse[~reverse], minlength=unique.size) > 0
    chosen = ~reverse | ~has_edge[inverse]
    chosen = np.flatnonzero(chosen)
    if chosen.size == unique.size:  # one row per entry (no duplicate): the mean is the row, bit for bit
        out = np.empty((unique.size, rows.shape[1]), dtype=np.float32)
        out[inverse[chosen]] = rows[chosen]
        return out
    chosen = chosen[np.argsort(numbers[chosen], kind="stable")]  # summed in the order one process sums them
    return group_mean(rows[chosen], inverse[chosen], unique.size)


def operator_rows(operator: str, block: RowBlock, rows: np.ndarray) -> np.ndarray:
    """The rows of the operator's entries of ``block`` (the loop-free pattern of A, ``rows`` aligned with its
    entries): A's own for ``sum`` and ``mean``; with a self-loop at its sorted place in each row for ``gcn`` and
    ``gat`` (the mean of the row's entries, zeros for a row without any), at the places
    `gridgnn.prepare.rows.diagonal_places` gives the operator's entries."""
    if operator in ("sum", "mean"):
        return rows
    if operator not in ("gcn", "gat"):
        raise ValueError(f"unknown operator {operator!r}")
    num_rows = block.r1 - block.r0
    entries, loops = diagonal_places(block, 0, num_rows)
    out = np.empty((rows.shape[0] + num_rows, rows.shape[1]), dtype=np.float32)
    out[entries] = rows
    out[loops] = group_mean(rows, block.local_rows(), num_rows)  # each row's entries in CSR order, as one process
    return out


def check_file(given: str) -> tuple[str, int]:
    """Before any worker starts: the path of ``--edge-features`` (a ``.npy`` of (E, d) or (E,) numbers) and d;
    `DataError` (one line) otherwise. Not collective."""
    path = Path(given).expanduser()
    if not path.is_file():
        raise DataError(f"{path}: edge features file not found")
    if not path.name.lower().endswith(".npy"):
        raise DataError(f"{path}: edge features must be a .npy file of shape (E, d)")
    array = np.load(path, mmap_mode="r", allow_pickle=False)
    if array.ndim not in (1, 2) or array.dtype.kind not in "biuf":
        raise DataError(f"{path}: edge features must be (E, d) numbers, got {array.dtype} {array.shape}")
    return str(path), 1 if array.ndim == 1 else int(array.shape[1])
