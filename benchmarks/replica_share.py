"""Would another replica share close 1.5D's gap to its floor under ``--comm cover``? (issue 37)

1.5D gives column block j to replica ``j mod c``: that replica's process of block row j receives every pair's
backward rows of block j (the transposed cover exchange) and no replica broadcast, while the forward rows of
block row i split over the replicas by their shares. This script counts, for c = 2 at P = 16 (8 row blocks in
a METIS-family order), each process's rows per SpMM: forward cover rows + backward cover rows + the replica
terms (the forward all-reduce, about n_i rows on every replica; the backward broadcast, n_i rows on the
replica that does not own block i). It compares the busiest process under ``j mod 2`` with the best of all
2^7 assignments of blocks to the two replicas (block 0 fixed to replica 0). The covers are
`gridgnn.sparse.cover.pair_matrices` on the reordered graph (the rows each pair exchanges).

    python benchmarks/replica_share.py --data-root ../shared/datasets \
        --graphs amazon-computers:metis-balanced amazon-computers:metis coauthor-physics:metis \
        --out results/sparse_comm/replica_share.md
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import numpy as np

from gridgnn.data.registry import load_dataset
from gridgnn.data.reorder import reorder_graph
from gridgnn.sparse.cover import pair_matrices

BLOCKS, REPLICAS = 8, 2


def process_rows(cover: np.ndarray, heights: np.ndarray, share: tuple[int, ...]) -> np.ndarray:
    """(blocks, replicas): rows process (i, k) receives in one forward and one backward SpMM (module docstring);
    ``cover[i, j]``: the rows the pair "block j sends to block i" exchanges; ``share[j]``: block j's replica."""
    rows = np.zeros((BLOCKS, REPLICAS))
    for i, k in itertools.product(range(BLOCKS), range(REPLICAS)):
        forward = sum(cover[i, j] for j in range(BLOCKS) if j != i and share[j] == k)
        backward = cover[:, i].sum() - cover[i, i] if share[i] == k else 0
        replicas = heights[i] + (heights[i] if share[i] != k else 0)
        rows[i, k] = forward + backward + replicas
    return rows


def measure(data_root: str, name: str, order: str) -> dict:
    graph = reorder_graph(load_dataset(name, data_root=data_root), order, BLOCKS)
    bounds = list(graph.meta["reorder_bounds"])
    _, cover = pair_matrices(graph.adj, bounds)
    heights = np.diff(bounds)
    modulo = tuple(j % REPLICAS for j in range(BLOCKS))
    today = process_rows(cover, heights, modulo)
    best, share = min((process_rows(cover, heights, s).max(), s)
                      for s in itertools.product(range(REPLICAS), repeat=BLOCKS) if s[0] == 0)
    return {"graph": name, "order": order, "sent": cover.sum(axis=0).tolist(), "today": float(today.max()),
            "mean": float(today.mean()), "best": float(best), "share": share}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", required=True)
    parser.add_argument("--graphs", nargs="+", default=["amazon-computers:metis-balanced"],
                        help="NAME:ORDER pairs")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    lines = ["# 1.5D c = 2 under `--comm cover`, P = 16: the busiest process's rows per SpMM by replica share", "",
             "(`benchmarks/replica_share.py`; rows: forward and backward cover rows plus the replica terms)", "",
             "| graph | order | rows each block sends (its backward) | busiest, j mod 2 | mean | busiest, best share "
             "| best share | best / today |", "|---|---|---|---|---|---|---|---|"]
    for entry in args.graphs:
        name, order = entry.split(":")
        r = measure(args.data_root, name, order)
        lines.append(f"| {name} | {order} | {r['sent']} | {r['today']:,.0f} | {r['mean']:,.0f} | {r['best']:,.0f} "
                     f"| {r['share']} | {r['best'] / r['today']:.3f} |")
        print(lines[-1], flush=True)
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
