"""The manifest of a sharded folder, written last by rank 0 once every shard is on disk, and the graph's
content digest computed from the shards (the same SHA-256 `gridgnn.data.prepared.graph_digest` gives the
one-process folder of the same graph). Not collective."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from gridgnn.data.bijection import random_bijection
from gridgnn.data.operators import SELF_LOOPS
from gridgnn.data.prepared import FORMAT, MANIFEST
from gridgnn.data.reorder import block_imbalance, row_imbalance
from gridgnn.data.row_shards import ShardedArray, shard_prefix, sharded_indptr
from gridgnn.partition import block_bounds
from gridgnn.prepare.job import PrepareJob
from gridgnn.safe_files import create_new

ROWS_AT_A_TIME = 1 << 15
"""Rows of a shard hashed at a time (the digest reads the shards in pieces, never whole)."""


def _graph_digest(n: int, edges: int, num_features: int, row_counts: Iterable[np.ndarray],
                  columns: Iterable[np.ndarray], labels: Iterable[np.ndarray]) -> str:
    """`gridgnn.data.prepared.graph_digest`'s SHA-256 from pieces, in its order: A's CSR row pointers (from
    ``row_counts``, each piece the entries of consecutive rows), A's column ids (``columns``, in row order),
    in scipy's index dtype (int32 while counts fit), then the labels, then the features' shape."""
    dtype = np.int32 if max(n, edges) <= np.iinfo(np.int32).max else np.int64
    digest = hashlib.sha256()
    digest.update(np.zeros(1, dtype=dtype).tobytes())
    offset = 0
    for counts in row_counts:
        pointers = offset + np.cumsum(counts, dtype=np.int64)
        digest.update(pointers.astype(dtype).tobytes())
        offset = int(pointers[-1]) if pointers.size else offset
    for piece in columns:
        digest.update(piece.astype(dtype).tobytes())
    for piece in labels:
        digest.update(np.ascontiguousarray(piece).tobytes())
    digest.update(repr((n, num_features)).encode())
    return digest.hexdigest()


def graph_digest_of_shards(folder: Path, shards: list[dict], num_features: int, operator: str, token: str) -> str:
    """`gridgnn.data.prepared.graph_digest` of the graph the shards hold (A: the operator's pattern without the
    diagonal where the operator adds one), read shard by shard in pieces (`_graph_digest`)."""
    diagonal = SELF_LOOPS[operator]
    prefixes = [folder / shard_prefix(k, token) for k in range(len(shards))]
    return _graph_digest(
        shards[-1]["rows"][1], sum(s["edges"] for s in shards), num_features,
        (counts for prefix, shard in zip(prefixes, shards, strict=True)
         for _, counts, _ in _pieces(prefix, shard, diagonal, with_columns=False)),
        (columns for prefix, shard in zip(prefixes, shards, strict=True)
         for _, _, columns in _pieces(prefix, shard, diagonal, with_columns=True)),
        (np.load(f"{prefix}labels.npy", mmap_mode="r", allow_pickle=False) for prefix in prefixes))


def _pieces(prefix: Path, shard: dict, diagonal: bool, with_columns: bool):
    """(first row, A's entries per row, A's column ids or None) of the shard whose files start with
    ``prefix``, `ROWS_AT_A_TIME` rows at a time."""
    indptr = np.load(f"{prefix}adj_indptr.npy", mmap_mode="r", allow_pickle=False)
    indices = np.load(f"{prefix}adj_indices.npy", mmap_mode="r", allow_pickle=False)
    r0, r1 = shard["rows"]
    for a in range(0, r1 - r0, ROWS_AT_A_TIME):
        b = min(a + ROWS_AT_A_TIME, r1 - r0)
        pointers = np.asarray(indptr[a:b + 1], dtype=np.int64)
        counts = np.diff(pointers) - (1 if diagonal else 0)
        columns = None
        if with_columns:
            columns = np.asarray(indices[pointers[0]:pointers[-1]], dtype=np.int64)
            if diagonal:
                rows = np.repeat(np.arange(r0 + a, r0 + b, dtype=np.int64), np.diff(pointers))
                columns = columns[columns != rows]
        yield r0 + a, counts, columns


def _sharded(folder: Path, shards: list[dict], token: str, name: str):
    """The K files of array ``name`` memory-mapped as one `gridgnn.data.row_shards.ShardedArray` (row
    pointers made global)."""
    pieces = [np.load(f"{folder / shard_prefix(k, token)}{name}.npy", mmap_mode="r", allow_pickle=False)
              for k in range(len(shards))]
    return sharded_indptr(pieces) if name == "adj_indptr" else ShardedArray(pieces)


def original_order_digest(folder: Path, shards: list[dict], num_features: int, job: PrepareJob) -> tuple[str, dict]:
    """For a ``--reorder random`` folder: `gridgnn.data.prepared.graph_digest` of the graph in its original order
    (the ``content_digest`` a checkpoint is fingerprinted by, `gridgnn.data.reorder`), read from the shards
    vertex by vertex in the old order (old vertex v is new row ``random_bijection(v)``, a new column c the old
    vertex ``reorder_order[c]``), `ROWS_AT_A_TIME` old rows at a time; and the statistics of the old order over
    ``job.reorder_parts`` balanced row blocks (``nnz_imbalance_before``, ``cut_fraction_before``)."""
    n = shards[-1]["rows"][1]
    edges = sum(s["edges"] for s in shards)
    diagonal = 1 if SELF_LOOPS[job.operator] else 0
    indptr, indices = _sharded(folder, shards, job.token, "adj_indptr"), _sharded(folder, shards, job.token,
                                                                                   "adj_indices")
    order, labels = (_sharded(folder, shards, job.token, name) for name in ("reorder_order", "labels"))
    bounds = np.asarray(block_bounds(n, job.reorder_parts), dtype=np.int64)
    per_block, inside = np.zeros(job.reorder_parts, dtype=np.int64), [0]
    chunks = [(a, min(a + ROWS_AT_A_TIME, n)) for a in range(0, n, ROWS_AT_A_TIME)]

    def new_rows(a: int, b: int) -> np.ndarray:
        return random_bijection(np.arange(a, b, dtype=np.int64), n, job.reorder_seed)

    def row_counts():  # each old row's entries of A, and the old order's entries per row block
        for a, b in chunks:
            new = new_rows(a, b)
            counts = indptr[new + 1] - indptr[new] - diagonal
            np.add.at(per_block, np.searchsorted(bounds, np.arange(a, b), side="right") - 1, counts)
            yield counts

    def columns():  # each old row's columns as old ids, ascending, and those inside the row's block
        for a, b in chunks:
            new = new_rows(a, b)
            starts, lengths = indptr[new], indptr[new + 1] - indptr[new]
            local = np.repeat(np.arange(b - a, dtype=np.int64), lengths)
            positions = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths) + np.arange(
                int(lengths.sum()), dtype=np.int64)
            cols = indices[positions].astype(np.int64)
            if diagonal:
                keep = cols != new[local]
                local, cols = local[keep], cols[keep]
            cols = order[cols]
            ordered = np.lexsort((cols, local))
            local, cols = local[ordered], cols[ordered]
            row_block = np.searchsorted(bounds, a + local, side="right") - 1
            inside[0] += int(np.count_nonzero((cols >= bounds[row_block]) & (cols < bounds[row_block + 1])))
            yield cols

    content = _graph_digest(n, edges, num_features, row_counts(), columns(),
                            (labels[new_rows(a, b)] for a, b in chunks))
    return content, {"nnz_imbalance_before": block_imbalance(per_block),
                     "cut_fraction_before": 1.0 - inside[0] / edges if edges else 0.0}


def reorder_meta(job: PrepareJob, parts: list, folder: Path, shards: list[dict], num_features: int) -> dict:
    """The meta keys `gridgnn.data.reorder.reorder_graph` gives a reordered graph, for a ``--reorder random`` or
    ``double-random`` folder (its ``column_seed`` too): the method, parts and nest, the slowest process's seconds
    moving node rows and the largest peak memory, the old order's content digest and statistics
    (`original_order_digest`) and the new order's (from every process's counts of its rows)."""

    content, before = original_order_digest(folder, shards, num_features, job)
    after = sum(part.blocks_after for part in parts)
    edges = int(after[:, 0].sum())
    n = shards[-1]["rows"][1]
    return {"reorder": job.reorder, "reorder_parts": job.reorder_parts, "reorder_nest": 1,
            "reorder_seconds": max(part.seconds.get("reorder", 0.0) for part in parts),
            "reorder_peak_rss_bytes": max(part.peak_rss_bytes for part in parts),
            "nnz_imbalance_before": before["nnz_imbalance_before"], "nnz_imbalance_after": block_imbalance(after[:, 0]),
            "row_imbalance_after": row_imbalance(n, job.reorder_parts),
            "cut_fraction_before": before["cut_fraction_before"],
            "cut_fraction_after": 1.0 - int(after[:, 1].sum()) / edges if edges else 0.0,
            "content_digest": content,
            **({"column_seed": job.reorder_seed} if job.reorder == "double-random" else {})}


def write_manifest(job: PrepareJob, parts: list, num_features: int, num_classes: int,
                   task: str = "multiclass") -> dict:
    """Write ``prepared.json`` into ``job.folder`` (a new file; the last one written) from every process's
    `gridgnn.prepare.pipeline.PartResult`; returns it."""
    folder = Path(job.folder)
    shards = [shard for part in parts for shard in part.shards]
    files = {name: entry for part in parts for name, entry in part.files.items()}
    n = parts[0].num_nodes
    meta = dict(job.meta)
    if job.reorder != "none":
        meta |= reorder_meta(job, parts, folder, shards, num_features)
    manifest = {"format": FORMAT, "name": job.name, "num_nodes": n,
                "num_edges": sum(s["edges"] for s in shards), "norm_nnz": sum(s["nnz"] for s in shards),
                "num_features": num_features, "num_classes": num_classes, "directed": job.directed,
                "digest": graph_digest_of_shards(folder, shards, num_features, job.operator, job.token),
                "sparse_features": False, "meta": meta, "operator": job.operator, "task": task,
                "num_edge_features": max(part.num_edge_features for part in parts),
                "shard_token": job.token, "shards": [{"rows": s["rows"], "nnz": s["nnz"]} for s in shards],
                "has_vertex_ids": job.kind == "edge-list" or job.reorder != "none",
                "has_reorder_order": job.reorder != "none",
                "files": dict(sorted(files.items()))}
    with os.fdopen(create_new(folder / MANIFEST), "w", encoding="utf-8") as stream:
        stream.write(json.dumps(manifest, indent=1) + "\n")
    return manifest
