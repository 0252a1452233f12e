"""Communication sweep: measured vs modelled bytes and times over P, algorithms and replication.

For each graph and each P, every grid configuration `gridgnn plan` considers is trained for a few steps on
P local workers (gloo); each rank's recorded bytes and calls by phase are compared with the cost model
(they must be equal), and the measured communication and compute times are set against the model's
prediction with a machine profile. The planner's choice (what ``gridgnn train --algo auto`` runs) is
checked against the configuration with the least measured communication time. An extrapolation table prices
graphs of the CAGNET paper's size at P = 16 ... 4096, and CAGNET's logged Amazon volumes are reproduced.

    python benchmarks/comm_sweep.py --out results/comm            # the full sweep (~30 min on 2 cores)
    python benchmarks/comm_sweep.py --tiny --out /tmp/sweep        # seconds: keeps the script working

Writes ``sweep.csv``, ``sweep.md``, ``auto.md``, ``extrapolation.md``, ``command.txt`` and, when
matplotlib is installed, ``bytes_vs_p_<graph>.png`` and ``time_split_<graph>.png``.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

import numpy as np

from gridgnn.config import TrainConfig
from gridgnn.cost.epoch_model import PHASES, ModelSpec, predict_epoch
from gridgnn.cost.graph_stats import GraphStats
from gridgnn.cost.profile import load_profile
from gridgnn.grid.shape import GridShape
from gridgnn.nn.trace import model_spec
from gridgnn.plan.planner import candidate_shapes, plan

FULL_GRAPHS = {"rmat": "rmat:scale=14,edge_factor=16,features=64,classes=8", "amazon-computers": "amazon-computers"}
TINY_GRAPHS = {"csbm": "csbm:nodes=240,classes=5,features=13"}
FULL_P = (1, 2, 4, 8, 9, 16)
TINY_P = (2,)
TINY_ALGOS = ("1d", "2d")


def step_worker(rank: int, world_size: int, config_kwargs: dict, graph, shape_sizes: tuple, steps: int) -> list:
    """This rank's per-step records (bytes and calls by phase, comm and compute seconds)."""
    from gridgnn.grid.comm import Communicator
    from gridgnn.grid.process_grid import ProcessGrid
    from gridgnn.parallel.grid_ops import GridOps
    from gridgnn.sparse.adjacency import gcn_normalize
    from gridgnn.train.loop.distributed import DistributedTrainer
    from gridgnn.train.run.resolve import grid_shape_for

    config = TrainConfig(**config_kwargs)
    shape = grid_shape_for(config, world_size)
    assert shape.sizes == shape_sizes
    grid = ProcessGrid.create(shape)
    ops = GridOps(grid, Communicator(grid), gcn_normalize(graph.adj))
    trainer = DistributedTrainer(config, graph, ops)
    if world_size > 1:
        import torch.distributed as dist

        dist.barrier()
    for epoch in range(1, steps + 1):
        trainer.train_step(epoch)
    return trainer.epoch_comm


def config_kwargs(spec: str, data_root: str | None, shape: GridShape, hidden: int) -> dict:
    kwargs = {"dataset": spec, "data_root": data_root, "algo": shape.algo, "nprocs": shape.world_size,
              "hidden": hidden, "epochs": 1}
    if shape.algo == "1.5d":
        kwargs["replication"] = shape.sizes[1]
    elif shape.algo in ("2d", "3d"):
        kwargs["grid"] = shape.label()
    return kwargs


def measure(graph, spec: str, data_root, shape: GridShape, hidden: int, steps: int) -> dict:
    """Run ``steps`` training steps; per-rank records of the steps after the first (warm-up)."""
    from gridgnn.launch.spawn import run_workers

    kwargs = config_kwargs(spec, data_root, shape, hidden)
    per_rank = run_workers(step_worker, shape.world_size, kwargs, graph, shape.sizes, steps, timeout_s=900)
    kept = [records[1:] if len(records) > 1 else records for records in per_rank]
    epochs = len(kept[0])
    comm_s = np.mean([max(r[e]["comm_time_s"] for r in kept) for e in range(epochs)])
    compute_s = np.mean([max(r[e]["compute_time_s"] for r in kept) for e in range(epochs)])
    return {"records": [r[-1] for r in kept], "comm_s": float(comm_s), "compute_s": float(compute_s)}


