"""Sparse vs dense SpMM communication, with vertex reordering: exact model at large P, measured runs at small P.

For each graph (Amazon Computers, Coauthor Physics, SuiteSparse ca-AstroPh with placeholder features, an R-MAT
2^17 and a random geometric graph in the unit square, a mesh-like graph), each reordering (none, random,
rcm, metis) and each P:

- model (exact, from the graph's structure; measured = modelled is what the tests check): every algorithm
  (1d; 1.5d c = 2; 2d and 3d on their default grids) x {dense, sparse}: bytes per rank per training step (max
  and mean over ranks, all phases and the SpMM phases alone), calls, the reordering's seconds and the non-zero
  and row imbalance (max/mean per row block), at ``--model-p``;
- measured (``--measure-p``): a few training steps on P forked gloo workers (1 thread each) for 1d and 2d x
  {dense, sparse} x {none, metis}: median step time, set-up seconds (reordering, blocks, index exchange),
  measured bytes (checked equal to the model).

    python benchmarks/sparse_comm.py --out results/sparse_comm            # ~20 min on 2 busy cores
    python benchmarks/sparse_comm.py --tiny --out /tmp/sparse_comm        # seconds

Writes ``model.csv``, ``measured.csv``, ``goals.md`` (the issue's goals, met or not, with figures) and
``command.txt``.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from gridgnn.config import TrainConfig
from gridgnn.cost.epoch_model import predict_epoch
from gridgnn.cost.graph_stats import GraphStats
from gridgnn.data.graph import Graph
from gridgnn.data.registry import load_dataset
from gridgnn.data.reorder import REORDERS, reorder_graph
from gridgnn.data.transforms import gcn_normalize
from gridgnn.errors import ConfigError
from gridgnn.grid.shape import resolve_grid
from gridgnn.launch.spawn import run_workers
from gridgnn.partition import block_bounds

DATA = "/work/shared/datasets"
SAR_KIB = {("amazon-computers", 2): 562, ("amazon-computers", 4): 867}
"""SAR's measured KiB received per rank per epoch (issue 21, same GCN, METIS partition)."""


def mesh_graph(n: int = 40_000, degree: float = 8.0, seed: int = 0) -> Graph:
    """A random geometric graph in the unit square (points in random order: locality only after reordering)."""
    from scipy.spatial import cKDTree

    rng = np.random.default_rng(seed)
    points = rng.random((n, 2))
    pairs = cKDTree(points).query_pairs(np.sqrt(degree / (np.pi * n)), output_type="ndarray")
    adj = sp.coo_matrix((np.ones(2 * len(pairs), np.float32), (np.r_[pairs[:, 0], pairs[:, 1]],
                                                                np.r_[pairs[:, 1], pairs[:, 0]])), shape=(n, n))
    labels = (points[:, 0] > 0.5).astype(np.int64) * 2 + (points[:, 1] > 0.5)
    split = rng.random(n)
    return Graph(adj.tocsr(), rng.standard_normal((n, 16)).astype(np.float32), labels, split < 0.6,
                 (split >= 0.6) & (split < 0.8), split >= 0.8, 4, name="rgg-40k")


def load_graphs(tiny: bool) -> dict[str, Graph]:
    if tiny:
        return {"csbm": load_dataset("csbm:nodes=400,classes=4,features=8"), "rgg": mesh_graph(2000)}
    return {
        "amazon-computers": load_dataset("amazon-computers", data_root=DATA),
        "coauthor-physics": load_dataset("coauthor-physics", data_root=DATA),
        "ca-AstroPh": load_dataset(f"{DATA}/suitesparse-mtx/ca-AstroPh.mtx"),
        "rmat-17": load_dataset("rmat:scale=17,edge_factor=8,features=32,classes=8"),
        "rgg-40k": mesh_graph(),
    }


def grids(p: int) -> list[tuple[str, dict]]:
    """(algo, resolve_grid kwargs) valid on p processes: 1d, 1.5d c=2, 2d and 3d default grids."""
    out = [("1d", {})]
    if p % 2 == 0 and p >= 4:
        out.append(("1.5d", {"replication": 2}))
    out.append(("2d", {}))
    try:
        resolve_grid("3d", p)
        out.append(("3d", {}))
    except ConfigError:
        pass
    return out


def imbalance(graph: Graph, parts: int) -> tuple[float, float]:
    """(nnz, rows) max/mean per row block of ``block_bounds(n, parts)`` (Â's entries)."""
    adj = gcn_normalize(graph.adj)
    bounds = np.asarray(block_bounds(graph.num_nodes, parts))
    nnz = np.diff(adj.indptr[bounds])
    rows = np.diff(bounds)
    return float(nnz.max() / nnz.mean()), float(rows.max() / rows.mean())


