"""METIS's edge-cut objective against its communication-volume objective, priced in what 1D pays (issue 37,
item 3).

METIS minimizes the entries cut by default; 1D sparse communication pays the rows each block touches outside
itself (the communication volume), and ``--comm cover`` each pair's minimum vertex cover. For each graph and
P, vertex-balanced METIS k-way (pymetis, every option default but ``objtype``; k-way even at 8 parts or fewer,
where recursive bisection, pymetis's default there, has no volume objective) with ``ObjType.CUT`` and
``ObjType.VOL``, the parts laid out one after another and the row blocks following them, as ``--reorder
metis`` trains; then per objective: METIS seconds, the largest block's rows and Â entries over the mean, the
entries cut, the total communication volume (Σ over blocks of the remote rows they touch), and the busiest
rank's bytes per training step of 1D ``--comm sparse`` and ``--comm cover`` (the cost model's, GCN 2 layers,
hidden 16, float32: the bytes the tests hold equal to measured ones).

    python benchmarks/partition_objective.py --out results/sparse_comm/partition_objective.md
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from gridgnn.config import TrainConfig
from gridgnn.cost.epoch_model import predict_epoch
from gridgnn.cost.graph_stats import GraphStats
from gridgnn.data.registry import load_dataset
from gridgnn.data.reorder import nnz_imbalance, row_imbalance, symmetric_pattern
from gridgnn.grid.shape import resolve_grid
from gridgnn.nn.trace import model_spec
from gridgnn.sparse.adjacency import gcn_normalize

DATA = Path(__file__).resolve().parents[2] / "shared" / "datasets"
GRAPHS = {"amazon-computers": "amazon-computers", "coauthor-physics": "coauthor-physics",
          "ca-AstroPh": f"{DATA}/suitesparse-mtx/ca-AstroPh.mtx", "rmat-17": "rmat:scale=17"}


def metis(sym: sp.csr_matrix, parts: int, objective: str) -> tuple[np.ndarray, float]:
    """Vertex-balanced METIS membership with ``objective`` (``cut`` or ``vol``) and its seconds."""
    import pymetis

    options = pymetis.Options(objtype=pymetis.ObjType.VOL if objective == "vol" else pymetis.ObjType.CUT)
    start = time.perf_counter()
    _, membership = pymetis.part_graph(parts, adjacency=pymetis.CSRAdjacency(sym.indptr, sym.indices),
                                       options=options, recursive=False)  # k-way: bisection has no VOL
    return np.asarray(membership, dtype=np.int64), time.perf_counter() - start


def figures(name: str, graph, adj: sp.csr_matrix, parts: int, objective: str) -> dict:
    """One row of the table: ``adj`` is Â (self-loops included); the graph in METIS's order is priced."""
    membership, seconds = metis(symmetric_pattern(adj), parts, objective)
    return {"objective": objective, "metis_s": seconds, **priced(name, graph, adj, parts, membership)}


def priced(name: str, graph, adj: sp.csr_matrix, parts: int, membership: np.ndarray) -> dict:
    """The graph in the order of ``membership`` (parts one after another, row blocks following them): balance,
    entries cut, communication volume and the busiest rank's 1D bytes per step (dense, sparse, cover)."""
    order = np.argsort(membership, kind="stable")
    ordered = adj[order][:, order].tocsr()
    bounds = [0, *np.cumsum(np.bincount(membership, minlength=parts)).tolist()]
    col_block = np.searchsorted(np.asarray(bounds), ordered.indices, side="right") - 1
    row_block = np.repeat(np.repeat(np.arange(parts), np.diff(bounds)), np.diff(ordered.indptr))
    volume = sum(np.unique(ordered.indices[ordered.indptr[a]:ordered.indptr[b]][col_block[ordered.indptr[a]:
                                                                                          ordered.indptr[b]] != k]).size
                 for k, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)))
    stats = GraphStats(name, graph.num_nodes, ordered.nnz, graph.num_features, graph.num_classes, None,
                       ordered.indptr, ordered.indices, parts=tuple(bounds))
    shape = resolve_grid("1d", parts)
    spec = model_spec(TrainConfig(), stats)
    by_comm = {comm: int(predict_epoch(spec, stats, shape, comm=comm).bytes.max())
               for comm in ("dense", "sparse", "cover")}
    return {"graph": name, "parts": parts,
            "rows_max_over_mean": row_imbalance(graph.num_nodes, parts, bounds),
            "nnz_max_over_mean": nnz_imbalance(ordered, parts, bounds),
            "cut_entries": int((row_block != col_block).sum()), "volume_rows": int(volume), **by_comm}


def main(argv: list[str] | None = None) -> list[dict]:
    """Run the comparison (``argv``: the command line's arguments) and return its rows."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--parts", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--graphs", nargs="+", default=list(GRAPHS), help="names of GRAPHS, or dataset specs")
    args = parser.parse_args(argv)
    rows = []
    for name in args.graphs:
        graph = load_dataset(GRAPHS.get(name, name), data_root=str(DATA))
        adj = gcn_normalize(graph.adj).tocsr()
        for parts in args.parts:
            for objective in ("cut", "vol"):
                rows.append(figures(name, graph, adj, parts, objective))
                r = rows[-1]
                print(f"{name} P={parts} {objective}: {r['metis_s']:.2f} s, cut {r['cut_entries']:,}, volume "
                      f"{r['volume_rows']:,}, sparse {r['sparse']:,} B, cover {r['cover']:,} B", flush=True)
    lines = ["# METIS edge-cut against communication-volume objective, priced in 1D bytes", "",
             "Vertex-balanced METIS (pymetis defaults but `objtype`), row blocks following the parts; bytes: the "
             "busiest rank per training step, GCN 2 layers, hidden 16 (the cost model's, equal to measured). "
             "Command: `python benchmarks/partition_objective.py --out results/sparse_comm/partition_objective.md`.",
             "", "| graph | P | objective | METIS s | rows max/mean | nnz max/mean | entries cut | volume (rows) | "
             "dense 1D B | sparse 1D B | cover 1D B |", "|---" * 11 + "|"]
    for r in rows:
        lines.append(f"| {r['graph']} | {r['parts']} | {r['objective']} | {r['metis_s']:.2f} | "
                     f"{r['rows_max_over_mean']:.3f} | {r['nnz_max_over_mean']:.3f} | {r['cut_entries']:,} | "
                     f"{r['volume_rows']:,} | {r['dense']:,} | {r['sparse']:,} | {r['cover']:,} |")
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return rows


if __name__ == "__main__":
    main()
