"""Sparse vs dense SpMM communication, with vertex reordering: exact model at large P, measured runs at small P.

For each graph (Amazon Computers, Coauthor Physics, SuiteSparse ca-AstroPh with placeholder features, an R-MAT
2^17 and a random geometric graph in the unit square, a mesh-like graph), each reordering (none, random,
rcm, metis, metis-nnz, metis-balanced; METIS's parts are the row blocks, which follow them) and each P:

- model (exact, from the graph's structure; measured = modelled is what the tests check): every algorithm (1d; 1.5d
  c = 2; 2d and 3d on their default grids) x {dense, sparse, and on grids whose Â panels move dense+cache,
  sparse+cache (``--cache-panels``), and where they take effect sparse+cache+rows (``--full-feature-rows``),
  dense+defer and sparse+cache+rows+defer (``--defer-weight-gather``)}: bytes per rank per training step (max and
  mean over ranks, all phases and the SpMM phases alone), calls, the reordering's seconds and the non-zero and row
  imbalance (max/mean per row block), the set-up of ``--comm sparse`` and ``--cache-panels`` (bytes, and seconds on
  the gpu-cluster profile against the predicted step's), the graph memory and the peak memory per rank, at
  ``--model-p``;
- measured (``--measure-p``): a few training steps on P forked gloo workers (1 thread each) for
  ``--measure-algos`` (default 1d and 2d) x ``--measure-comms`` (default dense, sparse) x ``--measure-orders``
  (default none, metis, metis-nnz, metis-balanced): median step time, set-up seconds (reordering, blocks,
  index exchange, panel cache), measured bytes (checked equal to the model).

    python benchmarks/sparse_comm.py --out results/sparse_comm            # ~20 min on 2 busy cores
    python benchmarks/sparse_comm.py --tiny --out /tmp/sparse_comm        # seconds

Writes ``model.csv``, ``measured.csv``, ``goals.md`` (the issue's goals, met or not, with figures) and
``command.txt``; the report (``goals.md``, ``summary.md``, the plots) is drawn from the rows by
``sparse_comm_report.py``, beside this script.
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
from sparse_comm_report import METIS_ORDERS, goals, plots, summary  # beside this script

from gridgnn.config import REORDERS, TrainConfig
from gridgnn.cost.epoch_model import predict_epoch
from gridgnn.cost.graph_stats import GraphStats
from gridgnn.cost.stages import row_blocks
from gridgnn.data.graph import Graph
from gridgnn.data.registry import load_dataset
from gridgnn.data.reorder import nnz_imbalance, reorder_graph, row_imbalance
from gridgnn.errors import ConfigError
from gridgnn.grid.shape import resolve_grid
from gridgnn.launch.spawn import run_workers
from gridgnn.nn.trace import model_spec
from gridgnn.sparse.adjacency import gcn_normalize

DATA = "/work/shared/datasets"
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
        if p % 4 == 0 and p > 4:
            out.append(("3d", {"grid": f"2x2x{p // 4}"}))  # P not a cube: q = 2, the rest on depth
    return out


def imbalance(graph: Graph, parts: int) -> tuple[float, float]:
    """(nnz, rows) max/mean of Â's entries and rows per row block, the ``parts`` blocks the grid cuts (METIS's
    parts when the graph has as many, else balanced: `gridgnn.cost.stages.row_blocks`)."""
    bounds = row_blocks(graph.num_nodes, parts, graph.meta.get("reorder_bounds"))
    return nnz_imbalance(gcn_normalize(graph.adj), parts, bounds), row_imbalance(graph.num_nodes, parts, bounds)


class Orders:
    """Reordered graphs, cached per (method, parts); METIS's parts are the grid's row blocks."""

    def __init__(self, graph: Graph):
        self.graph, self.cache = graph, {}

    def get(self, method: str, parts: int, nest: int = 1) -> Graph:
        """``method``'s order for ``parts`` row blocks (on 3D each cut again into ``nest``, as training does)."""
        metis = method.startswith("metis")
        key = (method, parts if metis else 0, nest if metis else 1)
        if key not in self.cache:
            self.cache[key] = reorder_graph(self.graph, method, parts, nest=nest)
        return self.cache[key]


SPMM_VARIANTS = ("dense", "sparse", "dense+cache", "sparse+cache", "sparse+cache+rows", "dense+defer",
                 "sparse+cache+rows+defer")
"""The ``comm`` column: ``--comm``, with ``+cache`` for ``--cache-panels`` (2D and 3D grids whose Â panels move),
``+rows`` for ``--full-feature-rows`` (where it takes effect) and ``+defer`` for ``--defer-weight-gather`` (2D and
3D grids of more than one column block)."""


