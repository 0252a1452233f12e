"""What a sparse depth exchange over METIS-nested sub-blocks would save on 3D (an estimate for the next step).

Split-3D (`gridgnn.spmm.spmm_3d`) sums each depth slice's partial product with a dense reduce-scatter on
``depth`` (forward) and rebuilds G with a dense all-gather (backward). With ``--cache-panels --comm sparse``
these depth collectives are most of what 3D still moves. A partial product of depth slice l is non-zero only
on the rows of block i that have an entry in the columns of slice l; with the balanced sub-blocks of today
that is 86-93 % of the rows on Amazon Computers and Coauthor Physics, but with sub-blocks that are METIS
parts of each row block (METIS into q, then each part into d) far fewer. This script prices, for a q x q x d
grid:

- today's cached sparse step on a nested METIS-balanced order (`predict_epoch`, whose sub-blocks are balanced
  cuts of each row block: close to the nested parts, which METIS balances within 3 %);
- the same step with its depth collectives replaced by exchanges of only the non-zero rows of the nested
  sub-blocks: forward, rank (i, j, l) receives from every other slice l' the rows of its sub-block S[i][l]
  that touch slice l''s columns; backward, the rows of the other sub-blocks of block i that its slice touches;
  each at the SpMM's feature width on this process column, float32.

It is an estimate, not a measured run: no such exchange exists yet (issue 21, 3D goal).

    python benchmarks/nested_3d_estimate.py --out results/sparse_comm/nested_3d_estimate.md
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from gridgnn.config import TrainConfig
from gridgnn.cost.epoch_model import ModelSpec, layer_steps, predict_epoch
from gridgnn.cost.graph_stats import GraphStats
from gridgnn.cost.terms import feature_widths
from gridgnn.data import metis
from gridgnn.data.registry import load_dataset
from gridgnn.data.reorder import permute, symmetric_pattern
from gridgnn.grid.shape import resolve_grid
from gridgnn.sparse.adjacency import gcn_normalize

DATA = "/work/shared/datasets"


def nested_order(graph, q: int, d: int) -> tuple[np.ndarray, list[int]]:
    """METIS-balanced into q parts, then each part's induced subgraph into d: the order and the q*d bounds."""
    n = graph.num_nodes
    entries = np.diff(gcn_normalize(graph.adj).tocsr().indptr)  # each row's entries of Â, as metis-balanced
    weights = np.stack([np.ones(n, dtype=np.int64), entries], axis=1)
    top = metis.membership(symmetric_pattern(graph.adj), q, weights, method="metis-balanced")
    order, bounds = [], [0]
    for i in range(q):
        members = np.flatnonzero(top == i)
        inner = sp.csr_matrix(graph.adj)[members][:, members]
        sub = metis.membership(symmetric_pattern(inner), d, weights[members], method="metis-balanced")
        for part in range(d):
            order.append(members[sub == part])
            bounds.append(bounds[-1] + len(order[-1]))
    return np.concatenate(order), bounds


def touch_counts(adj: sp.csr_matrix, bounds: list[int], d: int) -> np.ndarray:
    """(q*d, d): rows of each sub-block with an entry in the columns of each depth slice (slice l holds
    sub-block l of every row block)."""
    sub_of = np.repeat(np.arange(len(bounds) - 1), np.diff(bounds))
    slice_of = sub_of % d
    coo = adj.tocoo()
    pairs = np.unique(coo.row.astype(np.int64) * d + slice_of[coo.col])
    counts = np.zeros((len(bounds) - 1, d), dtype=np.int64)
    np.add.at(counts, (sub_of[pairs // d], pairs % d), 1)
    return counts


def estimate(name: str, grid: str, config: TrainConfig) -> dict:
    graph = load_dataset(name, data_root=DATA)
    shape = resolve_grid("3d", int(np.prod([int(x) for x in grid.split("x")])), grid=grid)
    q, _, d = shape.sizes
    order, bounds = nested_order(graph, q, d)
    nested = permute(graph, order)
    nested.meta["reorder_bounds"] = bounds[::d]  # row blocks: groups of d consecutive sub-parts
    stats = GraphStats.from_graph(nested)
    today = predict_epoch(config, stats, shape, comm="sparse", cache_panels=True)
    depth = sum(t.bytes for t in today.terms if t.axis == "depth")
    counts = touch_counts(gcn_normalize(nested.adj).tocsr(), bounds, d)
    spec = ModelSpec.of(config, stats)
    forward = [step.spmm_width for step in layer_steps(spec)]
    backward = [step.spmm_width for step in layer_steps(spec) if step.spmm_backward]
    sparse_depth = np.zeros(shape.world_size, dtype=np.int64)
    for rank in range(shape.world_size):
        i, j, m = np.unravel_index(rank, shape.sizes)
        received = sum(counts[i * d + m, other] for other in range(d) if other != m)  # forward, into S[i][m]
        gathered = sum(counts[i * d + other, m] for other in range(d) if other != m)  # backward, for slice m
        sparse_depth[rank] = 4 * (received * sum(feature_widths(f, q)[j] for f in forward)
                                  + gathered * sum(feature_widths(f, q)[j] for f in backward))
    dense_natural = predict_epoch(config, GraphStats.from_graph(graph), shape, comm="dense").bytes.max()
    projected = today.bytes - depth + sparse_depth
    return {"graph": name, "grid": grid, "dense": int(dense_natural), "today": int(today.bytes.max()),
            "depth": int(depth.max()), "sparse_depth": int(sparse_depth.max()), "projected": int(projected.max())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--grid", default="2x2x4")
    args = parser.parse_args()
    lines = [f"3D {args.grid}, `--comm sparse --cache-panels`, METIS-balanced nested into row blocks and their "
             "depth sub-blocks; GCN 2 layers, hidden 16; bytes per rank per step, max over ranks (model)", "",
             "| graph | dense 3D, natural order | cached sparse today | its depth collectives | sparse depth "
             "(estimate) | projected step | projected / dense | today / dense |", "|---" * 8 + "|"]
    for name in ("amazon-computers", "coauthor-physics"):
        r = estimate(name, args.grid, TrainConfig())
        lines.append(f"| {name} | {r['dense']:,} | {r['today']:,} | {r['depth']:,} | {r['sparse_depth']:,} | "
                     f"{r['projected']:,} | {r['projected'] / r['dense']:.3f} | {r['today'] / r['dense']:.3f} |")
    text = "\n".join(lines) + "\n"
    Path(args.out).write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
