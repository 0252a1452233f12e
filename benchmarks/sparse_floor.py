"""A lower bound on the bytes sparse 1D can move at P processes, whatever the vertex order (issue 21's 1/10 goal).

For a 1D grid whose row blocks hold at most ``(1 + tolerance) n / P`` rows each (the issue's balance goal: the
slowest rank's rows within 10 % of the mean), the busiest rank of a training step receives at least:

- the phases no SpMM variant or order changes: the weight-gradient all-reduce and the loss (1D has no dense
  phase), the same on every rank;
- in each forward SpMM of width f, the rows of X that the row of Â with the most entries touches outside its
  own block: at least ``entries(v) - (1 + tolerance) n / P`` rows, whichever block holds v (a block cannot hold
  more of v's columns than it has rows), times f times the value's bytes.

Divided by dense 1D's busiest rank in natural order (the goal's denominator), this is a floor on the goal's
ratio for every order. Backward is left out of the bound (it only raises the true figure).

That floor holds for post-aggregation only (a receiver multiplies every entry itself). ``--cover`` adds the
floor for a given partition with pre-aggregation allowed (issue 37): for every ordered pair of ranks the minimum
vertex cover of its cut (`gridgnn.sparse.cover`), the exact fewest rows the pair can exchange; the partition is
METIS's 16-way (pymetis defaults, vertices renumbered part by part). Per SpMM half of the model (forward, and
backward on Âᵀ where the model needs it), rows times width times 4 bytes, plus the fixed phases; set against
what post-aggregation (``--comm sparse``) receives on the same partition and dense 1D in natural order.

``--fifteen`` breaks down 1.5D c = 2 with ``--comm cover``, ``--reorder metis-balanced`` and
``--defer-weight-gather`` (the best 1.5D configuration priced) by phase, axis and collective on its busiest
rank, against dense 1.5D in natural order (the 1.5D goal's denominator), with the floor of the replica terms:
every replica holds the whole block row's output, so a replica receives, in each forward all-reduce, the rows
of the other replica's partial sums that are not zero; the owner of the diagonal block touches nearly all of
them, so no row-sparse reduction receives fewer than that count times the width (counted from the graph).

It also gives a floor on the busiest rank for the partition, for every schedule of the 1.5D decomposition
(c = 2 replicas of each block row, each block Â[i, j] multiplied by one replica, both replicas ending each SpMM
with the whole Y[i] and dX[i]): the mean over the P ranks of what the step must move in all (the busiest
receives at least the mean):

- the replica completions: the replica that multiplies block row i's diagonal block has partial sums on
  every row of the block (every vertex has its self-loop), so the other replica receives at least n_i rows in
  each forward SpMM, and one replica receives at least n_i rows of dX[i] in each backward SpMM: n times the
  widths, forward and backward (a schedule multiplying the diagonal block on both replicas, twice the work,
  is outside this bound);
- the row exchanges: for each pair of block rows the minimum vertex cover of its cut, in every SpMM half (the
  cover configuration's own row terms, summed over ranks: exact minima, whichever replica runs the pair, as
  the statistics here are exact);
- the weights' gradients: a value touched by t > 1 block rows has t partial sums, of which t - 1 must travel,
  and 2t processes (both replicas of each block row) read its update, of which 2t - 1 must receive it: 3t - 2
  per value (none where t = 1: both replicas hold the whole gradient and update alike); the feature weights'
  rows from the columns each block row touches, every other weight touched by all R block rows.

    python benchmarks/sparse_floor.py --out results/sparse_comm/floor.md
    python benchmarks/sparse_floor.py --cover --out results/sparse_comm/cover_floor.md
    python benchmarks/sparse_floor.py --fifteen --out results/sparse_comm/cover_15d_floor.md
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from gridgnn.config import TrainConfig
from gridgnn.cost.epoch_model import predict_epoch
from gridgnn.cost.graph_stats import GraphStats
from gridgnn.data.registry import load_dataset
from gridgnn.grid.shape import resolve_grid
from gridgnn.nn.trace import model_spec
from gridgnn.sparse.adjacency import gcn_normalize

DATA = "../shared/datasets"
FIXED_PHASES = ("dense", "weight_grad", "loss", "other")


def floor_row(name: str, p: int, tolerance: float, config: TrainConfig) -> dict:
    """The bound's terms and ratio for ``name`` on a 1D grid of ``p`` (GCN of ``config``)."""
    graph = load_dataset(name, data_root=DATA)
    entries = np.diff(gcn_normalize(graph.adj).tocsr().indptr)
    stats = GraphStats.from_graph(graph)
    shape = resolve_grid("1d", p)
    spec = model_spec(config, stats)
    dense = predict_epoch(spec, stats, shape, comm="dense")
    sparse = predict_epoch(spec, stats, shape, comm="sparse")
    fixed = int(min(sum(sparse.bytes_by_phase[ph] for ph in FIXED_PHASES)))  # equal on every rank on 1D
    widths = [layer.spmm_width for layer in spec.ops.layers]
    most = int(entries.max())
    rows = max(0, most - int(np.floor((1 + tolerance) * graph.num_nodes / p)))
    hub = rows * sum(widths) * 4  # float32 rows of X in the forward SpMMs
    bound = fixed + hub
    return {"graph": name, "p": p, "n": graph.num_nodes, "most_entries": most, "rows_bound": rows,
            "forward_widths": widths, "fixed_bytes": fixed, "hub_bytes": hub, "bound_bytes": bound,
            "dense_bytes": int(dense.bytes.max()), "ratio_bound": bound / int(dense.bytes.max()),
            "fixed_ratio": fixed / int(dense.bytes.max())}


