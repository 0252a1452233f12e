"""Arrays cut into row shards, read as one: what a worker sees of a folder written by ``prepare --nprocs P``.

A sharded folder (`gridgnn.prepare`) stores each array as K files, one per shard of consecutive rows (its
row block of Â in CSR with local row pointers, its rows of the features, labels and masks).
`ShardedArray` presents the K memory-mapped pieces as one array of the global shape: a row slice
``a[r0:r1]`` (or ``a[r0:r1, c0:c1]``, or an integer index array) reads only the pieces it overlaps, so a rank
reads the rows and columns it needs from the shards that hold them, whatever the number of shards and the
training grid. Each piece may carry an additive offset: the global CSR row pointers are each shard's local
pointers plus the entries of the shards before it (`sharded_indptr`). Whole-array use (``np.asarray(a)``)
still works, by concatenation, for the few readers that want everything (``gridgnn info``).
"""

from __future__ import annotations

import mmap

import numpy as np


class ShardedArray:
    """K arrays (``pieces``, equal trailing shapes and dtype) concatenated along axis 0, each plus its
    ``offsets[k]`` (0 where None), read lazily. 64-bit positions throughout."""

    def __init__(self, pieces: list[np.ndarray], offsets: list[int] | None = None):
        if not pieces:
            raise ValueError("ShardedArray needs at least one piece")
        self.pieces = list(pieces)
        self.offsets = [0] * len(pieces) if offsets is None else [int(o) for o in offsets]
        lengths = np.array([len(p) for p in self.pieces], dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        self.dtype = self.pieces[0].dtype
        self.shape = (int(self.starts[-1]),) + tuple(self.pieces[0].shape[1:])

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __len__(self) -> int:
        return self.shape[0]

    def _rows(self, r0: int, r1: int) -> np.ndarray:
        """Rows [r0, r1) as a new array (offsets applied)."""
        if r1 <= r0:
            return np.empty((0,) + self.shape[1:], dtype=self.dtype)
        first = int(np.searchsorted(self.starts, r0, side="right")) - 1
        parts = []
        k = first
        while k < len(self.pieces) and self.starts[k] < r1:
            lo, hi = max(r0, int(self.starts[k])) - int(self.starts[k]), min(r1, int(self.starts[k + 1])) - int(
                self.starts[k])
            if hi > lo:
                part = np.array(self.pieces[k][lo:hi])
                if self.offsets[k]:
                    part += self.offsets[k]
                parts.append(part)
            k += 1
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _take(self, index: np.ndarray) -> np.ndarray:
        """Rows at the integer positions ``index`` (any shape of ids, negative ones from the end)."""
        flat = np.asarray(index, dtype=np.int64).ravel()
        flat = np.where(flat < 0, flat + len(self), flat)
        if flat.size and (flat.min() < 0 or flat.max() >= len(self)):
            raise IndexError(f"index out of range for {len(self)} rows")
        out = np.empty((flat.size,) + self.shape[1:], dtype=self.dtype)
        piece = np.searchsorted(self.starts, flat, side="right") - 1
        for k in np.unique(piece):
            where = np.flatnonzero(piece == k)
            values = np.asarray(self.pieces[k])[flat[where] - self.starts[k]]  # reads those rows only
            out[where] = values + self.offsets[k] if self.offsets[k] else values
        return out.reshape(np.shape(index) + self.shape[1:])

    def __getitem__(self, key):
        rest = ()
        if isinstance(key, tuple):
            key, rest = key[0], key[1:]
        if isinstance(key, slice):
            start, stop, step = key.indices(len(self))
            rows = self._rows(start, max(start, stop)) if step == 1 else self._take(np.arange(start, stop, step))
        elif isinstance(key, (int, np.integer)):
            position = int(key) + (len(self) if key < 0 else 0)
            if not 0 <= position < len(self):
                raise IndexError(f"index {int(key)} out of range for {len(self)} rows")
            rows = self._rows(position, position + 1)[0]
            return rows[rest] if rest else (rows.item() if self.ndim == 1 else rows)
        else:
            array = np.asarray(key)
            if array.dtype == np.bool_:
                array = np.flatnonzero(array)
            rows = self._take(array)
        return rows[(slice(None),) + rest] if rest else rows

    def __array__(self, dtype=None, copy=None):
        whole = self._rows(0, len(self))
        return whole if dtype is None else whole.astype(dtype, copy=False)

    def sum(self, *args, **kwargs):
        """The sum over every row (read piece by piece for the common whole-array case)."""
        if args or kwargs:
            return np.asarray(self).sum(*args, **kwargs)
        return sum((np.asarray(p).sum(dtype=np.int64 if p.dtype.kind in "biu" else None)
                    + (self.offsets[k] * len(p) if self.offsets[k] else 0)) for k, p in enumerate(self.pieces))

    def min(self):
        return min(np.asarray(p).min() + self.offsets[k] for k, p in enumerate(self.pieces) if len(p))

    def max(self):
        return max(np.asarray(p).max() + self.offsets[k] for k, p in enumerate(self.pieces) if len(p))

    def release_pages(self) -> None:
        """``madvise(MADV_DONTNEED)`` on every piece's mapping (see `PreparedGraph.release_pages`)."""
        for piece in self.pieces:
            drop_pages(piece)


def drop_pages(array) -> None:
    """Drop this process's resident pages of a memory-mapped ``array`` (an ``np.memmap``, or a `ShardedArray`
    piece by piece) with ``madvise(MADV_DONTNEED)``; the pages stay in the page cache. A no-op for other
    arrays and where ``madvise`` is unavailable."""
    if isinstance(array, ShardedArray):
        array.release_pages()
        return
    mapping = getattr(array, "_mmap", None)  # the mmap.mmap behind an np.memmap
    if mapping is not None and hasattr(mapping, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
        mapping.madvise(mmap.MADV_DONTNEED)


def sharded_indptr(local_indptrs: list[np.ndarray]) -> ShardedArray:
    """The global CSR row pointers (n + 1,) of K shards' local ones (each (rows_k + 1,), starting at 0): shard
    k's pointers but the last, plus the entries of shards 0..k-1, then the total."""
    counts = [int(p[-1]) for p in local_indptrs]
    offsets = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
    pieces = [p[:-1] for p in local_indptrs] + [np.array([offsets[-1]], dtype=np.int64)]
    return ShardedArray(pieces, [int(o) for o in offsets[:-1]] + [0])


SHARD_PREFIX = "shard-{k:05d}-{token}."
"""The file name prefix of shard k's arrays (``shard-00003-5f0c1a2b9d4e.adj_indices.npy``): ``token`` names the
preparation (`gridgnn.prepare.job.PrepareJob.token`, in the manifest as ``shard_token``), so that a shard of
another preparation put into the folder is a missing shard, not a silently different graph."""


def shard_prefix(k: int, token: str) -> str:
    """The file name prefix of shard ``k`` of the preparation ``token``."""
    return SHARD_PREFIX.format(k=k, token=token)

_POINTERS = ("adj_indptr", "features_indptr")
_ENTRIES = {"adj_indices": "nnz", "adj_data": "nnz", "edge_attr": "nnz",
            "features_indices": "feature_nnz", "features_data": "feature_nnz"}
"""Arrays with one row per stored entry, and the shard field that counts them."""


def shard_rows(manifest: dict, where: str) -> list[dict]:
    """The manifest's ``shards`` (each ``{"rows": [r0, r1], "nnz": k, ...}``) when they cover the vertices
    0..n-1 in order with counts that sum to the manifest's, else `DataError` (one line)."""
    from gridgnn.errors import DataError

    shards, n = manifest.get("shards"), manifest.get("num_nodes")
    if not isinstance(shards, list) or not shards:
        raise DataError(f"{where}: 'shards' in the manifest must be a non-empty list")
    expected = 0
    for k, shard in enumerate(shards):
        rows = shard.get("rows") if isinstance(shard, dict) else None
        nnz = shard.get("nnz") if isinstance(shard, dict) else None
        if (not isinstance(rows, list) or len(rows) != 2 or not all(isinstance(r, int) and not isinstance(r, bool)
                                                                    for r in rows)
                or rows[0] != expected or rows[1] < rows[0] or not isinstance(nnz, int) or nnz < 0):
            raise DataError(f"{where}: shard {k} in the manifest is malformed or its rows do not follow shard "
                            f"{k - 1}'s (expected rows from {expected})")
        expected = rows[1]
    if expected != n:
        raise DataError(f"{where}: the shards cover rows 0..{expected - 1}, not the {n} vertices")
    if sum(s["nnz"] for s in shards) != manifest.get("norm_nnz"):
        raise DataError(f"{where}: the shards' entries do not sum to the manifest's norm_nnz")
    return shards


def shard_loader(root, manifest: dict, load, where: str):
    """``load(name, dtype, shape)`` for a sharded folder: the K files ``shard-0000k.NAME.npy`` of each array
    (each loaded and checked by the folder's own ``load``) as one `ShardedArray` of the global shape."""
    from gridgnn.errors import DataError

    shards = shard_rows(manifest, where)
    token = manifest.get("shard_token")
    if not isinstance(token, str) or not token.isalnum():
        raise DataError(f"{where}: the manifest's shard_token must be a short alphanumeric name, got {token!r}")

    def sharded(name: str, dtype, shape: tuple | None = None) -> ShardedArray:
        pieces = []
        for k, shard in enumerate(shards):
            r0, r1 = shard["rows"]
            if name in _POINTERS:
                piece_shape = (r1 - r0 + 1,)
            elif name in _ENTRIES:
                count = shard.get(_ENTRIES[name])
                piece_shape = None if count is None or shape is None else (count,) + tuple(shape[1:])
            else:
                piece_shape = None if shape is None else (r1 - r0,) + tuple(shape[1:])
            piece = load(shard_prefix(k, token) + name, dtype, piece_shape)
            if name in _POINTERS and piece[0] != 0:
                raise DataError(f"{where}: shard {k}'s {name} does not start at 0")
            pieces.append(piece)
        array = sharded_indptr(pieces) if name in _POINTERS else ShardedArray(pieces)
        if shape is not None and array.shape != tuple(shape):
            raise DataError(f"{where}: the shards of {name} make {array.shape}, expected {tuple(shape)}")
        return array

    return sharded
