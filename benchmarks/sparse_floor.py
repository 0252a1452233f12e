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

    python benchmarks/sparse_floor.py --out results/sparse_comm/floor.md
    python benchmarks/sparse_floor.py --cover --out results/sparse_comm/cover_floor.md
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

DATA = "/work/shared/datasets"
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
    args = parser.parse_args()
    config = TrainConfig()
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


if __name__ == "__main__":
    main()