class Orders:
    """Reordered graphs, cached per (method, parts); METIS's parts are the grid's row blocks."""

    def __init__(self, graph: Graph):
        self.graph, self.cache = graph, {}

    def get(self, method: str, parts: int) -> Graph:
        key = (method, parts if method == "metis" else 0)
        if key not in self.cache:
            self.cache[key] = reorder_graph(self.graph, method, parts)
        return self.cache[key]


def model_rows(name: str, graph: Graph, ps: list[int]) -> list[dict]:
    orders, rows = Orders(graph), []
    config = TrainConfig()
    for p in ps:
        for algo, kw in grids(p):
            shape = resolve_grid(algo, p, **kw)
            parts = shape.sizes[0]
            for method in REORDERS:
                g = orders.get(method, parts)
                stats = GraphStats.from_graph(g)
                nnz_imb, row_imb = imbalance(g, parts)
                for comm in ("dense", "sparse"):
                    pred = predict_epoch(config, stats, shape, comm=comm)
                    spmm = pred.bytes_by_phase["spmm_forward"] + pred.bytes_by_phase["spmm_backward"]
                    rows.append({"graph": name, "p": p, "algo": algo, "grid": shape.label(), "reorder": method,
                                 "comm": comm, "max_bytes": int(pred.bytes.max()),
                                 "mean_bytes": float(pred.bytes.mean()), "max_spmm_bytes": int(spmm.max()),
                                 "max_calls": int(pred.calls.max()),
                                 "reorder_s": round(float(g.meta.get("reorder_seconds", 0.0)), 4),
                                 "nnz_imbalance": round(nnz_imb, 4), "row_imbalance": round(row_imb, 4)})
            print(f"model  {name} P={p} {algo} done", flush=True)
    return rows


def measured_worker(rank: int, world: int, kwargs: dict, graph: Graph) -> dict:
    from gridgnn.train.run_distributed import train_on_grid

    config = TrainConfig(**kwargs)
    start = time.perf_counter()
    trained = train_on_grid(config, graph)
    total = time.perf_counter() - start
    if rank != 0:
        return {}
    times = [r.time_s for r in trained.result.epochs]
    comm = trained.comm[-1]
    return {"step_s": statistics.median(times[1:] if len(times) > 1 else times),
            "setup_s": max(s["spmm_setup_s"] for s in trained.spmm_setup),
            "index_exchange_bytes": max(s["index_exchange_bytes"] for s in trained.spmm_setup),
            "reorder_s": trained.reorder_meta.get("reorder_seconds", 0.0), "max_bytes": max(comm["bytes"]),
            "bytes": comm["bytes"], "total_s": total}


def measured_rows(name: str, graph: Graph, ps: list[int], epochs: int) -> list[dict]:
    rows = []
    for p in ps:
        for algo in ("1d", "2d"):
            shape = resolve_grid(algo, p)
            for method in ("none", "metis"):
                g = reorder_graph(graph, method, shape.sizes[0])
                stats = GraphStats.from_graph(g)
                for comm in ("dense", "sparse"):
                    kwargs = {"dataset": name, "algo": algo, "nprocs": p, "epochs": epochs, "comm": comm,
                              "reorder": method, "quiet": True}
                    out = run_workers(measured_worker, p, kwargs, g, timeout_s=1800)[0]
                    predicted = predict_epoch(TrainConfig(**kwargs), stats, shape, comm=comm).bytes.tolist()
                    rows.append({"graph": name, "p": p, "algo": algo, "reorder": method, "comm": comm,
                                 "step_s": round(out["step_s"], 4), "setup_s": round(out["setup_s"], 4),
                                 "reorder_s": round(float(g.meta.get("reorder_seconds", 0.0)), 4),
                                 "index_exchange_bytes": out["index_exchange_bytes"],
                                 "max_bytes": out["max_bytes"], "model_equal": out["bytes"] == predicted})
                    print(f"run    {name} P={p} {algo} {method} {comm}: {rows[-1]}", flush=True)
    return rows


def _find(rows, **want):
    hits = [r for r in rows if all(r[k] == v for k, v in want.items())]
    return hits[0] if hits else None