def variant_flags(variant: str) -> tuple[str, bool, bool, bool]:
    """(``--comm``, ``--cache-panels``, ``--full-feature-rows``, ``--defer-weight-gather``) of a ``comm`` value."""
    comm, *extras = variant.split("+")
    return comm, "cache" in extras, "rows" in extras, "defer" in extras


def priced_variant(variant: str, stats: GraphStats, shape) -> TrainConfig | None:
    """The `TrainConfig` of ``variant`` (its model flags at their defaults), or None where it would be the run
    of a plainer variant: no Â panel moves on ``shape`` to cache, or full feature rows or the deferred weight
    gather would not take effect."""
    comm, cached, rows, defer = variant_flags(variant)
    config = TrainConfig(comm=comm, cache_panels=cached, full_feature_rows=rows, defer_weight_gather=defer)
    spec = model_spec(config, stats)
    priced = predict_epoch(spec, stats, shape, cache_panels=True)
    if cached and not priced.setup_sum("calls", "broadcast").any():
        return None
    if (rows and not spec.keeps_feature_rows(shape)) or (defer and not spec.defers_weight_gather(shape)):
        return None
    return config


def model_rows(name: str, graph: Graph, ps: list[int], methods: list[str] = REORDERS,
               variants: tuple[str, ...] = SPMM_VARIANTS) -> list[dict]:
    orders, rows = Orders(graph), []
    for p in ps:
        for algo, kw in grids(p):
            shape = resolve_grid(algo, p, **kw)
            parts = shape.sizes[0]
            for method in methods:
                g = orders.get(method, parts, shape.depth)
                stats = GraphStats.from_graph(g)
                nnz_imb, row_imb = imbalance(g, parts)
                for variant in variants:
                    config = priced_variant(variant, stats, shape)
                    if config is None:
                        continue  # the same run as a plainer variant's
                    pred = predict_epoch(model_spec(config, stats), stats, shape, comm=config.comm,
                                         cache_panels=config.cache_panels)
                    spmm = pred.bytes_by_phase["spmm_forward"] + pred.bytes_by_phase["spmm_backward"]
                    rows.append({"graph": name, "p": p, "algo": algo, "grid": shape.label(), "reorder": method,
                                 "comm": variant, "max_bytes": int(pred.bytes.max()),
                                 "mean_bytes": float(pred.bytes.mean()), "max_spmm_bytes": int(spmm.max()),
                                 "max_calls": int(pred.calls.max()),
                                 "setup_bytes": int(pred.setup_bytes.max()),
                                 "setup_s": float(pred.setup_s.max()), "epoch_s": pred.epoch_s,
                                 "reorder_s": round(float(g.meta.get("reorder_seconds", 0.0)), 4),
                                 "nnz_imbalance": round(nnz_imb, 4), "row_imbalance": round(row_imb, 4),
                                 "max_graph_bytes": int(pred.memory["graph"].max()),
                                 "max_feature_bytes": int(pred.memory["features"].max()),
                                 "max_memory_bytes": int(pred.memory_bytes.max())})
            print(f"model  {name} P={p} {algo} done", flush=True)
    return rows


def auto_rows(name: str, graph: Graph, ps: list[int]) -> list[dict]:
    """What ``--algo auto --comm auto`` picks (profile gpu-cluster) against ``--algo auto --comm dense``."""
    from gridgnn.plan.planner import plan

    stats, rows = GraphStats.from_graph(graph), []
    for p in ps:
        both = plan(TrainConfig(), stats, p, comms=("dense", "sparse")).best
        dense = plan(TrainConfig(), stats, p, comms=("dense",)).best
        rows.append({"graph": name, "p": p, "auto": f"{both.algo} {both.grid} {both.comm}",
                     "auto_max_bytes": int(both.prediction.bytes.max()),
                     "dense_auto": f"{dense.algo} {dense.grid}", "dense_max_bytes": int(dense.prediction.bytes.max()),
                     "auto_epoch_s": both.prediction.epoch_s, "dense_epoch_s": dense.prediction.epoch_s})
    return rows


def measured_worker(rank: int, world: int, kwargs: dict, graph: Graph) -> dict:
    from gridgnn.train.run.grid_train import train_on_grid
    from gridgnn.train.run.resolve import resolve_run

    config, shape, ordered = resolve_run(TrainConfig(**kwargs), graph, world)
    start = time.perf_counter()
    trained = train_on_grid(config, ordered, shape=shape)
    total = time.perf_counter() - start
    if rank != 0:
        return {}
    times = [r.time_s for r in trained.result.epochs]
    comm = trained.comm[-1]
    return {"step_s": statistics.median(times[1:] if len(times) > 1 else times),
            "setup_s": max(s["spmm_setup_s"] for s in trained.spmm_setup),
            "panel_cache_bytes": max(s["panel_cache_bytes"] for s in trained.spmm_setup),
            "panel_cache_s": max(s["panel_cache_s"] for s in trained.spmm_setup),
            "index_exchange_bytes": max(s["index_exchange_bytes"] for s in trained.spmm_setup),
            "index_exchange_s": max(s["index_exchange_s"] for s in trained.spmm_setup),
            "reorder_s": trained.reorder["reorder_seconds"] or 0.0, "max_bytes": max(comm["bytes"]),
            "bytes": comm["bytes"], "total_s": total}


