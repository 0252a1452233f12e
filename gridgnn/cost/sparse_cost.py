"""Per-rank communication of the sparse SpMM variants (``--comm sparse``), every rank at once (pure).

The dense terms of `gridgnn.cost.rank_cost` stay for what the sparse variants leave as it was (the Â panel
broadcasts of 2D/3D, the replica all-reduce of 1.5D); the X exchange on ``row`` becomes all-to-alls that
carry the touched rows of `gridgnn.cost.sparse_stages`:

====  ===========================================  =================================================
algo  forward (rows received by process at row i)  backward (rows received by the root of segment s)
====  ===========================================  =================================================
1.5d  Σ_{j in share, j≠i} U[i, j]; 1 call            Σ_{i≠j} U[i, j] on replica j % c; 1 call
2d    Σ_{s: root(s)≠i} U[i, s]; one call per stage   Σ_{i≠root(s)} U[i, s]; one call per stage
3d    Σ_{k≠i} U[i, (k, l)]; one call per stage       Σ_{i≠k} U[i, (k, l)]; one call per stage
====  ===========================================  =================================================

U[i, s] = distinct columns of Â's row block i inside segment s (exact from the graph, or the uniform
expectation for statistics from counts). Bytes = rows x (the rank's feature columns) x value size.

3D's depth reduce-scatter (forward) and all-gather (backward) become one all-to-all on ``depth`` per SpMM
half (`gridgnn.spmm.depth_rows`): with V[s, l] the rows of sub-block s (segment ``i * d + m``) that have an
entry in depth slice l's columns (`gridgnn.cost.sparse_stages.slice_counts`; for statistics from counts
every row, an upper bound), (i, j, m) receives Σ_{l≠m} V[i * d + m, l] rows forward and
Σ_{l≠m} V[i * d + l, m] backward.

Set-up (`index_exchange_terms`, once per sparse SpMM built, phase ``other``): two all-to-alls on ``row``
(`gridgnn.spmm.row_exchange.exchange_wanted`): each process receives its R - 1 peers' counts, then the ids
of the rows they need from it, which are the rows it gets back in backward; both int64.

``--comm cover`` (`cover_setup_terms`, phase ``other``): each receiver computes its pairs' covers from its own
rows and tells every sender of its share what to send (`gridgnn.spmm.cover_15d.tell_senders`), in three
all-to-alls on ``row``: the index exchange's two (`index_terms`: a count from each of the R - 1 peers, then
each peer's message, two sizes and, as the sender j of a pair, K[q, j] + E[q, j] int64: the cover's columns,
each cover row's entry count, the entries' columns), then Σ_q E[q, j] float32 values, with K[i, j] the
cover of the cut "block j sends to block i" and E[i, j] the
entries of its cover rows outside its cover columns (the partial sums' entries; 0 where j is not in the
receiver's share).
"""

from __future__ import annotations

import numpy as np

from gridgnn.cost.rank_cost import ShapeBlocks, Term, feature_widths, spmm_terms
from gridgnn.cost.sparse_stages import expected_touched, slice_counts
from gridgnn.cost.spmm_cost import FLOAT32, SizeInfo
from gridgnn.cost.stages import StageLayout


def touched_rows(blocks: ShapeBlocks) -> tuple[StageLayout, np.ndarray]:
    """The shape's `StageLayout` and U (R, S): touched columns per (row block, segment); cached per shape."""
    if "touched" not in blocks.cache:
        stats = blocks.stats
        layout = blocks.layout
        if stats is not None and stats.exact:
            u = stats.touched(layout.row_bounds, layout.segments)
        else:  # uniform: U depends only on (block height, segment width), which take a few values
            heights, at_row = np.unique(np.diff(layout.row_bounds), return_inverse=True)
            widths, at_col = np.unique(np.diff(layout.segments), return_inverse=True)
            small = stats.grouped_nnz(np.concatenate([[0], np.cumsum(heights)]).tolist(),
                                      np.concatenate([[0], np.cumsum(widths)]).tolist())
            u = expected_touched(small, np.concatenate([[0], np.cumsum(widths)]).tolist())[at_row][:, at_col]
        blocks.cache["touched"] = (layout, u)
    return blocks.cache["touched"]