def goals(model: list[dict], measured: list[dict]) -> list[str]:
    """The issue's goals as markdown lines: met / not met, with the figures."""
    lines = ["| goal | graph | figures | met |", "|---|---|---|---|"]

    def ratio_line(goal, graph, algo, p, limit):
        sparse = _find(model, graph=graph, algo=algo, p=p, reorder="metis", comm="sparse")
        dense = _find(model, graph=graph, algo=algo, p=p, reorder="none", comm="dense")
        if sparse is None or dense is None:
            return
        r = sparse["max_bytes"] / dense["max_bytes"]
        rs = sparse["max_spmm_bytes"] / max(dense["max_spmm_bytes"], 1)
        lines.append(f"| {goal} | {graph} | all phases {r:.3f} ({sparse['max_bytes']:,} / {dense['max_bytes']:,} B), "
                     f"SpMM phases {rs:.3f} | {'met' if r <= limit else 'not met'} |")

    for graph in ("amazon-computers", "coauthor-physics"):
        ratio_line("sparse 1D METIS ≤ 1/10 dense, P=16", graph, "1d", 16, 0.1)
        ratio_line("sparse 2D METIS ≤ 1/3 dense, P=16", graph, "2d", 16, 1 / 3)
        ratio_line("sparse 3D METIS ≤ 1/3 dense, P=16", graph, "3d", 16, 1 / 3)
    ratio_line("mesh: sparse 1D METIS ≤ 1/50 dense, P=64 (model)", "rgg-40k", "1d", 64, 1 / 50)
    for (graph, p), kib in SAR_KIB.items():
        best = min((r for r in model if r["graph"] == graph and r["p"] == p and r["comm"] == "sparse"),
                   key=lambda r: r["max_bytes"], default=None)
        if best is not None:
            mine = best["max_bytes"] / 1024
            lines.append(f"| fewer bytes than SAR ({kib} KiB/rank/epoch) | {graph} P={p} | {best['algo']} "
                         f"{best['reorder']} sparse {mine:.0f} KiB, nnz imbalance {best['nnz_imbalance']:.3f}, "
                         f"rows {best['row_imbalance']:.3f} | {'met' if mine < kib else 'not met'} |")
    for r in model:
        if r["reorder"] != "none" and r["comm"] == "sparse" and r["algo"] == "1d" and r["p"] == 16:
            ok = r["nnz_imbalance"] <= 1.10 and r["row_imbalance"] <= 1.10
            lines.append(f"| slowest rank's nnz and rows within 10 % of mean | {r['graph']} P=16 {r['reorder']} | "
                         f"nnz {r['nnz_imbalance']:.3f}, rows {r['row_imbalance']:.3f} | "
                         f"{'met' if ok else 'not met'} |")
    for p in sorted({r["p"] for r in model if r["graph"] == "rmat-17"}):
        rows = [r for r in model if r["graph"] == "rmat-17" and r["p"] == p and r["reorder"] == "none"]
        best_dense = min(r["max_bytes"] for r in rows if r["comm"] == "dense")
        worst_sparse_over = max(r["max_bytes"] - d["max_bytes"] for r in rows if r["comm"] == "sparse"
                                for d in rows if d["comm"] == "dense" and d["grid"] == r["grid"] and
                                d["algo"] == r["algo"])
        lines.append(f"| random-order R-MAT: sparse never above dense on its shape | rmat-17 P={p} | best dense "
                     f"{best_dense:,} B; worst sparse - dense on a shape {worst_sparse_over:,} B | "
                     f"{'met' if worst_sparse_over <= 0 else 'not met'} |")
    for r in measured:
        dense = _find(measured, graph=r["graph"], p=r["p"], algo=r["algo"], reorder=r["reorder"], comm="dense")
        if r["comm"] == "sparse" and dense is not None:
            extra = r["setup_s"] - dense["setup_s"]  # the index exchange and the compaction of the blocks
            ok = extra < r["step_s"]
            lines.append(f"| sparse set-up beyond dense's (index exchange) < one step | {r['graph']} P={r['p']} "
                         f"{r['algo']} {r['reorder']} | {extra:+.4f} s ({r['index_exchange_bytes']:,} B of ids), "
                         f"step {r['step_s']} s | {'met' if ok else 'not met'} |")
    return lines


def write_csv(path: Path, rows: list[dict]) -> None:
    if not rows:
        return
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--model-p", type=int, nargs="+", default=None)
    parser.add_argument("--measure-p", type=int, nargs="+", default=None)
    parser.add_argument("--measure-graphs", nargs="+", default=None)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "command.txt").write_text("python " + " ".join(sys.argv) + "\n", encoding="utf-8")
    model_p = args.model_p or ([2, 4] if args.tiny else [2, 4, 8, 16, 64, 256, 1024])
    measure_p = args.measure_p or ([2] if args.tiny else [4])
    graphs = load_graphs(args.tiny)
    model, measured = [], []
    for name, graph in graphs.items():
        model += model_rows(name, graph, [p for p in model_p if p <= graph.num_nodes // 4])
        write_csv(out / "model.csv", model)
    for name, graph in graphs.items():
        if args.measure_graphs is None or name in args.measure_graphs:
            measured += measured_rows(name, graph, measure_p, args.epochs)
            write_csv(out / "measured.csv", measured)
    (out / "goals.md").write_text("\n".join(goals(model, measured)) + "\n", encoding="utf-8")
    print("\n".join(goals(model, measured)))


if __name__ == "__main__":
    main()
