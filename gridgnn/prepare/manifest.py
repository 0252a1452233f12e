"""The manifest of a sharded folder, written last by rank 0 once every shard is on disk, and the graph's
content digest computed from the shards (the same SHA-256 `gridgnn.data.prepared.graph_digest` gives the
one-process folder of the same graph). Not collective."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from gridgnn.data.operators import SELF_LOOPS
from gridgnn.data.prepared import FORMAT, MANIFEST
from gridgnn.data.row_shards import shard_prefix
from gridgnn.prepare.job import PrepareJob
from gridgnn.safe_files import create_new

ROWS_AT_A_TIME = 1 << 15
"""Rows of a shard hashed at a time (the digest reads the shards in pieces, never whole)."""


def graph_digest_of_shards(folder: Path, shards: list[dict], num_features: int, operator: str, token: str) -> str:
    """`gridgnn.data.prepared.graph_digest` of the graph the shards hold: SHA-256 over A's CSR row pointers and
    column ids (A: the operator's pattern without the diagonal where the operator adds one), in scipy's index
    dtype (int32 while counts fit), then the labels, then the features' shape."""
    n = shards[-1]["rows"][1]
    edges = sum(s["edges"] for s in shards)
    dtype = np.int32 if max(n, edges) <= np.iinfo(np.int32).max else np.int64
    diagonal = SELF_LOOPS[operator]
    digest = hashlib.sha256()
    offset = 0
    digest.update(np.zeros(1, dtype=dtype).tobytes())
    for k, shard in enumerate(shards):  # A's row pointers, global
        for _, counts, _ in _pieces(folder / shard_prefix(k, token), shard, diagonal, with_columns=False):
            pointers = offset + np.cumsum(counts, dtype=np.int64)
            digest.update(pointers.astype(dtype).tobytes())
            offset = int(pointers[-1]) if pointers.size else offset
    for k, shard in enumerate(shards):  # A's column ids
        for _, _, columns in _pieces(folder / shard_prefix(k, token), shard, diagonal, with_columns=True):
            digest.update(columns.astype(dtype).tobytes())
    for k in range(len(shards)):
        digest.update(np.ascontiguousarray(np.load(f"{folder / shard_prefix(k, token)}labels.npy",
                                                   mmap_mode="r", allow_pickle=False)).tobytes())
    digest.update(repr((n, num_features)).encode())
    return digest.hexdigest()


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


def write_manifest(job: PrepareJob, parts: list, num_features: int, num_classes: int) -> dict:
    """Write ``prepared.json`` into ``job.folder`` (a new file; the last one written) from every process's
    `gridgnn.prepare.pipeline.PartResult`; returns it."""
    folder = Path(job.folder)
    shards = [shard for part in parts for shard in part.shards]
    files = {name: entry for part in parts for name, entry in part.files.items()}
    n = parts[0].num_nodes
    manifest = {"format": FORMAT, "name": job.name, "num_nodes": n,
                "num_edges": sum(s["edges"] for s in shards), "norm_nnz": sum(s["nnz"] for s in shards),
                "num_features": num_features, "num_classes": num_classes, "directed": job.directed,
                "digest": graph_digest_of_shards(folder, shards, num_features, job.operator, job.token),
                "sparse_features": False, "meta": job.meta, "operator": job.operator, "task": "multiclass",
                "num_edge_features": 0,
                "shard_token": job.token, "shards": [{"rows": s["rows"], "nnz": s["nnz"]} for s in shards],
                "has_vertex_ids": job.kind == "edge-list",
                "files": dict(sorted(files.items()))}
    with os.fdopen(create_new(folder / MANIFEST), "w", encoding="utf-8") as stream:
        stream.write(json.dumps(manifest, indent=1) + "\n")
    return manifest