def row_counts(blocks: ShapeBlocks) -> tuple[np.ndarray, np.ndarray]:
    """(P,) rows each rank receives in forward and in backward, over the segments its group handles (cached)."""
    if "sparse_rows" not in blocks.cache:
        blocks.cache["sparse_rows"] = _count_rows(blocks, *touched_rows(blocks))
    return blocks.cache["sparse_rows"]


COVER_EXACT_BLOCKS = 256
"""Up to this many row blocks, ``--comm cover`` is priced by computing every pair's cover (R² matchings, each
over one block of Â); beyond, and for statistics from counts, by the touched rows of ``--comm sparse`` (an
upper bound: a cover is never larger)."""


def cover_row_counts(blocks: ShapeBlocks) -> tuple[np.ndarray, np.ndarray]:
    """(P,) rows each rank receives in forward and in backward under ``--comm cover`` (1D and 1.5D: the module
    table with U[i, j] the cover of the pair "block j sends to block i"; cached)."""
    if "cover_rows" not in blocks.cache:
        parts = cover_parts(blocks)
        blocks.cache["cover_rows"] = (row_counts(blocks) if parts is None
                                      else _count_rows(blocks, blocks.layout, parts[0]))
    return blocks.cache["cover_rows"]


def cover_parts(blocks: ShapeBlocks) -> tuple[np.ndarray, np.ndarray] | None:
    """(K, E): (R, R) each, the covers of every pair and their partial sums' entries (`GraphStats.covers`), or
    None where they are not computed (statistics from counts, more than `COVER_EXACT_BLOCKS` row blocks);
    cached per shape."""
    if "cover_parts" not in blocks.cache:
        stats = blocks.stats
        exact = stats is not None and stats.exact and blocks.shape.sizes[0] <= COVER_EXACT_BLOCKS
        blocks.cache["cover_parts"] = stats.covers(blocks.layout.row_bounds) if exact else None
    return blocks.cache["cover_parts"]


COVER_VALUE_BYTES = 4
"""Bytes of one Â value the cover's set-up sends (float32, as the blocks are built)."""


def cover_setup_terms(blocks: ShapeBlocks) -> list[Term]:
    """The set-up of one ``--comm cover`` SpMM (the module table): three all-to-alls on ``row``, none when R = 1.
    Exact where the covers are computed; elsewhere (`cover_parts` is None) an upper bound: the touched rows of
    ``--comm sparse`` for the covers (a cover is never larger) and every entry of the cuts for the partial sums'
    entries (`GraphStats.grouped_nnz`: counted, or the uniform expectation for statistics from counts)."""
    p, num_rows = blocks.shape.world_size, blocks.shape.sizes[0]
    if num_rows == 1:
        return []
    layout, i = blocks.layout, blocks.coords["row"]
    in_share = layout.group[i] == blocks.groups  # the rank sends for its own block i (1D: always)
    parts = cover_parts(blocks)
    if parts is None:
        bounds = list(layout.row_bounds)
        cuts = blocks.stats.grouped_nnz(bounds, bounds)  # (R, R) entries of block q in column block j
        np.fill_diagonal(cuts, 0)
        entries = np.where(in_share, cuts.sum(axis=0)[i], 0)
        ids, values = np.where(in_share, row_counts(blocks)[1], 0) + entries, entries
    else:
        cover, pre = parts
        ids = np.where(in_share, (cover + pre).sum(axis=0)[i], 0)
        values = np.where(in_share, pre.sum(axis=0)[i], 0)
    headers = 2 * (num_rows - 1)  # each peer's message starts with its cover's two sizes
    once = np.ones(p, dtype=np.int64)
    return [*index_terms(blocks, ids + headers),
            Term("other", "all_to_all", "row", num_rows, once, COVER_VALUE_BYTES * values)]


