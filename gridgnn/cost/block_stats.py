"""Statistics of Â computed one block of rows at a time, for graphs whose operator stays on disk, optionally by a
pool of processes.

Every exact statistic the cost model needs is a sum or a stack over row blocks (`gridgnn.cost.graph_stats`
asks for them): a block's entries per column group (the dense algorithms' panels), its distinct columns per
segment (the rows sparse communication moves), the minimum vertex cover of its cut with every other block
(``--comm cover``). Here each is computed from one block's rows, read in chunks of `CHUNK_ENTRIES`: a prepared
folder's memory-mapped (or sharded) operator is never copied whole, and no structure of all of Â (such as its
column-major copy, 8 bytes per entry) is built.

`BlockReader` runs one of them over the blocks of a partition: in this process, or, for a large prepared
folder, on a pool of ``workers`` processes that each open the folder's arrays themselves (``opener``: a
picklable callable returning them; `gridgnn.data.prepared.operator_structure`) and read only the blocks they
are given, so the blocks of a sharded folder are read in parallel and never by one process at once. The
numbers are the same either way (tested). Not collective.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager

import numpy as np
import scipy.sparse as sp

from gridgnn.cost.column_order import ColumnOrder
from gridgnn.sparse.cover import block_row_covers
from gridgnn.sparse.cut import CHUNK_ENTRIES, block_columns, checked_column_ids

POOL_ENTRIES = 1 << 25
"""Entries of Â from which a prepared folder's statistics are computed by a pool of processes (below, the
pool's start-up, about half a second, costs more than it saves)."""

_POOL = {"processes": 1}
"""How many processes a large prepared folder's statistics may use (`enable_pool`; 1: none)."""


def enable_pool(processes: int) -> None:
    """Let large prepared folders' statistics run on ``processes`` processes. The command line enables it
    (`gridgnn.cli.main.run`); a Python program using the library does not get it unless it asks, because
    spawned processes re-import the program's main script (which must then guard its work with
    ``if __name__ == "__main__":``)."""
    _POOL["processes"] = max(1, int(processes))


def pool_processes(entries: int) -> int:
    """The processes for a folder of ``entries`` stored entries: `enable_pool`'s from `POOL_ENTRIES` on, else 1."""
    return _POOL["processes"] if entries >= POOL_ENTRIES else 1


def touched_in_block(indptr, indices, rows: tuple[int, int], segments: Sequence[int], n_cols: int) -> np.ndarray:
    """(S,) int64: the distinct columns of the rows [a, b) inside each segment ``segments[s]:segments[s + 1]``."""
    columns = block_columns(indptr, indices, rows, n_cols)
    return np.diff(np.searchsorted(columns, np.asarray(segments, dtype=np.int64))).astype(np.int64)


def groups_in_block(indptr, indices, rows: tuple[int, int], col_bounds: Sequence[int], group: np.ndarray,
                    num_groups: int, label: str, columns: ColumnOrder | None = None) -> np.ndarray:
    """(num_groups,) int64: the entries of the rows [a, b) per column group (column block c is in group
    ``group[c]``), their column ids first mapped through ``columns`` (Â's second column order of ``--reorder
    double-random``) when given; `gridgnn.errors.DataError` for a column id outside the matrix."""
    bounds = np.asarray(col_bounds, dtype=np.int64)
    counts = np.zeros(num_groups, dtype=np.int64)
    lo, hi = int(indptr[rows[0]]), int(indptr[rows[1]])
    for s in range(lo, hi, CHUNK_ENTRIES):  # bounded temporaries, whatever the graph's size
        cols = checked_column_ids(indices, s, min(s + CHUNK_ENTRIES, hi), int(bounds[-1]), rows, label)
        if columns is not None:
            cols = columns.looked_up(cols)
        counts += np.bincount(group[np.searchsorted(bounds, cols, side="right") - 1], minlength=num_groups)
    return counts