def compare_row(name: str, shape: GridShape, measured: dict, pred) -> dict:
    records = measured["records"]
    equal = all(records[r]["by_phase"][ph] == int(pred.bytes_by_phase[ph][r])
                and records[r]["calls_by_phase"][ph] == int(pred.calls_by_phase[ph][r])
                for r in range(shape.world_size) for ph in PHASES)
    return {
        "graph": name, "P": shape.world_size, "algo": shape.algo, "grid": shape.label(),
        "replication": shape.sizes[1] if shape.algo == "1.5d" else 1,
        "measured_bytes_per_rank": max(r["bytes"] for r in records),
        "predicted_bytes_per_rank": int(pred.bytes.max()),
        "measured_calls_per_rank": max(r["calls"] for r in records),
        "predicted_calls_per_rank": int(pred.calls.max()), "bytes_and_calls_equal": equal,
        "measured_comm_s": round(measured["comm_s"], 6), "predicted_comm_s": round(float(pred.comm_s.max()), 6),
        "measured_compute_s": round(measured["compute_s"], 6),
        "predicted_compute_s": round(float(pred.compute_s.max()), 6),
        "predicted_memory_per_rank": int(pred.memory_bytes.max()),
    }


def run_sweep(graphs: dict, procs, data_root, hidden: int, steps: int, profile, log,
              algos=("1d", "1.5d", "2d", "3d")) -> list:
    from gridgnn.train.run.training import load_graph

    rows = []
    for name, spec in graphs.items():
        graph = load_graph(TrainConfig(dataset=spec, data_root=data_root))
        stats = GraphStats.from_graph(graph)
        model = ModelSpec(stats.num_features, stats.num_classes, 2, hidden)
        log(f"{stats.describe()}")
        for p in procs:
            shapes = candidate_shapes(p, algos) if p > 1 else candidate_shapes(1, ("1d",))
            for shape in shapes:
                start = time.perf_counter()
                pred = predict_epoch(model_spec(model, stats), stats, shape, profile=profile)
                row = compare_row(name, shape, measure(graph, spec, data_root, shape, hidden, steps), pred)
                rows.append(row)
                log(f"  P={p:<2} {shape.algo:<4} {shape.label():<7} bytes {row['measured_bytes_per_rank']:>11,} "
                    f"(model {row['predicted_bytes_per_rank']:>11,}, equal {row['bytes_and_calls_equal']}) comm "
                    f"{1e3 * row['measured_comm_s']:8.2f} ms (model {1e3 * row['predicted_comm_s']:8.2f}) "
                    f"[{time.perf_counter() - start:.1f} s]")
    return rows


def auto_rows(rows: list[dict], graphs: dict, data_root, hidden: int, profile, algos) -> list[dict]:
    """For each graph and P > 1: the planner's pick (with ``profile``) against the measured best."""
    from gridgnn.train.run.training import load_graph

    out = []
    for name, spec in graphs.items():
        stats = GraphStats.from_graph(load_graph(TrainConfig(dataset=spec, data_root=data_root)))
        model = ModelSpec(stats.num_features, stats.num_classes, 2, hidden)
        for p in sorted({r["P"] for r in rows if r["graph"] == name and r["P"] > 1}):
            measured = [r for r in rows if r["graph"] == name and r["P"] == p]
            out.append(auto_row(name, p, model, stats, profile, measured, algos))
    return out


