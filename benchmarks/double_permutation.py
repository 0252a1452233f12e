"""Does Plexus's double random permutation balance 2D blocks better than gridgnn's single one? (issue 36)

2D and 3D split Â into q x q blocks (3D: each block again by depth). gridgnn's ``--reorder random`` renumbers
the vertices with one seeded bijection (`gridgnn.data.bijection`), so rows and columns move alike. Plexus
(Ranjan et al., 2024) permutes rows and columns with two independent permutations, which balances the blocks
of a graph whose structure a single permutation keeps (a dense diagonal: every vertex's self-loop and the
symmetric pairs stay on the diagonal blocks); the price is that a layer's output rows are in the row order and
the next layer's input in the column order, so activations must be re-permuted between layers.

This script measures, for each graph and q, the nnz of the most loaded block over the mean (1.0 is perfect),
for the natural order, the single permutation and the double one (a second seeded bijection for the columns):
the double permutation is worth building only if it balances visibly better than the single one.

    python benchmarks/double_permutation.py --data-root ../shared/datasets \
        --out results/sharded_prepare/double_permutation.md
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

GRAPHS = ("amazon-computers", "coauthor-physics", "rmat:scale=18,edge_factor=16", "rmat:scale=20,edge_factor=16")
GRIDS = (4, 8, 16)
"""q of the q x q grids (P = 16, 64, 256)."""


def block_imbalance(rows: np.ndarray, cols: np.ndarray, n: int, q: int) -> float:
    """The most loaded of the q x q balanced blocks of the entries (rows, cols), over the mean."""
    bounds = np.linspace(0, n, q + 1).round().astype(np.int64)
    bi = np.searchsorted(bounds, rows, side="right") - 1
    bj = np.searchsorted(bounds, cols, side="right") - 1
    counts = np.bincount(bi * q + bj, minlength=q * q)
    return float(counts.max() / counts.mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", default="../shared/datasets")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    import gridgnn
    from gridgnn.data.bijection import random_bijection
    from gridgnn.data.operators import operator_matrix

    rows_out = []
    for name in GRAPHS:
        graph = gridgnn.load_dataset(name, data_root=args.data_root)
        adj = operator_matrix("gcn", graph.adj).tocoo()  # Â with its self-loops, as GCN trains
        n = graph.num_nodes
        single = random_bijection(np.arange(n), n, seed=0)
        second = random_bijection(np.arange(n), n, seed=1)
        for q in GRIDS:
            row = {"graph": name, "q": q, "p": q * q, "entries": int(adj.nnz),
                   "natural": block_imbalance(adj.row, adj.col, n, q),
                   "single": block_imbalance(single[adj.row], single[adj.col], n, q),
                   "double": block_imbalance(single[adj.row], second[adj.col], n, q)}
            rows_out.append(row)
            print(json.dumps(row), flush=True)
    lines = ["# Single against double random permutation: the most loaded 2D block over the mean", "",
             "Command: `python benchmarks/double_permutation.py " + " ".join(sys.argv[1:]) + "`", "",
             "| graph | entries of Â | grid | natural | single (`--reorder random`) | double (Plexus) |",
             "|---|---|---|---|---|---|"]
    for r in rows_out:
        lines.append(f"| {r['graph']} | {r['entries']:,} | {r['q']}x{r['q']} (P = {r['p']}) | {r['natural']:.3f} | "
                     f"{r['single']:.3f} | {r['double']:.3f} |")
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report)
        args.out.with_suffix(".json").write_text(json.dumps(rows_out, indent=1) + "\n")


if __name__ == "__main__":
    main()
