"""A graph prepared once for a distributed run: Â and node data as ``.npy`` files that workers memory-map.

Loading a large graph in every worker multiplies its memory by the number of workers on the machine (each
also keeps a normalized copy of A). Instead, one process (the local launcher, or ``gridgnn prepare``)
loads, preprocesses and normalizes the graph once and writes a folder::

    prepared.json                         sizes, name, meta, content digest, feature layout, operator
    adj_indptr.npy adj_indices.npy adj_data.npy     the model's operator, CSR (int64 / int32 / float32):
                                           gcn Â = D^-1/2 (A + I) D^-1/2, mean D⁻¹A, or sum A
    features.npy                           dense (n, f) float32, or
    features_indptr.npy features_indices.npy features_data.npy    sparse CSR features
    labels.npy train_mask.npy val_mask.npy test_mask.npy

Workers open it with ``mmap_mode="r"``: the page cache holds one copy for all of them, and each worker reads
only the rows its algorithm keeps (`RowBlockCSR` cuts a row block without touching the other rows).
A folder holds one operator (``operator`` in the manifest; folders without it hold ``gcn``), the one of the
model it was prepared for (`gridgnn.data.operators`): no second global matrix is kept.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from gridgnn.data.edge_features import entry_rows, operator_rows
from gridgnn.data.file_digest import describe_files
from gridgnn.data.graph import Graph
from gridgnn.data.operators import OPERATORS, operator_matrix
from gridgnn.data.row_shards import ShardedArray, drop_pages, shard_loader
from gridgnn.data.schemas import check_prepared_manifest
from gridgnn.data.targets import TASKS, check_graph_targets, target_block
from gridgnn.errors import DataError
from gridgnn.partition import is_partition
from gridgnn.safe_files import create_new, regular_or_fail

MANIFEST = "prepared.json"
FORMAT = "gridgnn-prepared/1"
ARRAYS = ("adj_indptr", "adj_indices", "adj_data", "features", "features_indptr", "features_indices",
          "features_data", "labels", "train_mask", "val_mask", "test_mask", "vertex_ids", "reorder_order",
          "reorder_bounds")
"""Every array a folder may hold (``NAME.npy``)."""


def graph_digest(graph: Graph) -> str:
    """SHA-256 over the adjacency structure, the labels and the feature shape (identifies a dataset)."""
    digest = hashlib.sha256()
    adj = graph.adj.tocsr()
    for array in (adj.indptr, adj.indices, graph.labels):
        digest.update(np.ascontiguousarray(array).tobytes())
    digest.update(repr(tuple(graph.features.shape)).encode())
    return digest.hexdigest()


class RowBlockCSR:
    """A CSR matrix over (memory-mapped) arrays that hands out row blocks as scipy CSR copies.

    ``matrix[r0:r1]`` (and ``matrix[r0:r1, c0:c1]``) reads only the stored entries of rows [r0, r1); the
    arrays are never scanned whole. Checks the column ids of each block it cuts.
    """

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, shape: tuple[int, int],
                 source: str = "matrix"):
        self.indptr, self.indices, self.data = indptr, indices, data
        self.shape, self.source = (int(shape[0]), int(shape[1])), source
        self.dtype = data.dtype
        self.format = "csr"

    @property
    def nnz(self) -> int:
        return int(self.indptr[-1])

    def __getitem__(self, key) -> sp.csr_matrix:
        rows, cols = (key, None) if not isinstance(key, tuple) else key
        if not isinstance(rows, slice) or rows.step not in (None, 1):
            raise TypeError("RowBlockCSR supports contiguous row slices only")
        r0, r1, _ = rows.indices(self.shape[0])
        r1 = max(r0, r1)
        lo, hi = int(self.indptr[r0]), int(self.indptr[r1])
        indptr = np.asarray(self.indptr[r0:r1 + 1], dtype=np.int64) - lo
        if hi < lo or (indptr.size > 1 and np.any(np.diff(indptr) < 0)):
            raise DataError(f"{self.source}: row pointers decrease in rows {r0}..{r1 - 1}")
        indices = np.array(self.indices[lo:hi])
        if indices.size and (indices.min() < 0 or indices.max() >= self.shape[1]):
            raise DataError(f"{self.source}: column ids outside [0, {self.shape[1]}) in rows {r0}..{r1 - 1}")
        block = sp.csr_matrix((np.array(self.data[lo:hi]), indices, indptr), shape=(r1 - r0, self.shape[1]))
        return block if cols is None else block[:, cols]


@dataclass
class PreparedGraph:
    """A prepared graph opened for training: what `Graph` offers a distributed worker, memory-mapped.

    ``norm_adj`` is the operator ``operator`` already built (Â for GCN; no worker normalizes again);
    ``features`` is a read-only (n, f)
    float32 memory map or a `RowBlockCSR`; masks are memory maps of shape (n,), labels one laid out for ``task``
    (`gridgnn.data.targets`: int64 (n,) or float32 (n, T)).
    """

    folder: Path
    name: str
    num_nodes: int
    num_edges: int
    num_features: int
    num_classes: int
    directed: bool
    digest: str
    norm_adj: RowBlockCSR
    features: np.ndarray | RowBlockCSR
    labels: np.ndarray
    train_mask: np.ndarray
    val_mask: np.ndarray
    test_mask: np.ndarray
    meta: dict = field(default_factory=dict)
    operator: str = "gcn"
    task: str = "multiclass"
    edge_attr: np.ndarray | None = None
    """(nnz of ``norm_adj``, d) float32 memory map: the edge features of the operator's stored entries
    (`gridgnn.data.edge_features.operator_rows`), or None."""

    @property
    def num_edge_features(self) -> int:
        return 0 if self.edge_attr is None else int(self.edge_attr.shape[1])

    def structure_opener(self):
        """A picklable callable that opens this folder's operator structure again (`operator_structure`), for
        processes that read its row blocks (`gridgnn.cost.block_stats`)."""
        return functools.partial(operator_structure, str(self.folder))

    def release_pages(self) -> None:
        """Drop this process's resident pages of every memory-mapped array (``madvise(MADV_DONTNEED)``).

        A worker touches its rows of Â and of the features while cutting its blocks; those file pages would
        stay in its resident set for the whole run although training never reads them again. Released, they
        remain in the page cache (shared by the workers; re-read on the next access), and the resident set
        the OOM killer and `peak_memory_bytes` see is the training working set. Nothing is lost. A no-op
        where ``madvise`` is unavailable.
        """
        arrays = [self.norm_adj.indptr, self.norm_adj.indices, self.norm_adj.data, self.labels,
                  self.train_mask, self.val_mask, self.test_mask]
        features = self.features
        arrays += ([features.indptr, features.indices, features.data] if isinstance(features, RowBlockCSR)
                   else [features])
        for array in arrays:
            drop_pages(array)


def is_prepared(path: str | os.PathLike) -> bool:
    """True when ``path`` is a folder written by `prepare_graph`."""
    return (Path(path) / MANIFEST).is_file()


def prepare_graph(graph: Graph, folder: str | os.PathLike, operator: str = "gcn") -> Path:
    """Build ``operator``'s matrix of ``graph`` (`gridgnn.data.operators`) and write both to ``folder``
    (created; files are written, then the manifest last).

    Peak memory is the graph plus one copy of its operator (float64 while normalizing).
    """
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    norm = operator_matrix(operator, graph.adj)
    _save(target, "adj_indptr", norm.indptr.astype(np.int64, copy=False))
    _save(target, "adj_indices", norm.indices.astype(index_dtype(graph.num_nodes), copy=False))
    _save(target, "adj_data", norm.data.astype(np.float32, copy=False))
    norm_nnz = int(norm.nnz)
    num_edge_features = 0
    if graph.edge_attr is not None:  # one row per entry of the operator (a self-loop: its in-edges' mean)
        _save(target, "edge_attr", operator_rows(graph.adj, graph.edge_attr, norm))
        num_edge_features = graph.num_edge_features
    del norm
    sparse_features = sp.issparse(graph.features)
    if sparse_features:
        features = sp.csr_matrix(graph.features, dtype=np.float32)
        _save(target, "features_indptr", features.indptr.astype(np.int64, copy=False))
        _save(target, "features_indices", features.indices.astype(np.int32, copy=False))
        _save(target, "features_data", features.data)
    else:
        _save(target, "features", np.ascontiguousarray(graph.features, dtype=np.float32))
    _save(target, "labels", target_block(graph.labels))
    for name in ("train_mask", "val_mask", "test_mask"):
        _save(target, name, getattr(graph, name).astype(bool, copy=False))
    if graph.meta.get("vertex_ids") is not None:  # original ids of renumbered vertices (per-vertex outputs)
        _save(target, "vertex_ids", np.asarray(graph.meta["vertex_ids"], dtype=np.int64))
    if graph.meta.get("reorder_order") is not None:  # a reordered graph's original rows (`gridgnn.data.reorder`)
        _save(target, "reorder_order", np.asarray(graph.meta["reorder_order"], dtype=np.int64))
    if graph.meta.get("reorder_bounds") is not None:  # METIS parts, the row blocks follow (`gridgnn.cost.stages`)
        _save(target, "reorder_bounds", np.asarray(graph.meta["reorder_bounds"], dtype=np.int64))
    meta = {key: value for key, value in graph.meta.items() if isinstance(value, (str, int, float, bool))}
    manifest = {"format": FORMAT, "name": graph.name, "num_nodes": graph.num_nodes,
                "num_edges": graph.num_edges, "norm_nnz": norm_nnz, "num_features": graph.num_features,
                "num_classes": graph.num_classes, "directed": graph.directed, "digest": graph_digest(graph),
                "sparse_features": sparse_features, "meta": meta, "operator": operator, "task": graph.task,
                "num_edge_features": num_edge_features}
    manifest["files"] = describe_files(target, [p.name for p in target.glob("*.npy")])
    with os.fdopen(create_new(target / MANIFEST), "w", encoding="utf-8") as stream:
        stream.write(json.dumps(manifest, indent=1) + "\n")
    return target


def _save(folder: Path, name: str, array: np.ndarray) -> None:
    """Write ``folder/NAME.npy`` as a new file (a file or link already there is unlinked, never followed)."""
    with os.fdopen(create_new(folder / f"{name}.npy"), "wb") as stream:
        np.save(stream, array, allow_pickle=False)


def _folder_loader(root: Path):
    """(manifest, load, where) of a prepared folder: its checked manifest, and ``load(name, dtype, shape)``
    memory-mapping ``NAME.npy`` (a sharded folder's K shards as one `ShardedArray`) after checking its type and
    shape; `DataError` (one line) otherwise."""
    where = f"prepared graph '{root}'"
    regular_or_fail(root / MANIFEST, where + ": file", DataError)  # a FIFO would block forever
    try:
        manifest = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise DataError(f"{where}: cannot read {MANIFEST} ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise DataError(f"{where}: {MANIFEST} is not a {FORMAT} manifest")
    check_prepared_manifest(manifest, where, MANIFEST)

    def load(name: str, dtype, shape: tuple | None = None) -> np.ndarray:
        path = root / f"{name}.npy"
        regular_or_fail(path, where + ": file", DataError)
        try:
            array = np.load(path, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise DataError(f"{path}: cannot memory-map ({exc})") from None
        if array.dtype != np.dtype(dtype) or (shape is not None and array.shape != shape):
            raise DataError(f"{path}: expected {np.dtype(dtype)} {shape}, found {array.dtype} {array.shape}")
        return array

    if "shards" in manifest:  # written by prepare --nprocs P: each array is K row shards (`gridgnn.prepare`)
        load = shard_loader(root, manifest, load, where)
    return manifest, load, where


def open_prepared(folder: str | os.PathLike) -> PreparedGraph:
    """Memory-map a folder written by `prepare_graph`; checks the manifest and every array's shape and type.

    Raises `DataError` (one line) on a missing or malformed file. Reads no array data beyond the headers,
    ``indptr`` and the masks' sums happen later, per rank.
    """
    root = Path(folder)
    manifest, load, where = _folder_loader(root)
    n, f = manifest["num_nodes"], manifest["num_features"]
    norm_nnz, classes = manifest["norm_nnz"], manifest["num_classes"]
    indptr = load("adj_indptr", np.int64, (n + 1,))
    if indptr[0] != 0 or indptr[-1] != norm_nnz:
        raise DataError(f"{where}: adj_indptr does not span the {norm_nnz} stored entries")
    norm_adj = RowBlockCSR(indptr, load("adj_indices", index_dtype(n), (norm_nnz,)),
                           load("adj_data", np.float32, (norm_nnz,)), (n, n), source=where)
    if manifest.get("sparse_features"):
        fptr = load("features_indptr", np.int64, (n + 1,))
        stored = int(fptr[-1])
        features = RowBlockCSR(fptr, load("features_indices", np.int32, (stored,)),
                               load("features_data", np.float32, (stored,)), (n, f), source=where)
    else:
        features = load("features", np.float32, (n, f))
    operator = manifest.get("operator", "gcn")
    if operator not in OPERATORS:
        raise DataError(f"{where}: unknown operator {operator!r} in {MANIFEST} (known: {', '.join(OPERATORS)})")
    task = manifest.get("task", "multiclass")  # folders prepared before tasks existed hold classes
    if task not in TASKS:
        raise DataError(f"{where}: unknown task {task!r} in {MANIFEST} (known: {', '.join(TASKS)})")
    labels = (load("labels", np.int64, (n,)) if task == "multiclass" else load("labels", np.float32, (n, classes)))
    meta = dict(manifest.get("meta") or {})
    if manifest.get("has_vertex_ids") or _present(root / "vertex_ids.npy"):
        meta["vertex_ids"] = _distinct(load("vertex_ids", np.int64, (n,)), root / "vertex_ids.npy")
    if manifest.get("has_reorder_order") or ("shards" not in manifest and _present(root / "reorder_order.npy")):
        meta["reorder_order"] = _permutation(load("reorder_order", np.int64, (n,)), root / "reorder_order.npy")
    if "shards" not in manifest and (root / "reorder_bounds.npy").exists():
        bounds = load("reorder_bounds", np.int64)
        if bounds.ndim != 1 or not is_partition(bounds, n):
            raise DataError(f"{root / 'reorder_bounds.npy'}: not the boundaries of non-empty parts of {n} vertices "
                            "(0 first, then increasing to the vertex count); prepare the folder again")
        meta["reorder_bounds"] = [int(b) for b in bounds]
    masks = {name: load(name, np.bool_, (n,)) for name in ("train_mask", "val_mask", "test_mask")}
    edge_features = manifest.get("num_edge_features", 0)
    if isinstance(edge_features, bool) or not isinstance(edge_features, int) or edge_features < 0:
        raise DataError(f"{where}: num_edge_features in {MANIFEST} must be a count, got {edge_features!r}")
    edge_attr = load("edge_attr", np.float32, (norm_nnz, edge_features)) if edge_features else None
    if isinstance(labels, ShardedArray):  # checked shard by shard: no process reads every label at once
        for k, piece in enumerate(labels.pieces):
            check_graph_targets(piece, task, classes, len(piece), {m: masks[m].pieces[k] for m in masks}, where)
    else:
        check_graph_targets(labels, task, classes, n, masks, where)
    return PreparedGraph(
        folder=root, name=str(manifest.get("name", root.name)), num_nodes=n,
        num_edges=int(manifest.get("num_edges", 0)), num_features=f, num_classes=classes,
        directed=bool(manifest.get("directed", False)), digest=str(manifest.get("digest", "")),
        norm_adj=norm_adj, features=features, labels=labels,
        **masks, meta=meta, operator=operator, task=task, edge_attr=edge_attr)


def operator_structure(folder: str) -> tuple:
    """(indptr, indices) of a prepared folder's operator, memory-mapped (sharded arrays for a sharded folder),
    as `open_prepared` opens them, without its other checks: for another process reading a folder that
    `open_prepared` checked (`PreparedGraph.structure_opener`)."""
    manifest, load, _ = _folder_loader(Path(folder))
    n, nnz = manifest["num_nodes"], manifest["norm_nnz"]
    return load("adj_indptr", np.int64, (n + 1,)), load("adj_indices", index_dtype(n), (nnz,))


def index_dtype(num_nodes: int) -> np.dtype:
    """The dtype of Â's column ids in a folder of ``num_nodes`` vertices: int32 while ids fit, else int64."""
    return np.dtype(np.int32 if num_nodes <= np.iinfo(np.int32).max else np.int64)


def _present(path: Path) -> bool:
    """True when anything is at ``path`` (a dangling link or a FIFO too: `load` then refuses it)."""
    return os.path.lexists(path)


_CHUNK = 1 << 22
"""Entries of an index array checked at a time (32 MiB of int64)."""


def _permutation(order: np.ndarray, path: Path) -> np.ndarray:
    """``order`` (n,) when it holds each of 0..n-1 exactly once (n values in range covering every vertex),
    else `DataError`. Reads it in chunks; one n-byte mark array."""
    n = len(order)
    seen = np.zeros(n, dtype=bool)
    for lo in range(0, n, _CHUNK):
        chunk = np.asarray(order[lo:lo + _CHUNK])
        if chunk.min() < 0 or chunk.max() >= n:
            raise DataError(f"{path}: vertex order outside [0, {n}); prepare the folder again")
        seen[chunk] = True
    if not seen.all():
        raise DataError(f"{path}: not a permutation of 0..{n - 1} (vertex {int(np.argmin(seen))} never appears, "
                        "another twice); prepare the folder again")
    return order


def _distinct(ids: np.ndarray, path: Path) -> np.ndarray:
    """``ids`` when no two vertices share an original id, else `DataError`. Sharded ids that increase
    (a distributed preparation's compact renumbering) are checked piece by piece; ids within a range no wider
    than `DENSE_ID_RANGE` times their count (a random reordering of such ids) against a mark per id of the
    range, a chunk at a time (one byte per id, where a sort copies eight); other ids are sorted whole."""
    if isinstance(ids, ShardedArray) and _increasing(ids):
        return ids
    if len(ids) > 1:
        twice = _repeated_id(ids)
        if twice is not None:
            raise DataError(f"{path}: original vertex id {twice} is given to more than one vertex; "
                            "prepare the folder again")
    return ids


DENSE_ID_RANGE = 2
"""Ids whose range (max - min + 1) is at most this many times their count are checked with marks, not a sort."""
ID_CHUNK = 1 << 20
"""Ids read at once by the marks check."""


def _id_chunks(ids) -> Iterator[np.ndarray]:
    """``ids`` (an array or a `ShardedArray`) as int64 chunks of at most `ID_CHUNK`."""
    for piece in (ids.pieces if isinstance(ids, ShardedArray) else [ids]):
        for start in range(0, len(piece), ID_CHUNK):
            yield np.asarray(piece[start:start + ID_CHUNK], dtype=np.int64)


def _repeated_id(ids) -> int | None:
    """An id given to two vertices, or None when all are distinct."""
    ends = np.array([(chunk.min(), chunk.max()) for chunk in _id_chunks(ids) if chunk.size])  # one pass
    lo, hi = int(ends[:, 0].min()), int(ends[:, 1].max())
    if hi - lo + 1 > DENSE_ID_RANGE * len(ids):
        ordered = np.sort(np.asarray(ids))
        twice = np.flatnonzero(ordered[1:] == ordered[:-1])
        return int(ordered[twice[0]]) if twice.size else None
    seen = np.zeros(hi - lo + 1, dtype=bool)
    for chunk in _id_chunks(ids):
        marks = np.sort(chunk - lo)
        inside = np.flatnonzero(marks[1:] == marks[:-1])  # twice within the chunk
        if inside.size:
            return int(marks[inside[0]]) + lo
        before = np.flatnonzero(seen[marks])  # seen in an earlier chunk
        if before.size:
            return int(marks[before[0]]) + lo
        seen[marks] = True
    return None


def _increasing(ids: ShardedArray) -> bool:
    """True when every piece of ``ids`` strictly increases and each starts above the previous one's last."""
    last = None
    for piece in ids.pieces:
        if len(piece) == 0:
            continue
        values = np.asarray(piece)
        if np.any(values[1:] <= values[:-1]) or (last is not None and values[0] <= last):
            return False
        last = values[-1]
    return True


def _graph_edge_rows(prepared: PreparedGraph, norm: sp.csr_matrix) -> np.ndarray | None:
    """The edge features of the graph's own edges (the operator ``norm``'s entries but its diagonal) from the
    prepared rows."""
    if prepared.edge_attr is None:
        return None
    diagonal = entry_rows(norm) == norm.indices
    return np.array(prepared.edge_attr[np.flatnonzero(~diagonal)], dtype=np.float32)


def graph_of_prepared(prepared: PreparedGraph) -> Graph:
    """The preprocessed `Graph` a prepared folder was written from, read back whole (for ``gridgnn info`` and
    ``gridgnn plan``, which take a prepared folder as ``train`` does).

    Exact: preprocessing leaves A binary and loop-free, and Â = D^-1/2 (A + I) D^-1/2 stores exactly the
    entries of A + I, so A is Â's pattern without its diagonal. Features, labels and masks are copied as they
    were written (already row-normalized where the dataset asked for it).
    """
    n = prepared.num_nodes
    norm = prepared.norm_adj[0:n]
    edge_attr = _graph_edge_rows(prepared, norm)  # before the pattern, which edits norm's arrays in place
    pattern = sp.csr_matrix((np.ones(norm.nnz, dtype=np.float32), norm.indices, norm.indptr), shape=(n, n))
    pattern.setdiag(0)
    pattern.eliminate_zeros()
    features = prepared.features
    features = features[0:n] if isinstance(features, RowBlockCSR) else np.array(features)
    return Graph(adj=pattern, features=features, labels=np.array(prepared.labels),
                 train_mask=np.array(prepared.train_mask), val_mask=np.array(prepared.val_mask),
                 test_mask=np.array(prepared.test_mask), num_classes=prepared.num_classes, name=prepared.name,
                 task=prepared.task, edge_attr=edge_attr,
                 directed=prepared.directed, meta={**prepared.meta, "prepared_folder": str(prepared.folder)})