def covers_in_block(indptr, indices, rows: tuple[int, int], bounds: Sequence[int], n_cols: int) -> np.ndarray:
    """(2, R) int64: for the cut between the rows [a, b) (a block of ``bounds``) and each block of ``bounds``, its
    minimum vertex cover and the entries whose partial sums its sender computes (0 for its own block),
    `gridgnn.sparse.cover.block_row_covers`."""
    a, b = rows
    lo, hi = int(indptr[a]), int(indptr[b])
    pointers = np.asarray(indptr[a:b + 1], dtype=np.int64) - lo
    cols = checked_column_ids(indices, lo, hi, n_cols, rows, "column ids")
    block_row = sp.csr_matrix((np.ones(hi - lo, dtype=np.int8), cols, pointers), shape=(b - a, n_cols))
    own = int(np.searchsorted(np.asarray(bounds), a, side="right")) - 1
    return np.stack(block_row_covers(block_row, list(bounds), own)[1:])


FUNCTIONS: dict[str, Callable] = {"touched": touched_in_block, "groups": groups_in_block,
                                  "covers": covers_in_block}
"""The per-block statistics a `BlockReader` runs, by name (a pool's tasks name them)."""

_OPENED: dict = {}
"""In a pool's worker: the arrays its ``opener`` returned (indptr, indices)."""


def _open(opener: Callable, parent: int) -> None:
    """A pool worker's start: watch the process that started it (``parent``: a worker whose parent is gone exits
    within half a second, so a launcher that ends at once, `gridgnn.cli.main.exit_now`, leaves no process
    behind; compared with the pid it was given, not with its own parent read now, which may already be
    another), then open the arrays."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()
    _OPENED["arrays"] = opener()


def _run(task: tuple) -> np.ndarray:
    name, rows, args = task
    indptr, indices = _OPENED["arrays"]
    return FUNCTIONS[name](indptr, indices, rows, *args)


BlockSplitter = Callable[[Callable[[int], np.ndarray], int], list[np.ndarray]]
"""``splitter(compute, count)``: ``[compute(k) for k in range(count)]``, computed by several processes at once."""

_SPLITTER: list[BlockSplitter | None] = [None]


@contextmanager
def blocks_split_by(splitter: BlockSplitter) -> Iterator[None]:
    """Inside the block, every `BlockReader.map` hands its blocks to ``splitter`` (the torchrun workers of one
    run share them out: `gridgnn.train.run.split_stats.split_over_world`), instead of computing them all here or
    on its pool. Every process that enters must then make the same statistics calls in the same order."""
    previous, _SPLITTER[0] = _SPLITTER[0], splitter
    try:
        yield
    finally:
        _SPLITTER[0] = previous


class BlockReader:
    """Runs a per-block statistic (`FUNCTIONS`) over the blocks of a partition of ``indptr``/``indices`` (a CSR
    structure, any integer dtype, memory-mapped or sharded allowed): in this process, or on ``workers``
    processes (spawned on the first call, about half a second, each calling ``opener`` for its own view of the
    same arrays; stopped by `close`, when the reader is collected, or when this process ends)."""

    def __init__(self, indptr, indices, opener: Callable | None = None, workers: int = 1):
        self.indptr, self.indices, self.opener, self.workers = indptr, indices, opener, int(workers)
        self.pooled_calls = 0  # calls run on the pool (for tests and reports)
        self._pool: ProcessPoolExecutor | None = None

    @property
    def parallel(self) -> bool:
        return self.opener is not None and self.workers > 1

    def map(self, name: str, bounds: Sequence[int], *args) -> list[np.ndarray]:
        """``FUNCTIONS[name](indptr, indices, (a, b), *args)`` for every block [a, b) of ``bounds``, in order: here,
        on the pool, or shared out by the splitter in force (`blocks_split_by`)."""
        blocks = [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        splitter = _SPLITTER[0]
        if splitter is not None and len(blocks) >= 2:
            return splitter(lambda k: FUNCTIONS[name](self.indptr, self.indices, blocks[k], *args), len(blocks))
        if not self.parallel or len(blocks) < 2:
            return [FUNCTIONS[name](self.indptr, self.indices, rows, *args) for rows in blocks]
        if self._pool is None:
            self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=_open, initargs=(self.opener, os.getpid()))
            weakref.finalize(self, self._pool.shutdown, wait=False, cancel_futures=True)
        self.pooled_calls += 1
        return list(self._pool.map(_run, [(name, rows, args) for rows in blocks]))

    def close(self) -> None:
        """Stop the pool's processes (if any) and wait for them."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