def metis_blocks(adj, p: int):
    """``adj`` (CSR) renumbered part by part of METIS's ``p``-way partition (pymetis defaults, no self-loops),
    and the row blocks' boundaries."""
    import pymetis
    import scipy.sparse as sp

    graph = sp.csr_matrix(adj, copy=True)
    graph.setdiag(0)
    graph.eliminate_zeros()
    _, parts = pymetis.part_graph(p, adjacency=pymetis.CSRAdjacency(graph.indptr, graph.indices))
    parts = np.asarray(parts)
    order = np.argsort(parts, kind="stable")
    bounds = [0, *np.cumsum(np.bincount(parts, minlength=p)).tolist()]
    return sp.csr_matrix(adj)[order][:, order].tocsr(), bounds


def cover_row(name: str, p: int, config: TrainConfig) -> dict:
    """Post-aggregation against the per-pair cover on METIS's partition: rows and bytes of the busiest rank."""
    import time

    from gridgnn.sparse.cover import cover_counts

    graph = load_dataset(name, data_root=DATA)
    adj, bounds = metis_blocks(gcn_normalize(graph.adj).tocsr(), p)
    stats = GraphStats.from_graph(graph)
    shape = resolve_grid("1d", p)
    spec = model_spec(config, stats)
    dense = int(predict_epoch(spec, stats, shape, comm="dense").bytes.max())
    sparse = predict_epoch(spec, stats, shape, comm="sparse")
    fixed = int(min(sum(sparse.bytes_by_phase[ph] for ph in FIXED_PHASES)))
    start = time.perf_counter()
    forward_post, forward_cover = cover_counts(adj, bounds)
    backward_post, backward_cover = cover_counts(adj.T.tocsr(), bounds)
    seconds = time.perf_counter() - start
    post = np.full(p, fixed, dtype=np.int64)
    cover = post.copy()
    for layer in spec.ops.layers:
        for agg in layer.aggregations:
            post += forward_post * agg.width * 4 + (backward_post * agg.width * 4 if agg.backward else 0)
            cover += forward_cover * agg.width * 4 + (backward_cover * agg.width * 4 if agg.backward else 0)
    return {"graph": name, "p": p, "post_rows": int(forward_post.max()), "cover_rows": int(forward_cover.max()),
            "post_bytes": int(post.max()), "cover_bytes": int(cover.max()), "dense_bytes": dense,
            "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--p", type=int, default=16)
    parser.add_argument("--tolerance", type=float, default=0.10, help="rows per block at most (1 + this) n / P")
    parser.add_argument("--cover", action="store_true", help="the per-pair vertex-cover floor on METIS's partition")
    parser.add_argument("--fifteen", action="store_true", help="1.5D cover by phase, with the replica terms' floor")
    args = parser.parse_args()
    config = TrainConfig()
    if args.fifteen:
        write_fifteen(args)
        return
    if args.cover:
        write_cover(args, config)
        return
    lines = [f"Sparse 1D at P = {args.p}, blocks of at most {1 + args.tolerance:.2f} n/P rows: a floor on the "
             "busiest rank's bytes per step, any vertex order (`benchmarks/sparse_floor.py`)", "",
             "| graph | n | most entries in a row of Â | rows it must receive | forward widths | "
             "weight grad + loss B | hub rows B | floor B | dense 1D B (natural) | floor / dense | "
             "fixed phases alone / dense |",
             "|---" * 11 + "|"]
    for name in ("amazon-computers", "coauthor-physics"):
        r = floor_row(name, args.p, args.tolerance, config)
        lines.append(f"| {name} | {r['n']:,} | {r['most_entries']:,} | {r['rows_bound']:,} | "
                     f"{'+'.join(map(str, r['forward_widths']))} | {r['fixed_bytes']:,} | {r['hub_bytes']:,} | "
                     f"{r['bound_bytes']:,} | {r['dense_bytes']:,} | {r['ratio_bound']:.3f} | {r['fixed_ratio']:.3f} |")
    text = "\n".join(lines) + "\n"
    Path(args.out).write_text(text, encoding="utf-8")
    print(text)


