"""What METIS's balance and gridgnn's block boundaries do to the cut and the work per rank (`--reorder metis`).

For each graph and number of parts K, METIS k-way on the symmetrized pattern, the parts laid out one after
another, then four ways to cut the reordered graph into K row blocks:

- ``vertices/parts``: vertex-balanced METIS (what ``--reorder metis`` runs), blocks = the parts (what the
  grid now cuts, `gridgnn.cost.stages`);
- ``vertices/balanced``: the same order, blocks of equal size (what the grid cut before the blocks followed
  the parts);
- ``nnz/parts``: METIS with each vertex weighted by its row of Â (stored entries + the self-loop), so parts
  hold equal non-zeros; blocks = the parts (``--reorder metis-nnz``);
- ``both/parts``: METIS with both weights at once (multi-constraint: equal vertices and equal non-zeros;
  ``--reorder metis-balanced``); blocks = the parts;
- ``none/balanced``: the natural order, equal blocks (the baseline);
- ``vertices/merged``: vertex-balanced METIS into 4K parts, every 4 consecutive parts one block (what a folder
  prepared with ``--parts 4K`` gives a grid of K row blocks).

Columns: the METIS seconds, rows and Â non-zeros of the largest block over the mean, the stored entries of Â
outside the diagonal blocks (the cut the grid sees), and the most remote rows any block touches (what its
rank receives per 1D sparse SpMM, in rows) over those of dense 1D (n minus the block).

    python benchmarks/metis_balance.py --out results/sparse_comm/metis_balance.csv
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from gridgnn.data.metis import membership
from gridgnn.data.registry import load_dataset
from gridgnn.data.reorder import nnz_imbalance, row_imbalance, symmetric_pattern
from gridgnn.partition import block_bounds
from gridgnn.sparse.adjacency import add_self_loops

DATA = Path(__file__).resolve().parents[2] / "shared" / "datasets"
GRAPHS = {"amazon-computers": "amazon-computers", "coauthor-physics": "coauthor-physics",
          "ca-AstroPh": f"{DATA}/suitesparse-mtx/ca-AstroPh.mtx"}


def metis_parts(sym: sp.csr_matrix, parts: int, weights: np.ndarray | None) -> np.ndarray:
    """METIS k-way membership of every vertex (``weights``: positive ints, (n,) or (n, ncon), or None), as
    ``--reorder metis*`` runs it."""
    return membership(sym, parts, weights)


def vertex_weights(adj: sp.csr_matrix, weights: str) -> np.ndarray | None:
    """The METIS weights of ``--reorder metis`` (None), ``metis-nnz`` (Â's row entries) or
    ``metis-balanced`` (both, one column each); ``adj`` is Â's pattern (self-loops included)."""
    entries = np.diff(adj.indptr).astype(np.int64)
    return {"vertices": None, "nnz": entries, "both": np.stack([np.ones_like(entries), entries], axis=1)}[weights]


def block_figures(adj: sp.csr_matrix, bounds: list[int]) -> dict:
    """Row and nnz imbalance, the cut and the busiest block's remote rows of ``adj`` cut at ``bounds``."""
    bounds_array = np.asarray(bounds)
    rows = np.diff(bounds_array)
    row_block = np.repeat(np.arange(len(rows)), rows)
    entry_block = np.repeat(row_block, np.diff(adj.indptr))
    col_block = np.searchsorted(bounds_array, adj.indices, side="right") - 1
    remote = [np.unique(adj.indices[adj.indptr[a]:adj.indptr[b]][col_block[adj.indptr[a]:adj.indptr[b]] != k]).size
              for k, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True))]
    busiest = int(np.argmax(remote))
    return {"rows_max_over_mean": round(row_imbalance(adj.shape[0], len(rows), bounds), 3),
            "nnz_max_over_mean": round(nnz_imbalance(adj, len(rows), bounds), 3),
            "cut_entries": int((entry_block != col_block).sum()), "max_remote_rows": int(remote[busiest]),
            "remote_over_dense_1d": round(remote[busiest] / (adj.shape[0] - rows[busiest]), 3)}


def rows_for(name: str, adj: sp.csr_matrix, parts: int) -> list[dict]:
    n, sym = adj.shape[0], symmetric_pattern(adj)
    out = [{"graph": name, "parts": parts, "weights": "none", "blocks": "balanced", "metis_s": 0.0,
            **block_figures(adj, block_bounds(n, parts))}]
    for weights in ("vertices", "nnz", "both"):
        start = time.perf_counter()
        parts_of = metis_parts(sym, parts, vertex_weights(adj, weights))
        seconds = round(time.perf_counter() - start, 3)
        order = np.argsort(parts_of, kind="stable")
        reordered = adj[order][:, order].tocsr()
        parts_bounds = [0, *np.cumsum(np.bincount(parts_of, minlength=parts)).tolist()]
        cuts = {"parts": parts_bounds, "balanced": block_bounds(n, parts)} if weights == "vertices" \
            else {"parts": parts_bounds}
        out += [{"graph": name, "parts": parts, "weights": weights, "blocks": blocks, "metis_s": seconds,
                 **block_figures(reordered, bounds)} for blocks, bounds in cuts.items()]
    if 4 * parts <= n:
        start = time.perf_counter()
        parts_of = metis_parts(sym, 4 * parts, None)
        seconds = round(time.perf_counter() - start, 3)
        order = np.argsort(parts_of, kind="stable")
        fine = [0, *np.cumsum(np.bincount(parts_of, minlength=4 * parts)).tolist()]
        out.append({"graph": name, "parts": parts, "weights": "vertices", "blocks": "merged", "metis_s": seconds,
                    **block_figures(adj[order][:, order].tocsr(), fine[::4])})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--parts", type=int, nargs="+", default=[4, 16, 64])
    args = parser.parse_args()
    table = []
    for name, source in GRAPHS.items():
        graph = load_dataset(source, data_root=str(DATA))
        adj = add_self_loops((sp.csr_matrix(graph.adj) != 0).astype(np.int8), dtype=np.int8)  # Â's pattern
        for parts in args.parts:
            table += rows_for(name, adj, parts)
            print(*(f"{k}={v}" for k, v in table[-1].items()))
    with open(args.out, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(table)


if __name__ == "__main__":
    main()
