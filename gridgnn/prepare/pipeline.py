"""One process of a distributed preparation: read its part of the source, exchange edges to the owners of
their rows, build its rows of the operator and of the node data, write its shards. Collective on the world.

Phases (each timed, the slowest process's seconds reported): ``read`` (this process's byte range of a text
edge list, its rows of a ``.npy`` edge array, or its chunks of an R-MAT generator, generated once per pass of
the exchange), ``ids`` (compact
renumbering of an edge list's ids, `gridgnn.prepare.renumber`), ``exchange`` (every entry of A, both
directions for an undirected graph, to the owner of its row: all-to-alls with uneven splits, in rounds),
``operator`` (duplicates and self-loops dropped, the operator's values; GCN gathers every row's degree),
``nodes`` (features, labels, masks of its rows: generated, placeholders, or read from node files by rows,
`gridgnn.prepare.node_data`), ``reorder`` (``--reorder random`` only: the node rows to the
owners of their new ids, `gridgnn.data.bijection.random_bijection`, which also maps both ends of every edge
before the exchange), ``write`` (its shards and their SHA-256). The K shards
(``--shards``, default P) are balanced row blocks; process p owns shards [K p / P, K (p + 1) / P), so the
folder is the same for any P <= K.

Memory: an edge list's part (its edges, 16 bytes each), then the entries of its rows (one int64 key each,
sorted and deduplicated in place), its block of the operator and its node rows; O(n) arrays only for GCN's
degrees (4 bytes per vertex) and an edge list's random split (`gridgnn.data.splits.random_split` draws one
permutation of all vertices: 9 bytes per vertex). Measured: `results/sharded_prepare/`.
"""

from __future__ import annotations

import functools
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from gridgnn.data.bijection import random_bijection
from gridgnn.data.csbm_parts import CHUNK_EDGES as CSBM_CHUNK_EDGES
from gridgnn.data.file_digest import file_digest
from gridgnn.data.generators import RMAT_ROW_CHUNK, csbm_parts, rmat_chunks, rmat_edge_chunks, rmat_node_rows
from gridgnn.data.prepared import index_dtype
from gridgnn.data.readers.edgelist import is_edge_array, open_edge_array
from gridgnn.data.row_shards import shard_prefix
from gridgnn.data.splits import random_split
from gridgnn.data.synthetic import PLACEHOLDER_WIDTH
from gridgnn.data.targets import target_block
from gridgnn.data.transforms import row_normalize_features
from gridgnn.partition import block_bounds
from gridgnn.prepare.edge_rows import entry_rows_of, operator_rows, read_part_rows
from gridgnn.prepare.exchange import agree, exchange_counts, maximum, send_to_owners, total, world
from gridgnn.prepare.heap import release_free_memory, steady_heap
from gridgnn.prepare.job import PrepareJob
from gridgnn.prepare.node_data import NodeInfo, attach_rows
from gridgnn.prepare.ogb_parts import read_edge_part
from gridgnn.prepare.renumber import renumber
from gridgnn.prepare.rows import RowBlock, keys_overflow, operator_values, pattern_block, pattern_from_keys
from gridgnn.prepare.text_edges import byte_range, file_state, read_edge_range
from gridgnn.safe_files import create_new
from gridgnn.train.loop.distributed import peak_memory_bytes

PHASES = ("read", "ids", "exchange", "operator", "nodes", "reorder", "write")


@dataclass
class PartResult:
    """What one process did: its shards (``rows``, ``nnz``, ``edges`` of A, file name -> size and SHA-256),
    seconds per phase, its peak resident memory and the totals rank 0 reports."""

    shards: list[dict] = field(default_factory=list)
    files: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)
    peaks: dict = field(default_factory=dict)
    peak_rss_bytes: int = 0
    num_nodes: int = 0
    bytes_read: int = 0
    entries_sent: int = 0
    blocks_after: np.ndarray | None = None  # --reorder: (parts, 2) A's entries per row block, and inside it
    node_info: NodeInfo | None = None  # the node data's widths and task (alike on every process)
    num_edge_features: int = 0  # d of --edge-features (0: none)