def write_cover(args, config: TrainConfig) -> None:
    lines = [f"1D at P = {args.p} on METIS's {args.p}-way partition (pymetis defaults): rows the busiest rank "
             "receives in one forward SpMM, and bytes per step (max over ranks; GCN 2 layers, hidden 16), by "
             "post-aggregation (`--comm sparse`) and by the per-pair minimum vertex cover (the exact floor for "
             "this partition; `benchmarks/sparse_floor.py --cover`)", "",
             "| graph | post rows | cover rows | cover / post rows | post B | cover B | dense 1D B (natural) | "
             "post / dense | cover / dense | cover set-up s |", "|---" * 10 + "|"]
    for name in ("amazon-computers", "coauthor-physics"):
        r = cover_row(name, args.p, config)
        lines.append(f"| {name} | {r['post_rows']:,} | {r['cover_rows']:,} | {r['cover_rows'] / r['post_rows']:.3f} | "
                     f"{r['post_bytes']:,} | {r['cover_bytes']:,} | {r['dense_bytes']:,} | "
                     f"{r['post_bytes'] / r['dense_bytes']:.3f} | {r['cover_bytes'] / r['dense_bytes']:.3f} | "
                     f"{r['seconds']:.2f} |")
    text = "\n".join(lines) + "\n"
    Path(args.out).write_text(text, encoding="utf-8")
    print(text)


def fifteen_rows(name: str, p: int, order: str = "metis-balanced") -> tuple[list[tuple], dict]:
    """The busiest rank's bytes of 1.5D (c = 2) cover in ``order`` by (phase, axis, op), and the floors."""
    from gridgnn.cost.rank_cost import shape_blocks
    from gridgnn.data.reorder import reorder_graph

    base = load_dataset(name, data_root=DATA)
    shape = resolve_grid("1.5d", p, replication=2)
    ordered = reorder_graph(base, order, shape.sizes[0])
    stats, natural = GraphStats.from_graph(ordered), GraphStats.from_graph(base)
    dense = predict_epoch(model_spec(TrainConfig(), natural), natural, shape, comm="dense")
    cover = predict_epoch(model_spec(TrainConfig(defer_weight_gather=True), stats), stats, shape, comm="cover")
    busiest = int(np.argmax(cover.bytes))
    parts: dict[tuple, int] = {}
    for term in cover.terms:
        key = (term.phase, term.axis, term.op)
        parts[key] = parts.get(key, 0) + int(term.bytes[busiest])
    blocks = shape_blocks(shape, stats)
    bounds = np.asarray(blocks.layout.row_bounds)
    indptr, indices = np.asarray(stats.indptr), np.asarray(stats.indices)
    row_of = np.repeat(np.arange(stats.num_nodes), np.diff(indptr))
    replica_of = blocks.layout.group[np.searchsorted(bounds, indices, side="right") - 1]
    needed = 0  # the most rows of one replica's partial sums (of a block row) that are not zero
    for i in range(len(bounds) - 1):
        inside = (row_of >= bounds[i]) & (row_of < bounds[i + 1])
        for k in range(2):
            needed = max(needed, np.unique(row_of[inside & (replica_of == k)]).size)
    widths = sum(layer.spmm_width for layer in cover.spec.ops.layers)
    floor = {"rows": needed, "block_rows": int(np.diff(bounds).max()), "forward_bytes": needed * widths * 4,
             "dense": int(dense.bytes.max()), "cover": int(cover.bytes.max()), "busiest": busiest}
    floor.update(mean_floor(cover, stats, ordered, shape))
    return sorted(parts.items(), key=lambda kv: -kv[1]), floor