def measured_rows(name: str, graph: Graph, ps: list[int], epochs: int, orders: list[str],
                  variants: list[str] = ("dense", "sparse"), algos: list[str] = ("1d", "2d")) -> list[dict]:
    rows = []
    for p in ps:
        for algo, kw in (g for g in grids(p) if g[0] in algos):
            shape = resolve_grid(algo, p, **kw)
            for method in orders:
                g = reorder_graph(graph, method, shape.sizes[0], nest=shape.depth)
                stats = GraphStats.from_graph(g)
                for variant in variants:
                    priced = priced_variant(variant, stats, shape)
                    if priced is None:
                        continue  # the same run as a plainer variant's
                    kwargs = {"dataset": name, "algo": algo, "nprocs": p, "epochs": epochs, "comm": priced.comm,
                              "cache_panels": priced.cache_panels, "full_feature_rows": priced.full_feature_rows,
                              "defer_weight_gather": priced.defer_weight_gather,
                              "reorder": method, "quiet": True, **kw}
                    out = run_workers(measured_worker, p, kwargs, g, timeout_s=1800)[0]
                    predicted = predict_epoch(model_spec(TrainConfig(**kwargs), stats), stats, shape, comm=priced.comm,
                                              cache_panels=priced.cache_panels).bytes.tolist()
                    rows.append({"graph": name, "p": p, "algo": algo, "reorder": method, "comm": variant,
                                 "step_s": round(out["step_s"], 4), "setup_s": round(out["setup_s"], 4),
                                 "reorder_s": round(float(g.meta.get("reorder_seconds", 0.0)), 4),
                                 "index_exchange_bytes": out["index_exchange_bytes"],
                                 "index_exchange_s": round(out["index_exchange_s"], 4),
                                 "panel_cache_bytes": out["panel_cache_bytes"],
                                 "panel_cache_s": round(out["panel_cache_s"], 4),
                                 "max_bytes": out["max_bytes"], "model_equal": out["bytes"] == predicted})
                    print(f"run    {name} P={p} {algo} {method} {variant}: {rows[-1]}", flush=True)
    return rows


def check_measured(measured: list[dict], graphs: dict[str, Graph]) -> int:
    """How many measured rows' max bytes per rank differ from what the current model prices for them, each
    on its own order (as `measured_rows` built it); prints each that differs."""
    orders, differ = {}, 0
    for r in measured:
        shape = resolve_grid(r["algo"], r["p"], **dict(next(kw for a, kw in grids(r["p"]) if a == r["algo"])))
        key = (r["graph"], r["reorder"], shape.sizes[0], shape.depth)
        if key not in orders:
            orders[key] = GraphStats.from_graph(reorder_graph(graphs[r["graph"]], r["reorder"], shape.sizes[0],
                                                              nest=shape.depth))
        config = priced_variant(r["comm"], orders[key], shape)
        predicted = int(predict_epoch(model_spec(config, orders[key]), orders[key], shape, comm=config.comm,
                                      cache_panels=config.cache_panels).bytes.max())
        if predicted != r["max_bytes"]:
            differ += 1
            print(f"differs: {r['graph']} P={r['p']} {r['algo']} {r['reorder']} {r['comm']}: measured "
                  f"{r['max_bytes']:,} B, model {predicted:,} B")
    return differ


def read_csv(path: Path) -> list[dict]:
    """Rows of a CSV this script wrote, numbers and booleans parsed back."""
    if not path.exists():
        return []

    def value(text: str):
        if text in ("True", "False"):
            return text == "True"
        for kind in (int, float):
            try:
                return kind(text)
            except ValueError:
                pass
        return text

    with open(path, encoding="utf-8") as f:
        return [{k: value(v) for k, v in row.items()} for row in csv.DictReader(f)]