def fit_sweep_profile(rows: list[dict], graphs: dict, data_root, hidden: int, base) -> object:
    """A profile whose α (per ⌈log2 p⌉ step of every call) and β (per byte) are fitted by non-negative
    least squares (relative errors) to the measured communication times of the sweep itself."""
    from dataclasses import replace

    from scipy.optimize import nnls

    from gridgnn.cost.profile import OPS, LinkCost
    from gridgnn.grid.shape import resolve_grid
    from gridgnn.train.run.training import load_graph

    features, target = [], []
    for name, spec in graphs.items():
        stats = GraphStats.from_graph(load_graph(TrainConfig(dataset=spec, data_root=data_root)))
        model = ModelSpec(stats.num_features, stats.num_classes, 2, hidden)
        for row in (r for r in rows if r["graph"] == name and r["P"] > 1 and r["measured_comm_s"] > 0):
            extra = {"replication": row["replication"]} if row["algo"] == "1.5d" else {}
            if row["algo"] in ("2d", "3d"):
                extra = {"grid": row["grid"]}
            pred = predict_epoch(model_spec(model, stats), stats, resolve_grid(row["algo"], row["P"], **extra),
                                 profile=base)
            steps = sum(t.calls * max(1, int(np.ceil(np.log2(t.group_size)))) for t in pred.terms)
            rank = int(np.argmax(pred.bytes))
            features.append([steps[rank], pred.bytes[rank]])
            target.append(row["measured_comm_s"])
    x, y = np.array(features, dtype=np.float64), np.array(target)
    (alpha, beta), _ = nnls(x / y[:, None], np.ones_like(y))
    link = LinkCost(float(alpha), float(beta))
    return replace(base, name="cpu-sweep-fit", intra_node=dict.fromkeys(OPS, link),
                   description="alpha and beta fitted to this sweep's measured communication times (in-sample)",
                   sources=["benchmarks/comm_sweep.py fit_sweep_profile"])


def read_rows(path: Path) -> list[dict]:
    """Rows of a ``sweep.csv`` written earlier, with their types restored."""
    ints = {"P", "replication", "measured_bytes_per_rank", "predicted_bytes_per_rank", "measured_calls_per_rank",
            "predicted_calls_per_rank", "predicted_memory_per_rank"}
    rows = []
    with path.open(encoding="utf-8") as stream:
        for raw in csv.DictReader(stream):
            row = {}
            for key, value in raw.items():
                if key in ints:
                    row[key] = int(value)
                elif key == "bytes_and_calls_equal":
                    row[key] = value == "True"
                elif key.endswith("_s"):
                    row[key] = float(value)
                else:
                    row[key] = value
            rows.append(row)
    return rows


def auto_row(name: str, p: int, model, stats, profile, measured_rows: list, algos) -> dict:
    """The planner's pick for P against the configuration with the least measured communication time."""
    choice = plan(model, stats, p, profile=profile, algos=algos)
    best = min(measured_rows, key=lambda r: r["measured_comm_s"])
    picked = next(r for r in measured_rows if r["algo"] == choice.best.algo and r["grid"] == choice.best.grid)
    ratio = picked["measured_comm_s"] / best["measured_comm_s"] if best["measured_comm_s"] > 0 else 1.0
    return {"graph": name, "P": p, "auto": f"{picked['algo']} {picked['grid']}",
            "auto_measured_comm_s": picked["measured_comm_s"], "best": f"{best['algo']} {best['grid']}",
            "best_measured_comm_s": best["measured_comm_s"], "ratio": round(ratio, 3), "within_10pct": ratio <= 1.1,
            "reason": choice.reason}