def _count_rows(blocks: ShapeBlocks, layout: StageLayout, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Forward and backward rows per rank from U (R, S): rows block i needs of segment s."""
    coords = blocks.coords
    group_axis = layout.group_axis
    group = blocks.groups
    num_groups = blocks.shape.size(group_axis) if group_axis else 1  # replicas (1.5D), depth (3D); some may idle
    segments = np.arange(u.shape[1])
    own = u[layout.root, segments]  # (S,) rows the root of each segment would need from itself: never sent
    if num_groups == 1:
        by_group = u.sum(axis=1)[:, None]
    else:  # float64 products of integers below 2^53 are exact, and use BLAS
        onehot = (layout.group[:, None] == np.arange(num_groups)[None, :]).astype(np.float64)  # (S, G)
        by_group = np.rint(u.astype(np.float64) @ onehot).astype(np.int64)
    np.subtract.at(by_group, (layout.root, layout.group), own)
    forward = by_group[coords["row"], group]  # rows block i receives from its group's segments
    sent = u.sum(axis=0) - own  # (S,) rows the root of s gets back in backward
    per_root = np.zeros((u.shape[0], num_groups), dtype=np.int64)
    np.add.at(per_root, (layout.root, layout.group), sent)
    backward = per_root[coords["row"], group]
    return forward, backward


INDEX_BYTES = 8
"""Bytes per index of the set-up exchange (int64, `gridgnn.spmm.row_exchange`)."""


def index_exchange_terms(blocks: ShapeBlocks) -> list[Term]:
    """The set-up of one sparse SpMM (the module table): per rank, two all-to-all calls on ``row``, the
    counts (``8 (R - 1)`` bytes) and the ids its peers need from it; none when R = 1."""
    if blocks.shape.sizes[0] == 1:
        return []
    return index_terms(blocks, row_counts(blocks)[1])


def index_terms(blocks: ShapeBlocks, asked: np.ndarray) -> list[Term]:
    """One exchange of wanted ids on ``row`` (`gridgnn.spmm.row_exchange.exchange_wanted`, phase ``other``):
    per rank the counts (``8 (R - 1)`` bytes) and the ``asked`` (P,) ids its peers need from it."""
    p, num_rows = blocks.shape.world_size, blocks.shape.sizes[0]
    once = np.ones(p, dtype=np.int64)
    return [Term("other", "all_to_all", "row", num_rows, once, np.full(p, INDEX_BYTES * (num_rows - 1))),
            Term("other", "all_to_all", "row", num_rows, once, INDEX_BYTES * asked)]


def sparse_spmm_terms(blocks: ShapeBlocks, width: int, backward: bool, sz: SizeInfo,
                      cached: bool = False) -> list[Term]:
    """Terms of one sparse SpMM half: the dense terms with the X exchange on ``row`` made all-to-alls."""
    p, depth = blocks.shape.world_size, blocks.shape.depth
    moved = ("row", "depth")  # the axes whose dense terms the sparse exchanges replace
    terms = [t for t in spmm_terms(blocks, width, backward=backward, sizes=sz, cached=cached) if t.axis not in moved]
    if depth > 1:
        terms.append(_depth_term(blocks, width, backward, sz))
    num_rows = blocks.shape.sizes[0]
    if num_rows == 1:
        return terms
    phase = "spmm_backward" if backward else "spmm_forward"
    rows = row_counts(blocks)[1 if backward else 0]
    if not blocks.shape.splits_features:
        fw, calls = np.full(p, width, dtype=np.int64), np.ones(p, dtype=np.int64)
    else:
        layout, _ = touched_rows(blocks)
        fw = feature_widths(width, blocks.shape.col_blocks)[blocks.coords["col"]]
        stages = (len(layout.segments) - 1) // blocks.shape.depth  # each depth slice runs its own segments
        calls = np.where(fw > 0, stages, 0).astype(np.int64)
    nbytes = np.where(calls > 0, rows * sz.row_bytes(fw), 0).astype(np.int64)
    return terms + [Term(phase, "all_to_all", "row", num_rows, calls, nbytes)]


def _depth_term(blocks: ShapeBlocks, width: int, backward: bool, sz: SizeInfo) -> Term:
    """3D's depth exchange of one SpMM half (the module table): one all-to-all on ``depth`` per rank whose
    feature block is not empty."""
    d = blocks.shape.depth
    forward_rows, backward_rows = depth_row_counts(blocks)
    rows = backward_rows if backward else forward_rows
    fw = feature_widths(width, blocks.shape.col_blocks)[blocks.coords["col"]]
    active = fw > 0
    phase = "spmm_backward" if backward else "spmm_forward"
    return Term(phase, "all_to_all", "depth", d, active.astype(np.int64),
                np.where(active, rows * sz.row_bytes(fw), 0).astype(np.int64))


def depth_row_counts(blocks: ShapeBlocks) -> tuple[np.ndarray, np.ndarray]:
    """(P,) rows each rank receives in 3D's depth exchange, forward and backward (the module table; cached)."""
    if "depth_rows" not in blocks.cache:
        d = blocks.shape.depth
        layout, stats = blocks.layout, blocks.stats
        sizes = np.diff(np.asarray(layout.segments)).astype(np.int64)  # rows of each sub-block
        if stats is not None and stats.exact:
            v = slice_counts(stats.indptr, stats.indices, layout.segments, d)  # (S, d)
        else:  # every row of a sub-block counted for every slice: the dense rows, an upper bound
            v = np.repeat(sizes[:, None], d, axis=1)
        i, m = blocks.coords["row"], blocks.coords["depth"]
        mine = i * d + m  # the rank's sub-block
        forward = v[mine].sum(axis=1) - v[mine, m]
        block = v.reshape(-1, d, d)  # (row block, sub-block, slice)
        backward = block[i, :, m].sum(axis=1) - v[mine, m]
        blocks.cache["depth_rows"] = (forward.astype(np.int64), backward.astype(np.int64))
    return blocks.cache["depth_rows"]


def cover_spmm_terms(blocks: ShapeBlocks, width: int, backward: bool, sz: SizeInfo) -> list[Term]:
    """Terms of one ``--comm cover`` SpMM half (1D, 1.5D): the dense terms on ``rep`` as they are, and on ``row``
    one all-to-all per rank carrying its pairs' covers (rows of X and partial sums, ``width`` wide)."""
    p, num_rows = blocks.shape.world_size, blocks.shape.sizes[0]
    terms = [t for t in spmm_terms(blocks, width, backward=backward, sizes=sz) if t.axis != "row"]
    if num_rows == 1:
        return terms
    rows = cover_row_counts(blocks)[1 if backward else 0]
    phase = "spmm_backward" if backward else "spmm_forward"
    return terms + [Term(phase, "all_to_all", "row", num_rows, np.ones(p, dtype=np.int64),
                         (rows * sz.row_bytes(width)).astype(np.int64))]


def comm_spmm_terms(blocks: ShapeBlocks, width: int, *, backward: bool, sizes: SizeInfo = FLOAT32,
                    comm: str = "dense", cached: bool = False) -> list[Term]:
    """Terms of one SpMM half in the variant ``comm`` (``dense``: `gridgnn.cost.rank_cost.spmm_terms`;
    ``sparse``; ``cover``, 1D and 1.5D); ``cached``: with ``--cache-panels`` (the Â panels were received at
    set-up)."""
    if comm == "sparse":
        return sparse_spmm_terms(blocks, width, backward, sizes, cached)
    if comm == "cover":
        if blocks.shape.splits_features or blocks.shape.depth > 1:
            raise ValueError(f"--comm cover runs on 1d and 1.5d, not {blocks.shape.algo}")
        return cover_spmm_terms(blocks, width, backward, sizes)
    return spmm_terms(blocks, width, backward=backward, sizes=sizes, cached=cached)