def mean_floor(cover, stats: GraphStats, ordered, shape) -> dict:
    """The floor on the busiest rank of any 1.5D c = 2 schedule of this partition (module docstring): each part's
    total bytes over ranks, and their sum divided by P."""
    import scipy.sparse as sp

    from gridgnn.sparse.cut import block_row_columns

    p, c, n = shape.world_size, shape.replication, stats.num_nodes
    ops = cover.spec.ops
    forward = sum(op.width for layer in ops.layers for op in layer.aggregations)
    backward = sum(op.width for layer in ops.layers for op in layer.aggregations if op.backward)
    rows = sum(int(t.bytes.sum()) for t in cover.terms if t.axis == "row" and t.phase.startswith("spmm"))
    features = ordered.features
    features = features.tocsr() if sp.issparse(features) else sp.csr_matrix(np.asarray(features))
    touched = block_row_columns(features.indptr, features.indices, list(ordered.meta["reorder_bounds"]),
                                ordered.num_features)
    times = np.bincount(np.concatenate(touched), minlength=ordered.num_features)
    times = times[times > 1]  # a column one block row touches: its replicas update it alike, nothing moves
    feature_width = sum(ops.parameters[k][1] for k in ops.feature_weights)
    rest = ops.num_parameters - sum(int(np.prod(ops.parameters[k])) for k in ops.feature_weights)
    blocks = shape.sizes[0]  # every block row touches every value of the other weights
    parts = {"replica_forward": n * forward * 4, "replica_backward": n * backward * 4, "row_exchange": rows,
             "feature_weights": int(((times - 1) + (c * times - 1)).sum()) * feature_width * 4,
             "other_weights": rest * ((blocks - 1) + (c * blocks - 1)) * 4}
    return {"mean_parts": parts, "mean_floor": sum(parts.values()) // p}


def write_fifteen(args) -> None:
    lines = [f"1.5D c = 2 at P = {args.p}, `--comm cover --reorder metis-balanced --defer-weight-gather` (GCN 2 "
             "layers, hidden 16): the busiest rank's bytes per step by phase, axis and collective, as fractions of "
             "dense 1.5D in natural order (`benchmarks/sparse_floor.py --fifteen`)", ""]
    for name in ("amazon-computers", "coauthor-physics"):
        parts, floor = fifteen_rows(name, args.p)
        lines += [f"## {name}: cover {floor['cover']:,} B against dense {floor['dense']:,} B = "
                  f"{floor['cover'] / floor['dense']:.3f} (busiest rank {floor['busiest']})", "",
                  "| phase | axis | collective | bytes | of dense 1.5D |", "|---|---|---|---|---|"]
        lines += [f"| {ph} | {axis} | {op} | {b:,} | {b / floor['dense']:.3f} |" for (ph, axis, op), b in parts if b]
        lines += ["", f"Replica terms' floor: one replica's partial sums of a block row are non-zero on up to "
                  f"{floor['rows']:,} of its {floor['block_rows']:,} rows, so each forward all-reduce receives at "
                  f"least {floor['forward_bytes']:,} B with any row-sparse reduction "
                  f"({floor['forward_bytes'] / floor['dense']:.3f} of dense); the dense all-reduce already moves "
                  "about that.", "",
                  "Floor on the busiest rank for this partition, every schedule of the 1.5D c = 2 decomposition "
                  f"(each block multiplied by one replica; the mean over "
                  f"{args.p} ranks of what must move): {floor['mean_floor']:,} B = "
                  f"{floor['mean_floor'] / floor['dense']:.3f} of dense 1.5D.", "",
                  "| part (all ranks together) | bytes | per rank, of dense 1.5D |", "|---|---|---|"]
        lines += [f"| {part.replace('_', ' ')} | {b:,} | {b / args.p / floor['dense']:.3f} |"
                  for part, b in floor["mean_parts"].items()]
        lines += ["", "The other METIS-family orders (same model, configuration and floor):", "",
                  "| order | cover, busiest rank / dense 1.5D | floor / dense 1.5D |", "|---|---|---|",
                  f"| metis-balanced | {floor['cover'] / floor['dense']:.3f} | "
                  f"{floor['mean_floor'] / floor['dense']:.3f} |"]
        for order in ("metis", "metis-nnz"):
            other = fifteen_rows(name, args.p, order)[1]
            lines.append(f"| {order} | {other['cover'] / other['dense']:.3f} | "
                         f"{other['mean_floor'] / other['dense']:.3f} |")
        lines += [""]
    text = "\n".join(lines) + "\n"
    Path(args.out).write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