def write_csv(path: Path, rows: list[dict]) -> None:
    """``rows`` as CSV; columns: every key of any row (rows from an older run leave new columns empty)."""
    if not rows:
        return
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for r in rows for k in r)), restval="")
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
    parser.add_argument("--measure-orders", nargs="+", default=["none", *METIS_ORDERS], choices=REORDERS)
    parser.add_argument("--measure-comms", nargs="+", default=["dense", "sparse"], choices=SPMM_VARIANTS,
                        help="SpMM variants to measure (+cache: --cache-panels, on 2d and 3d grids whose panels move)")
    parser.add_argument("--measure-algos", nargs="+", default=["1d", "2d"], choices=["1d", "1.5d", "2d", "3d"],
                        help="algorithms to measure (default grids, 1.5d c = 2, 3d 2x2x(P/4) off cubes)")
    parser.add_argument("--model-orders", nargs="+", default=list(REORDERS), choices=REORDERS)
    parser.add_argument("--model-comms", nargs="+", default=list(SPMM_VARIANTS), choices=SPMM_VARIANTS,
                        help="SpMM variants to price (with --append the other rows of model.csv stay)")
    parser.add_argument("--append", action="store_true",
                        help="merge the new rows into the CSVs in --out (replacing rows of the same run)")
    parser.add_argument("--goals-only", action="store_true", help="rewrite goals.md from the CSVs in --out")
    parser.add_argument("--auto-only", action="store_true", help="only the auto-choice rows on R-MAT (auto.csv)")
    parser.add_argument("--measure-only", action="store_true", help="keep model.csv, run the measurements")
    parser.add_argument("--model-only", action="store_true", help="only the model rows (no measured runs)")
    parser.add_argument("--check-measured", action="store_true",
                        help="re-price every row of measured.csv with the current model on its own order and "
                             "report the rows whose max bytes differ")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.auto_only:
        graph = load_dataset("rmat:scale=17,edge_factor=8,features=32,classes=8")
        write_csv(out / "auto.csv", auto_rows("rmat-17", graph, args.model_p or [4, 16, 64, 256, 1024]))
        return
    if args.check_measured:
        differ = check_measured(read_csv(out / "measured.csv"), load_graphs(args.tiny))
        print(f"{len(read_csv(out / 'measured.csv'))} measured rows, {differ} differ from the current model")
        sys.exit(1 if differ else 0)
    if args.goals_only:
        lines = goals(read_csv(out / "model.csv"), read_csv(out / "measured.csv"), read_csv(out / "auto.csv"))
        (out / "goals.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
        table = summary(read_csv(out / "model.csv"), read_csv(out / "measured.csv"))
        (out / "summary.md").write_text("\n".join(table) + "\n", encoding="utf-8")
        plots(out, read_csv(out / "model.csv"), read_csv(out / "measured.csv"))
        print("\n".join(lines + [""] + table))
        return
    command = "python " + " ".join(sys.argv) + "\n"
    log = out / "command.txt"
    earlier = log.read_text(encoding="utf-8") if args.append and log.exists() else ""
    log.write_text(earlier + command, encoding="utf-8")
    model_p = args.model_p or ([2, 4] if args.tiny else [2, 4, 8, 16, 64, 256, 1024])
    measure_p = args.measure_p or ([2] if args.tiny else [4])
    graphs = load_graphs(args.tiny)
    model = read_csv(out / "model.csv") if args.measure_only or args.append else []
    measured = read_csv(out / "measured.csv") if args.append else []
    for name, graph in graphs.items() if not args.measure_only else ():
        ps = [p for p in model_p if p <= graph.num_nodes // 4]
        model = merge(model, model_rows(name, graph, ps, args.model_orders, tuple(args.model_comms)), MODEL_KEYS)
        write_csv(out / "model.csv", model)
    for name, graph in graphs.items() if not args.model_only else ():
        if args.measure_graphs is None or name in args.measure_graphs:
            new = measured_rows(name, graph, measure_p, args.epochs, args.measure_orders, args.measure_comms,
                                args.measure_algos)
            measured = merge(measured, new, MEASURED_KEYS)
            write_csv(out / "measured.csv", measured)
    lines = goals(model, measured, read_csv(out / "auto.csv"))
    (out / "goals.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (out / "summary.md").write_text("\n".join(summary(model, measured)) + "\n", encoding="utf-8")
    plots(out, model, measured)
    print("\n".join(lines))


MODEL_KEYS = ("graph", "p", "algo", "grid", "reorder", "comm")
MEASURED_KEYS = ("graph", "p", "algo", "reorder", "comm")
"""The columns that name one run of model.csv and measured.csv (`merge` replaces a run measured again)."""


def merge(rows: list[dict], new: list[dict], keys: tuple[str, ...]) -> list[dict]:
    """``rows`` with every run of ``new`` replacing the row of the same ``keys`` in place, or appended."""
    position = {tuple(str(r[k]) for k in keys): i for i, r in enumerate(rows)}  # CSV-read rows hold 16, new "16"
    out = list(rows)
    for r in new:
        key = tuple(str(r[k]) for k in keys)
        if key in position:
            out[position[key]] = r
        else:
            position[key] = len(out)
            out.append(r)
    return out


if __name__ == "__main__":
    main()