def write_csv(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="", encoding="utf-8") as stream:
        writer = csv.DictWriter(stream, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def markdown(rows: list[dict], columns: list[str]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = [f"{row[c]:,}" if isinstance(row[c], int) and not isinstance(row[c], bool) else str(row[c])
                 for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


PAPER_GRAPHS = {  # CAGNET paper sizes; edges are stored adjacency entries
    "reddit": (232_965, 114_615_892, 602, 41),
    "amazon": (14_249_639, 115_800_000, 300, 24),
    "protein": (8_745_542, 1_309_240_502, 128, 256),
}


def extrapolation(profile_name: str, procs=(16, 64, 256, 1024, 4096)) -> str:
    """Best shape per algorithm and the overall winner for the paper's graphs (uniform-nnz estimate)."""
    from gridgnn.cost.profile import load_profile

    profile = load_profile(profile_name)
    lines = [f"Profile `{profile_name}`; uniform-nnz block estimate; GCN 2 layers, hidden 16, order auto; "
             "bytes = max over ranks per epoch; time = predicted training step.\n",
             "| graph | P | 1d | best 1.5d | best 2d | best 3d | winner |", "|---|---|---|---|---|---|---|"]
    for name, (n, edges, f, c) in PAPER_GRAPHS.items():
        stats = GraphStats.from_counts(n, edges, f, c, name=name)
        for p in procs:
            result = plan(ModelSpec(f, c), stats, p, profile=profile)
            cells = []
            for algo in ("1d", "1.5d", "2d", "3d"):
                entry = next((e for e in result.entries if e.algo == algo), None)
                cells.append("-" if entry is None else
                             f"{entry.grid}: {_mib(entry.prediction.bytes.max())}, {_ms(entry.prediction.epoch_s)}")
            best = result.best
            lines.append(f"| {name} | {p} | " + " | ".join(cells) + f" | **{best.algo} {best.grid}** |")
    return "\n".join(lines) + "\n"


def cagnet_check() -> str:
    from gridgnn.cost.cagnet import cagnet_broadcast_words

    n, widths = 14_249_639, [300, 16, 24]
    logged = {1: 5_072_871_484, 4: 1_268_217_960}
    lines = ["CAGNET's logged broadcast words per rank per epoch, Amazon (n = 14,249,639), P = 16, aggregate-first, "
             "widths 300-16-24 (their count: forward widths f0, f1 and backward widths f2, f1, own block "
             "included):\n", "| c | logged | gridgnn's CAGNET-convention model | equal |", "|---|---|---|---|"]
    for c, words in logged.items():
        model = int(cagnet_broadcast_words(n, widths, 16, c).max())
        lines.append(f"| {c} | {words:,} | {model:,} | {model == words} |")
    return "\n".join(lines) + "\n"


def _mib(value) -> str:
    return f"{float(value) / 2**20:,.1f} MiB"


def _ms(value: float) -> str:
    return f"{1e3 * value:,.2f} ms"


def plots(out: Path, rows: list[dict], graphs: dict, hidden: int, data_root, profile) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plots (pip install -e '.[bench]')")
        return
    from gridgnn.grid.shape import resolve_grid
    from gridgnn.train.run.training import load_graph

    families = {"1d": ("1d", {}), "1.5d c=2": ("1.5d", {"replication": 2}), "2d": ("2d", {}),
                "3d q=2": ("3d", {})}
    for name, spec in graphs.items():
        stats = GraphStats.from_graph(load_graph(TrainConfig(dataset=spec, data_root=data_root)))
        model = ModelSpec(stats.num_features, stats.num_classes, 2, hidden)
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for label, (algo, extra) in families.items():
            xs, ys, shapes = [], [], []
            for p in range(1, 17):
                shape = _family_shape(algo, p, extra, resolve_grid)
                if shape is None:
                    continue
                xs.append(p)
                ys.append(predict_epoch(model_spec(model, stats), stats, shape, profile=profile).bytes.max() / 2**20)
                shapes.append(shape.label())
            line = ax.plot(xs, ys, label=f"{label} (model)")[0]
            points = [(r["P"], r["measured_bytes_per_rank"] / 2**20) for r in rows
                      if r["graph"] == name and r["algo"] == algo and r["grid"] in shapes
                      and dict(zip(xs, shapes, strict=True)).get(r["P"]) == r["grid"]]
            if points:
                ax.plot(*zip(*points, strict=True), "o", color=line.get_color())
        ax.set_xlabel("P (processes)")
        ax.set_ylabel("MiB received per rank per epoch (max over ranks)")
        ax.set_title(f"{name}: model lines, measured points")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / f"bytes_vs_p_{name}.png", dpi=110)
        plt.close(fig)
        _time_split_plot(plt, out, name, [r for r in rows if r["graph"] == name])


def _family_shape(algo: str, p: int, extra: dict, resolve_grid):
    from gridgnn.errors import ConfigError

    try:
        if algo == "3d":
            if p % 4:
                return None
            return resolve_grid("3d", p, grid=f"2x2x{p // 4}")
        return resolve_grid(algo, p, **extra)
    except ConfigError:
        return None


def _time_split_plot(plt, out: Path, name: str, rows: list[dict]) -> None:
    rows = [r for r in rows if r["P"] > 1]
    labels = [f"P{r['P']} {r['algo']} {r['grid']}" for r in rows]
    fig, ax = plt.subplots(figsize=(max(8, 0.28 * len(rows)), 4.5))
    x = np.arange(len(rows))
    comm = [1e3 * r["measured_comm_s"] for r in rows]
    compute = [1e3 * r["measured_compute_s"] for r in rows]
    ax.bar(x, comm, label="communication (measured)")
    ax.bar(x, compute, bottom=comm, label="compute (measured)")
    ax.plot(x, [1e3 * r["predicted_comm_s"] for r in rows], "k_", markersize=9, label="communication (model)")
    ax.set_xticks(x, labels, rotation=90, fontsize=6)
    ax.set_ylabel("ms per training step (max over ranks)")
    ax.set_title(f"{name}: communication vs compute")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / f"time_split_{name}.png", dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="results/comm", help="output folder")
    parser.add_argument("--tiny", action="store_true", help="a small graph and P <= 4 (seconds)")
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--steps", type=int, default=3, help="training steps per configuration (first: warm-up)")
    parser.add_argument("--profile", default="cpu-local", help="profile of the machine the sweep runs on")
    parser.add_argument("--no-plots", action="store_true")
    parser.add_argument("--from-csv", action="store_true",
                        help="reuse <out>/sweep.csv instead of measuring again (tables, fit and plots only)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    graphs, procs = (TINY_GRAPHS, TINY_P) if args.tiny else (FULL_GRAPHS, FULL_P)
    algos = TINY_ALGOS if args.tiny else ("1d", "1.5d", "2d", "3d")
    steps = 2 if args.tiny else args.steps
    profile = load_profile(args.profile)
    if not args.from_csv:
        (out / "command.txt").write_text("python " + " ".join([sys.argv[0]] + list(argv or sys.argv[1:])) + "\n")
    logfile = (out / ("report.log" if args.from_csv else "sweep.log")).open("w", encoding="utf-8")

    def log(text: str) -> None:
        print(text, flush=True)
        logfile.write(text + "\n")
        logfile.flush()

    if args.from_csv:
        rows = read_rows(out / "sweep.csv")
    else:
        rows = run_sweep(graphs, procs, args.data_root, args.hidden, steps, profile, log, algos)
        write_csv(out / "sweep.csv", rows)
    auto = auto_rows(rows, graphs, args.data_root, args.hidden, profile, algos)
    fitted = fit_sweep_profile(rows, graphs, args.data_root, args.hidden, profile)
    fitted.save(out / "cpu-sweep-fit.json")
    auto_fit = auto_rows(rows, graphs, args.data_root, args.hidden, fitted, algos)
    columns = ["graph", "P", "algo", "grid", "replication", "measured_bytes_per_rank", "predicted_bytes_per_rank",
               "bytes_and_calls_equal", "measured_comm_s", "predicted_comm_s", "measured_compute_s",
               "predicted_compute_s"]
    (out / "sweep.md").write_text(markdown(rows, columns), encoding="utf-8")
    auto_columns = ["graph", "P", "auto", "auto_measured_comm_s", "best", "best_measured_comm_s", "ratio",
                    "within_10pct"]
    link = fitted.intra_node["broadcast"]
    (out / "auto.md").write_text(
        f"Planner's pick with profile `{profile.name}` (measured by `gridgnn calibrate`, independent of the "
        f"sweep):\n\n{markdown(auto, auto_columns)}\nWith profile `cpu-sweep-fit` (α = "
        f"{1e3 * link.alpha_s:.3f} ms per step, β = {link.beta_s_per_byte * 1e9:.3f} ns/byte, fitted to this "
        f"sweep's own measurements: in-sample):\n\n{markdown(auto_fit, auto_columns)}", encoding="utf-8")
    extra_procs = (16,) if args.tiny else (16, 64, 256, 1024, 4096)
    (out / "extrapolation.md").write_text(extrapolation("gpu-cluster", extra_procs) + "\n" + cagnet_check(),
                                          encoding="utf-8")
    if not args.no_plots:
        plots(out, rows, graphs, args.hidden, args.data_root, profile)
    log(f"{sum(r['bytes_and_calls_equal'] for r in rows)}/{len(rows)} configurations: model = measurement")
    for label, picks in ((profile.name, auto), ("cpu-sweep-fit", auto_fit)):
        log(f"auto ({label}) within 10 % of the best measured communication time: "
            f"{sum(a['within_10pct'] for a in picks)}/{len(picks)}")
    logfile.close()
    return 0 if all(r["bytes_and_calls_equal"] for r in rows) else 1


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