class Clock:
    """Seconds and the memory high-water mark at the end of each phase."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self.peaks: dict[str, int] = {}

    @contextmanager
    def phase(self, name: str):
        start = time.perf_counter()
        yield
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start  # a phase may recur
        self.peaks[name] = peak_rss_bytes()  # the high-water mark so far: where it rose says which phase


def peak_rss_bytes() -> int:
    """This process's resident-set high-water mark (`gridgnn.train.loop.distributed.peak_memory_bytes` on the
    CPU: VmHWM on Linux, else ru_maxrss)."""
    return peak_memory_bytes(torch.device("cpu"))


def prepare_part(job: PrepareJob, say=print) -> PartResult:
    """Collective on the world: this process's part of ``job`` (its shards written into ``job.folder``)."""
    rank, size = world()
    steady_heap()
    clock = Clock()
    result = PartResult()
    speak = say if rank == 0 else (lambda *_: None)
    share, edges, edge_rows = None, None, None
    if job.kind == "edge-list":  # the whole part first: its ids are renumbered before anything moves
        with clock.phase("read"):
            edges, result.bytes_read = _read_text(job, rank, size)
        all_edges = total(len(edges))
        speak(f"prepare    read      {clock.seconds['read']:7.1f} s  {total(result.bytes_read) / 1e6:.1f} MB, "
              f"{all_edges} edges")
        with clock.phase("ids"):
            if all_edges == 0:
                agree(f"{job.source}: the edge list is empty (no edge lines)")
            agree(f"{job.source}: negative vertex id {int(edges.min())}" if edges.size and edges.min() < 0
                  else None)
            edges, share = renumber(edges)
        n = share.num_nodes
        if "edge_features" in job.node_files:  # the rows of this process's edges, numbered in the list's order
            with clock.phase("read"):
                edge_rows = read_part_rows(job.node_files["edge_features"], len(edges))
            result.bytes_read += edge_rows[0].nbytes
    elif job.kind == "ogb-binary":  # OGB numbers its vertices 0 to n - 1: nothing to renumber
        with clock.phase("read"):
            problem = None
            try:
                edges, result.bytes_read = read_edge_part(job.layout, rank, size)
            except Exception as exc:  # noqa: BLE001 - every process must hear of it before the next collective
                problem = str(exc) or repr(exc)
            agree(problem)
        speak(f"prepare    read      {clock.seconds['read']:7.1f} s  {total(result.bytes_read) / 1e6:.1f} MB, "
              f"{job.layout['num_edges']} edges")
        n = int(job.layout["num_nodes"])
    elif job.kind == "csbm":
        n = _csbm(job).nodes
    else:
        n = 1 << int(job.generator["scale"])
    result.num_nodes = n
    shard_bounds = block_bounds(n, job.shards, allow_empty=True)
    mine = (job.shards * rank // size, job.shards * (rank + 1) // size)
    r0, r1 = shard_bounds[mine[0]], shard_bounds[mine[1]]
    owner_bounds = np.array([shard_bounds[job.shards * p // size] for p in range(size)] + [n], dtype=np.int64)

    def owner_of(ids: np.ndarray) -> np.ndarray:
        return np.searchsorted(owner_bounds, ids, side="right") - 1

    union = job.kind == "edge-list" and job.directed  # placeholder features count neighbours both ways
    shuffled = job.reorder in ("random", "double-random")  # the same vertex order (double-random: Â's columns later)
    permute = functools.partial(random_bijection, n=n, seed=job.reorder_seed) if shuffled else None
    with clock.phase("exchange"):
        rounds = functools.partial(_edge_rounds, job, edges, rank, size, clock, edge_rows)  # once per pass
        del edges, edge_rows
        received, result.entries_sent = _route(rounds, job.directed, union, owner_of, r0, r1, n, permute)
        del rounds  # and with it an edge list's part
        release_free_memory()
    if job.kind in ("rmat", "csbm"):
        clock.seconds["exchange"] -= clock.seconds.get("read", 0.0)  # generation (twice) is timed as reading
        speak(f"prepare    read      {clock.seconds['read']:7.1f} s  generated the edges (rank 0)")
    speak(f"prepare    exchange  {clock.seconds['exchange']:7.1f} s  {total(result.entries_sent)} entries to "
          "the owners of their rows")
    with clock.phase("operator"):
        union_degree = None
        entry_rows = received.edge_rows(union)  # before the pattern consumes the keys; None without edge features
        if union:  # placeholder features count neighbours both ways: the pattern of every entry received
            adjacency = received.pattern(r0, r1, n, forward_only=True)
            union_degree = received.pattern(r0, r1, n, forward_only=False).counts
        else:
            adjacency = received.pattern(r0, r1, n, forward_only=False)
        del received
        release_free_memory()
        if job.kind == "edge-list" and union_degree is None:
            union_degree = adjacency.counts
        if permute is not None:  # A's entries per row block of --parts, and those inside their block
            result.blocks_after = _block_entries(adjacency, job.reorder_parts)
        edge_pointers = adjacency.indptr
        operator_edges = None
        if entry_rows is not None:  # aligned with A's entries, then with the operator's
            operator_edges = operator_rows(job.operator, adjacency, entry_rows)
            result.num_edge_features = int(entry_rows.shape[1])
            del entry_rows
        operator = operator_values(job.operator, adjacency)
        del adjacency
    speak(f"prepare    operator  {clock.seconds['operator']:7.1f} s  {total(operator.indices.size)} entries of "
          f"the {job.operator} operator")
    with clock.phase("nodes"):
        nodes, result.node_info = _node_rows(job, n, r0, r1, share)
        if share is not None:
            nodes["vertex_ids"] = share.vertex_ids(r0, r1)
        elif permute is not None:  # a reordered graph names its rows by their ids before (`reorder_graph`)
            nodes["vertex_ids"] = np.arange(r0, r1, dtype=np.int64)
    if permute is not None:
        with clock.phase("reorder"):
            nodes = _to_new_rows(nodes, permute, owner_of, r0, r1)
        speak(f"prepare    reorder   {clock.seconds['reorder']:7.1f} s  random: the node rows to the owners of "
              "their new ids")
    nodes["features"] = _finish_features(job, nodes["features"], union_degree)
    with clock.phase("write"):
        for k in range(*mine):
            result.shards.append(_write_shard(job, k, shard_bounds, edge_pointers, operator, nodes, result.files,
                                              operator_edges))
    speak(f"prepare    write     {clock.seconds['write']:7.1f} s  {job.shards} shards, each written and hashed by "
          "its process")
    result.seconds, result.peaks = clock.seconds, clock.peaks
    result.peak_rss_bytes = peak_rss_bytes()
    return result


ROUND_EDGES = 1 << 18
"""Edges a process turns into entries and routes per all-to-all round: a round's send buffers and index
temporaries (about 64 bytes per entry) stay small beside what the process keeps (8 bytes per entry)."""


def _edge_rounds(job: PrepareJob, edges: np.ndarray | None, rank: int, size: int, clock: Clock,
                 edge_rows: tuple[np.ndarray, np.ndarray] | None = None):
    """This process's edges (m, 2) int64, `ROUND_EDGES` at a time, as many rounds on every process (an empty
    array where a process has run out): an edge list's part, or a generator's (R-MAT's, the chunked csbm's)
    chunks; each with its edges' feature rows and numbers (``edge_rows``:
    `gridgnn.prepare.edge_rows.read_part_rows`), or None."""
    if job.kind == "rmat":
        g = job.generator
        chunks = rmat_chunks(g["scale"], g["edge_factor"], g["chunk_edges"])
        draw = functools.partial(rmat_edge_chunks, g["scale"], g["edge_factor"], (g["a"], g["b"], g["c"]),
                                 g["chunk_edges"], job.seed)
        yield from _generated_rounds(chunks, g["chunk_edges"], draw, rank, size, clock)
        return
    if job.kind == "csbm":
        parts = _csbm(job)
        yield from _generated_rounds(parts.num_chunks, CSBM_CHUNK_EDGES, parts.edges, rank, size, clock)
        return
    count = maximum(-(-len(edges) // ROUND_EDGES))
    for k in range(count):
        part = slice(k * ROUND_EDGES, (k + 1) * ROUND_EDGES)
        yield edges[part], (None if edge_rows is None else (edge_rows[0][part], edge_rows[1][part]))


def _generated_rounds(chunks: int, chunk_edges: int, draw, rank: int, size: int, clock: Clock):
    """A generator's rounds: this process's share [C p / P, C (p + 1) / P) of its ``chunks`` edge chunks,
    `ROUND_EDGES` edges a round (as many rounds on every process), each drawn by ``draw(first, last)`` ->
    (src, dst) and timed as reading."""
    first, last = chunks * rank // size, chunks * (rank + 1) // size
    per_round = max(1, ROUND_EDGES // chunk_edges)
    for k in range(maximum(-(-(last - first) // per_round))):
        start = time.perf_counter()
        src, dst = draw(min(last, first + k * per_round), min(last, first + (k + 1) * per_round))
        clock.seconds["read"] = clock.seconds.get("read", 0.0) + time.perf_counter() - start
        yield np.stack([src.astype(np.int64), dst.astype(np.int64)], axis=1), None


@dataclass
class Received:
    """The entries of A this process received for its rows: ``keys`` (m,) int64 ``local row * n + column``
    (`gridgnn.prepare.rows.pattern_from_keys`), or, where such a key would overflow, ``pairs`` (local rows,
    columns) int64; ``forward`` (m,) bool marks A's own entries among the reverse ones (directed edge lists)."""

    keys: np.ndarray | None = None
    pairs: tuple[np.ndarray, np.ndarray] | None = None
    forward: np.ndarray | None = None
    features: np.ndarray | None = None  # --edge-features: (m, d) float32 rows that travelled with the entries
    # (a directed list's with its edges only: A's entries, in their order among the entries),
    numbers: np.ndarray | None = None  # their edges' numbers in the list (m,) int64,
    reverse: np.ndarray | None = None  # and which entries are the reverse ones symmetrization adds (m,) bool

    def edge_rows(self, union: bool) -> np.ndarray | None:
        """(A's entries, d) float32: the edge-feature row of every distinct entry of A in CSR order
        (`gridgnn.prepare.edge_rows.entry_rows_of`; ``union``: A is the forward entries only), or None without
        edge features. Call before `pattern`, which consumes the keys; frees the rows."""
        if self.features is None:
            return None
        keys, rows, numbers, reverse = self.keys, self.features, self.numbers, self.reverse
        if union:  # A is the forward entries (the others only counted a directed graph's degree); the rows
            keys = keys[self.forward]  # came with them alone, in their order
        self.features = self.numbers = self.reverse = None
        return entry_rows_of(keys, rows, numbers, reverse)

    def pattern(self, r0: int, r1: int, n: int, forward_only: bool) -> RowBlock:
        """The 0/1 pattern of the entries (only A's own with ``forward_only``); consumes them unless
        ``forward_only`` selects a copy."""
        if self.keys is not None:
            return pattern_from_keys(self.keys[self.forward] if forward_only else self.keys, r0, r1, n)
        local, cols = self.pairs
        if forward_only:
            local, cols = local[self.forward], cols[self.forward]
        return pattern_block(local + r0, cols, r0, r1, n)


def _route(rounds, directed: bool, union: bool, owner_of, r0: int, r1: int, n: int,
           permute=None) -> tuple[Received, int]:
    """Collective on the world: every round's entries of A (`_entries`; self-loops dropped at the sender) to the
    owner of their row, in two passes over ``rounds()`` (a callable giving the rounds afresh): the first only
    counts what each process will receive, so that the second writes straight into one array of the exact
    size (no list of pieces and no concatenation: 8 bytes per entry, plus one round's buffers). ``permute``
    (``--reorder random``): the new id of each old one, applied to both ends first. Returns what this process
    received and the entries it sent."""
    ids = index_dtype(n)
    total, total_edges, sent = 0, 0, 0
    for edges, extra in rounds():
        rows, cols, ahead = _entries(edges, directed, union, permute)
        keep = rows != cols
        counts = np.bincount(owner_of(rows[keep]), minlength=world()[1]).astype(np.int64)
        total += int(exchange_counts(counts).sum())
        if extra is not None and union:  # a directed list's feature rows go with its edges only
            counts = np.bincount(owner_of(rows[keep & ahead]), minlength=world()[1]).astype(np.int64)
            total_edges += int(exchange_counts(counts).sum())
        del rows, cols, ahead
    overflow = keys_overflow(r0, r1, n)
    keys = None if overflow else np.empty(total, dtype=np.int64)
    pairs = (np.empty(total, dtype=np.int64), np.empty(total, dtype=np.int64)) if overflow else None
    forward = np.empty(total, dtype=bool) if union else None
    out = Received(keys, pairs, forward)
    filled, filled_edges = 0, 0
    for edges, extra in rounds():
        rows, cols, ahead = _entries(edges, directed, union, permute)
        keep = rows != cols
        rows, cols, ahead = rows[keep], cols[keep], (None if ahead is None else ahead[keep])
        sent += len(rows)
        moved = (rows.astype(ids), cols.astype(ids)) + (() if ahead is None else (ahead,))
        with_edges = None
        if extra is not None:  # the rows travel with their entries (the reverse entries after the edges)
            features, numbers, reverse = _with_entries(extra, len(edges), len(keep), keep)
            if out.features is None:
                agree("--edge-features: the entry keys of this graph overflow int64; prepare it in one process"
                      if overflow else None)
                size = total_edges if union else total
                out.features = np.empty((size, extra[0].shape[1]), dtype=np.float32)
                out.numbers, out.reverse = np.empty(size, dtype=np.int64), np.empty(size, dtype=bool)
            if union:  # the reverse entries only count a degree: their edges' rows in a send of their own
                with_edges = send_to_owners(owner_of(rows[ahead]), features[ahead], numbers[ahead])
            else:
                moved += (features, numbers, reverse)
        received = send_to_owners(owner_of(rows), *moved)
        del rows, cols, ahead, moved
        m = len(received[0])
        local = received[0].astype(np.int64) - r0
        if overflow:
            pairs[0][filled:filled + m], pairs[1][filled:filled + m] = local, received[1]
        else:
            np.multiply(local, n, out=keys[filled:filled + m])
            keys[filled:filled + m] += received[1]
        if union:
            forward[filled:filled + m] = received[2]
        if with_edges is not None:  # in the order of the forward entries among those received
            k = len(with_edges[0])
            out.features[filled_edges:filled_edges + k], out.numbers[filled_edges:filled_edges + k] = with_edges
            out.reverse[filled_edges:filled_edges + k] = False
            filled_edges += k
        elif extra is not None:
            features, numbers, reverse = received[-3:]
            out.features[filled:filled + m], out.numbers[filled:filled + m] = features, numbers
            out.reverse[filled:filled + m] = reverse
        filled += m
        del received, local
    return out, sent


def _with_entries(extra: tuple[np.ndarray, np.ndarray], num_edges: int, num_entries: int,
                  keep: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(feature rows, edge numbers, reverse flags) of a round's entries (`_entries`: the edges, then, where
    there are twice as many entries, their reverse entries), filtered by ``keep`` (self-loops out)."""
    features, numbers = extra
    if num_entries == 2 * num_edges:
        features, numbers = np.concatenate([features, features]), np.concatenate([numbers, numbers])
    reverse = np.arange(num_entries) >= num_edges
    return features[keep], numbers[keep], reverse[keep]


def _read_text(job: PrepareJob, rank: int, size: int) -> tuple[np.ndarray, int]:
    """This process's edges (E, 2) int64 (source, target) of the edge list and the bytes it read: a byte range
    of a text edge list (`gridgnn.prepare.text_edges`), or rows [E p / P, E (p + 1) / P) of a memory-mapped
    ``.npy`` edge array."""
    path = Path(job.source)
    problem = None
    if file_state(path) != job.source_state:
        problem = f"{path}: the file changed after the preparation started; prepare it again"
    agree(problem)
    try:
        if is_edge_array(path):
            array = open_edge_array(path)
            lo, hi = len(array) * rank // size, len(array) * (rank + 1) // size
            edges = np.asarray(array[lo:hi], dtype=np.int64)
            lo, hi = lo * array.itemsize * 2, hi * array.itemsize * 2  # the bytes of those rows
        else:
            lo, hi, delimiter = byte_range(path, rank, size)
            edges = read_edge_range(path, lo, hi, delimiter)
    except Exception as exc:  # noqa: BLE001 - every process must hear of it before the next collective
        agree(str(exc) if str(exc) else repr(exc))
        raise
    agree(f"{path}: the file changed while it was being read; prepare it again"
          if file_state(path) != job.source_state else None)
    return edges, hi - lo


def _entries(edges: np.ndarray, directed: bool, union: bool, permute=None):
    """(rows, cols, forward): the entries of A (``adj[dst, src]`` for each edge src -> dst) and, for an
    undirected graph (or, with ``union``, a directed one whose placeholder features need the undirected
    degree), the reverse ones; ``forward`` (only with ``union``) marks the entries that belong to A. Ids are
    ``permute``d first (``--reorder random``)."""
    src, dst = edges[:, 0], edges[:, 1]
    if permute is not None:
        src, dst = permute(src), permute(dst)
    if directed and not union:
        return dst.copy(), src.copy(), None
    rows = np.concatenate([dst, src])
    cols = np.concatenate([src, dst])
    forward = None
    if union:
        forward = np.ones(rows.size, dtype=bool)
        forward[len(src):] = False
    return rows, cols, forward


def _node_rows(job: PrepareJob, n: int, r0: int, r1: int, share=None) -> tuple[dict, NodeInfo]:
    """Features (rows, f) float32, labels and masks of rows [r0, r1), as the one-process loader makes them, and
    their widths and task; an edge list's placeholder degree column and the feature normalization wait for
    `_finish_features`. Node files (``job.node_files``) replace what they give (`gridgnn.prepare.node_data`:
    collective on the world then; ``share``: the renumbering, whose smallest and largest ids a row count's
    message names)."""
    if job.kind == "rmat":
        g = job.generator
        features, labels, (train, val, test) = rmat_node_rows(r0, r1, g["features"], g["classes"], job.seed)
        info = NodeInfo(int(g["features"]), int(g["classes"]), "multiclass")
    elif job.kind == "csbm":
        parts = _csbm(job)
        features, labels, (train, val, test) = parts.node_rows(r0, r1)
        info = NodeInfo(parts.features, parts.classes, "multiclass")
    else:  # `gridgnn.data.synthetic.placeholder_features` and `structure_only_graph`
        from_file = "features" in job.node_files  # read by `attach_rows` below: no placeholder to draw
        features = np.empty((r1 - r0, 0 if from_file else PLACEHOLDER_WIDTH), dtype=np.float32)
        if not from_file:
            features[:, 0] = 1.0
            features[:, 1] = 0.0  # the degree: `_finish_features`, where the vertex's row lives
            features[:, 2:] = _normal_rows(job.seed, r0, r1, PLACEHOLDER_WIDTH - 2)
        labels = np.zeros(r1 - r0, dtype=np.int64)
        train, val, test = (m[r0:r1].copy() for m in random_split(n, seed=job.seed))
        info = NodeInfo(PLACEHOLDER_WIDTH, 1, "multiclass")
    nodes = {"features": features, "labels": target_block(labels), "train_mask": train, "val_mask": val,
             "test_mask": test}
    if job.kind == "ogb-binary":  # the source numbers its vertices and names its own files
        nodes, info = attach_rows(job.node_files, job.name, n, r0, r1, job.seed, nodes, info, None, check_split=False)
    elif job.node_files:
        held = share.held
        none = np.iinfo(np.int64).max
        ids = (-maximum(-int(held[0]) if held.size else -none), maximum(int(held[-1]) if held.size else -none))
        nodes, info = attach_rows(job.node_files, job.name, n, r0, r1, job.seed, nodes, info, ids)
    return nodes, info


def _csbm(job: PrepareJob):
    """The chunked csbm of ``job`` (`gridgnn.data.csbm_parts.CsbmParts`)."""
    return csbm_parts(**job.generator, directed=job.directed)


def _finish_features(job: PrepareJob, features: np.ndarray, union_degree: np.ndarray | None) -> np.ndarray:
    """The node features of this process's rows made final: an edge list's placeholder degree column from its
    rows' degrees (``union_degree``; not where a features file replaced them), then the row normalization if
    asked."""
    if job.kind not in ("rmat", "csbm") and "features" not in job.node_files:
        features[:, 1] = np.log1p(union_degree.astype(np.int64))
    if job.normalize_features:
        features = row_normalize_features(features, "l1")
    return np.ascontiguousarray(features, dtype=np.float32)


def _to_new_rows(nodes: dict, permute, owner_of, r0: int, r1: int) -> dict:
    """Collective on the world (``--reorder random``): the node rows of the old ids [r0, r1) sent to the owners
    of their new ids, which place them; ``reorder_order`` (the old id of each of this process's new rows) is
    added. The old and the new ids of a process span the same range [r0, r1)."""
    old = np.arange(r0, r1, dtype=np.int64)
    new = permute(old)
    names = list(nodes)
    received = send_to_owners(owner_of(new), new, old, *(nodes[name] for name in names))
    place = received[0] - r0
    out = {"reorder_order": np.empty(r1 - r0, dtype=np.int64)}
    out["reorder_order"][place] = received[1]
    for name, rows in zip(names, received[2:], strict=True):
        out[name] = np.empty_like(rows)
        out[name][place] = rows
    return out


def _block_entries(adjacency: RowBlock, parts: int) -> np.ndarray:
    """(parts, 2) int64: the entries of this process's rows of A in each of ``parts`` balanced row blocks, and
    how many of them have their column in the same block (summed over processes: `nnz_imbalance` and
    `cut_fraction` of `gridgnn.data.reorder`)."""
    bounds = np.asarray(block_bounds(adjacency.n, parts), dtype=np.int64)
    out = np.zeros((parts, 2), dtype=np.int64)
    for k in range(parts):
        a, b = max(bounds[k], adjacency.r0), min(bounds[k + 1], adjacency.r1)
        if b <= a:
            continue
        lo, hi = adjacency.indptr[a - adjacency.r0], adjacency.indptr[b - adjacency.r0]
        cols = adjacency.indices[lo:hi]
        out[k] = hi - lo, np.count_nonzero((cols >= bounds[k]) & (cols < bounds[k + 1]))
    return out


def _normal_rows(seed: int, r0: int, r1: int, width: int) -> np.ndarray:
    """Rows [r0, r1) of ``default_rng(seed).standard_normal((n, width), float32)``: one stream, drawn up to r1
    in blocks (a normal draw's cost varies, so a process cannot jump to its rows)."""
    rng = np.random.default_rng(seed)
    out = np.empty((r1 - r0, width), dtype=np.float32)
    position = 0
    while position < r1:
        count = min(RMAT_ROW_CHUNK, r1 - position)
        block = rng.standard_normal((count, width), dtype=np.float32)
        lo, hi = max(position, r0), min(position + count, r1)
        if hi > lo:
            out[lo - r0:hi - r0] = block[lo - position:hi - position]
        position += count
    return out


def _write_shard(job: PrepareJob, k: int, shard_bounds: list[int], edge_pointers: np.ndarray, operator: RowBlock,
                 nodes: dict, files: dict, operator_edges: np.ndarray | None = None) -> dict:
    """Write shard k (rows shard_bounds[k]..shard_bounds[k+1] of this process's blocks) and record its files;
    ``operator_edges``: the edge-feature rows of the operator's entries (`gridgnn.prepare.edge_rows`), or None."""
    a, b = shard_bounds[k] - operator.r0, shard_bounds[k + 1] - operator.r0
    lo, hi = int(operator.indptr[a]), int(operator.indptr[b])
    arrays = {"adj_indptr": operator.indptr[a:b + 1] - lo,
              "adj_indices": operator.indices[lo:hi].astype(index_dtype(operator.n), copy=False),
              "adj_data": operator.data[lo:hi]}
    if operator_edges is not None:
        arrays["edge_attr"] = operator_edges[lo:hi]
    arrays |= {name: value[a:b] for name, value in nodes.items()}
    folder = Path(job.folder)
    for name, value in arrays.items():
        file_name = f"{shard_prefix(k, job.token)}{name}.npy"
        with os.fdopen(create_new(folder / file_name), "wb") as stream:
            np.save(stream, np.ascontiguousarray(value), allow_pickle=False)
        files[file_name] = {"bytes": (folder / file_name).stat().st_size, "sha256": file_digest(folder / file_name)}
    edges = int(edge_pointers[b] - edge_pointers[a])  # A's entries in the shard (the operator's but loops)
    return {"rows": [int(shard_bounds[k]), int(shard_bounds[k + 1])], "nnz": hi - lo, "edges": edges}
