"""A large R-MAT graph on this machine: P local workers, 1D / 1.5D / 2D, memory against the planner (issue 7).

Steps, each timed and its peak resident memory measured:

1. ``gridgnn prepare rmat:scale=S,edge_factor=E,features=F --out WORK/prepared`` (one process generates,
   symmetrizes and normalizes the graph once; the peak of that process is the set-up peak);
2. for each algorithm ``gridgnn train --dataset WORK/prepared --algo A --nprocs P --epochs K`` (workers
   memory-map the prepared graph and cut their rows): per-rank peak memory after set-up and during
   training, median epoch time, bytes per rank per epoch (measured = predicted, checked);
3. the planner's memory prediction per rank (`gridgnn.cost.epoch_model.predict_epoch`, exact block nnz)
   next to the measurement, with and without the interpreter baseline (the peak of a worker that trained
   a tiny graph: Python, torch and gridgnn's code);
4. optionally (``--pyg``) PyG's ``GCNConv`` in one process on the same normalized adjacency (CSR, the
   normalization it would cache), under an address-space limit so that running out of memory is a clean
   failure: does it fit, and how long is its epoch.

Writes ``OUT/scale.json``, ``OUT/scale.md`` (with the exact command) and ``OUT/memory.png`` (memory per
rank against the planner; needs matplotlib, ``--plot-only`` redraws it from the JSON). Example
(results/scale/)::

    python benchmarks/scale_rmat.py --scale 22 --edge-factor 16 --features 64 --nprocs 4 --epochs 3 \\
        --algos 1d 1.5d 2d --pyg --out results/scale --work /tmp/gridgnn-scale
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

GRIDGNN = [sys.executable, "-m", "gridgnn"]


def run_measured(argv: list[str], log: Path, env: dict | None = None) -> tuple[float, int]:
    """Run ``argv`` to completion (stdout/stderr to ``log``); returns wall seconds and the peak resident
    memory of the process tree's largest process (bytes, from wait4's rusage)."""
    start = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"{shlex.join(argv)} failed with status {code}; see {log}")
    return time.perf_counter() - start, int(usage.ru_maxrss) * 1024


def algo_flags(algo: str, replication: int) -> list[str]:
    return ["--algo", algo] + (["--replication", str(replication)] if algo == "1.5d" else [])


def train(prepared: Path, algo: str, args: argparse.Namespace, work: Path) -> dict:
    metrics_path = work / f"metrics-{algo}.json"
    argv = [*GRIDGNN, "train", "--dataset", str(prepared), *algo_flags(algo, args.replication),
            "--nprocs", str(args.nprocs), "--epochs", str(args.epochs), "--quiet", "--metrics-out",
            str(metrics_path), "--comm", args.comm, "--hidden", str(args.hidden), "--reorder", "none",
            "--no-cache-panels", "--no-full-feature-rows", "--no-defer-weight-gather"]  # what it prices
    wall, _ = run_measured(argv, work / f"train-{algo}.log")
    metrics = json.loads(metrics_path.read_text())
    epochs = metrics["epochs"]
    comm = epochs[-1]["comm"]
    assert comm["predicted_by_phase"] == comm["by_phase"], "planner and measurement disagree"
    return {
        "algo": algo, "grid": metrics["config"]["grid_shape"], "command": shlex.join(argv[2:]),
        "wall_s": wall, "median_epoch_s": statistics.median(e["time_s"] for e in epochs),
        "epoch_times_s": [e["time_s"] for e in epochs],
        "bytes_per_rank": max(comm["bytes"]), "bytes_per_rank_all": comm["bytes"],
        "comm_time_s": statistics.median(e["comm_time_s"] for e in epochs),
        "exposed_comm_time_s": statistics.median(e["exposed_comm_time_s"] for e in epochs),
        "setup_peak_bytes": metrics["setup"]["peak_memory_bytes"],
        "peak_bytes": [max(e["peak_memory_bytes"][r] for e in epochs) for r in range(args.nprocs)],
        "config": {"algo": algo, "replication": args.replication if algo == "1.5d" else 1,
                   "grid": metrics["config"]["grid_shape"] if algo in ("2d", "3d") else None,
                   "comm": args.comm, "hidden": args.hidden},
        "test_acc": metrics["final"]["test_acc"],
    }


def baseline_bytes(work: Path) -> int:
    """Peak resident memory of a worker that trained a tiny graph: the interpreter, torch and gridgnn."""
    path = work / "metrics-baseline.json"
    run_measured([*GRIDGNN, "train", "--dataset", "csbm:nodes=200", "--algo", "1d", "--nprocs", "2",
                  "--epochs", "2", "--quiet", "--metrics-out", str(path)], work / "baseline.log")
    return max(json.loads(path.read_text())["epochs"][-1]["peak_memory_bytes"])


def predictions(prepared: Path, runs: list[dict], args: argparse.Namespace) -> None:
    """Add the planner's per-rank memory (exact block nnz) to each run."""
    from gridgnn.config import TrainConfig
    from gridgnn.cost.epoch_model import predict_epoch
    from gridgnn.data.prepared import open_prepared
    from gridgnn.nn.trace import model_spec
    from gridgnn.train.run.auto import graph_stats
    from gridgnn.train.run.resolve import grid_shape_for

    stats = graph_stats(open_prepared(prepared))
    for run in runs:
        config = TrainConfig(dataset=str(prepared), nprocs=args.nprocs, **run["config"])
        prediction = predict_epoch(model_spec(config, stats), stats, grid_shape_for(config, args.nprocs),
                                   comm=config.comm)
        run["predicted_bytes_per_rank"] = [int(b) for b in prediction.bytes]
        run["predicted_memory_bytes"] = [int(m) for m in prediction.memory_bytes]
        run["predicted_memory_by_component"] = {k: [int(x) for x in v] for k, v in prediction.memory.items()}


PYG_SCRIPT = r"""
import json, resource, sys, time
import numpy as np, torch, torch.nn.functional as F
from torch_geometric.nn import GCNConv
from gridgnn.data.prepared import open_prepared
torch.set_num_threads(int(sys.argv[3]))
g = open_prepared(sys.argv[1]); epochs = int(sys.argv[2])
a = g.norm_adj
adj_t = torch.sparse_csr_tensor(torch.from_numpy(np.asarray(a.indptr, dtype=np.int64)),
                                torch.from_numpy(np.asarray(a.indices, dtype=np.int64)),
                                torch.from_numpy(np.array(a.data)), a.shape)
x = torch.from_numpy(np.array(g.features)); y = torch.from_numpy(np.array(g.labels))
train = torch.from_numpy(np.array(g.train_mask))
conv1 = GCNConv(g.num_features, 16, normalize=False); conv2 = GCNConv(16, g.num_classes, normalize=False)
params = list(conv1.parameters()) + list(conv2.parameters())
opt = torch.optim.Adam(params, lr=0.01, weight_decay=5e-4)
times = []
for epoch in range(epochs):
    start = time.perf_counter()
    opt.zero_grad()
    h = F.relu(conv1(F.dropout(x, 0.5), adj_t))
    out = F.log_softmax(conv2(F.dropout(h, 0.5), adj_t), dim=1)
    loss = F.nll_loss(out[train], y[train]); loss.backward(); opt.step()
    times.append(time.perf_counter() - start)
print(json.dumps({"epoch_times_s": times,
                  "peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def pyg(prepared: Path, args: argparse.Namespace, work: Path) -> dict:
    """PyG in one process with an address-space limit; reports whether it fit and its epoch time."""
    limit = int(args.pyg_memory_gib * (1 << 30))

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    argv = [sys.executable, "-c", PYG_SCRIPT, str(prepared), str(args.epochs), str(args.threads)]
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, preexec_fn=cap)
    wall = time.perf_counter() - start
    (work / "pyg.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        return {"fits": False, "limit_gib": args.pyg_memory_gib, "error": last[:300], "wall_s": wall}
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return {"fits": True, "limit_gib": args.pyg_memory_gib, "wall_s": wall, "peak_bytes": result["peak_bytes"],
            "median_epoch_s": statistics.median(result["epoch_times_s"]), "epoch_times_s": result["epoch_times_s"]}


def gib(value: float) -> str:
    return f"{value / (1 << 30):.2f}"


def markdown(report: dict) -> str:
    lines = [f"# R-MAT scale {report['scale']}, edge factor {report['edge_factor']}, {report['features']} features, "
             f"P = {report['nprocs']}", "", f"Command: `{report['command']}`", "",
             f"Machine: {report['machine']}", "",
             f"Graph: {report['num_nodes']:,} vertices, {report['num_edges']:,} stored non-zeros (symmetrized, no "
             f"self-loops), Â {report['norm_nnz']:,} entries. Prepared once in {report['prepare_s']:.0f} s, peak "
             f"{gib(report['prepare_peak_bytes'])} GiB in that one process; workers memory-map it.", "",
             f"Interpreter baseline (peak of a worker on a tiny graph): {gib(report['baseline_bytes'])} GiB.", "",
             "| algo | grid | median epoch | bytes/rank/epoch | comm (exposed) | set-up peak/rank (max) "
             "| training peak/rank (max) | model/rank (max) | model + baseline | measured / (model + baseline) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for run in report["runs"]:
        peak, model = max(run["peak_bytes"]), max(run["predicted_memory_bytes"])
        ratios = [p / (m + report["baseline_bytes"]) for p, m in zip(run["peak_bytes"],
                                                                    run["predicted_memory_bytes"], strict=True)]
        lines.append(
            f"| {run['algo']} | {run['grid']} | {run['median_epoch_s']:.2f} s "
            f"| {run['bytes_per_rank'] / 2**20:.0f} MiB "
            f"| {run['comm_time_s']:.2f} s ({run['exposed_comm_time_s']:.2f} s) "
            f"| {gib(max(run['setup_peak_bytes']))} GiB "
            f"| {gib(peak)} GiB | {gib(model)} GiB | {gib(model + report['baseline_bytes'])} GiB "
            f"| {min(ratios):.2f}–{max(ratios):.2f} |")
    if report.get("pyg"):
        p = report["pyg"]
        if p["fits"]:
            lines += ["", f"PyG (`GCNConv(normalize=False)` on the same Â as a CSR tensor, one process, "
                      f"{report['threads']} threads): fits, peak {gib(p['peak_bytes'])} GiB, median epoch "
                      f"{p['median_epoch_s']:.2f} s."]
        else:
            lines += ["", f"PyG in one process under a {p['limit_gib']} GiB address-space limit: did not fit "
                      f"(`{p['error']}`)."]
    return "\n".join(lines) + "\n"


def plot(report: dict, path: Path) -> bool:
    """PNG: peak memory per rank, measured next to the planner (+ interpreter baseline), per algorithm.
    Returns False (and draws nothing) when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    runs, baseline = report["runs"], report["baseline_bytes"] / 2**30
    fig, ax = plt.subplots(figsize=(1.6 + 1.4 * len(runs) * report["nprocs"] / 4, 3.6))
    x, ticks, labels = 0.0, [], []
    for run in runs:
        for rank, (measured, model) in enumerate(zip(run["peak_bytes"], run["predicted_memory_bytes"], strict=True)):
            ax.bar(x, measured / 2**30, 0.4, color="tab:blue", label="measured peak" if x == 0 else None)
            ax.bar(x + 0.4, model / 2**30 + baseline, 0.4, color="tab:orange",
                   label="planner + interpreter" if x == 0 else None)
            ticks.append(x + 0.2)
            labels.append(f"{run['algo']}\nr{rank}")
            x += 1.0
        x += 0.5
    ax.set_xticks(ticks, labels, fontsize=7)
    ax.set_ylabel("GiB per rank")
    ax.set_title(f"R-MAT 2^{report['scale']}, P = {report['nprocs']}: memory per rank vs the planner", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=int, default=22)
    parser.add_argument("--edge-factor", type=int, default=16)
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--nprocs", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--replication", type=int, default=2, help="c for 1.5d")
    parser.add_argument("--algos", nargs="+", default=["1d", "1.5d", "2d"])
    parser.add_argument("--comm", choices=["dense", "sparse"], default="dense", help="--comm of every run")
    parser.add_argument("--hidden", type=int, default=16, help="--hidden of every run")
    parser.add_argument("--pyg", action="store_true", help="also try PyG in one process")
    parser.add_argument("--pyg-memory-gib", type=float, default=18.0)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="PyG's threads")
    parser.add_argument("--out", default="results/scale")
    parser.add_argument("--work", default="/tmp/gridgnn-scale", help="scratch folder (the prepared graph)")
    parser.add_argument("--plot-only", action="store_true", help="redraw OUT/memory.png from OUT/scale.json")
    args = parser.parse_args(argv)
    if args.plot_only:
        report = json.loads((Path(args.out) / "scale.json").read_text())
        plot(report, Path(args.out) / "memory.png")
        return report
    out, work = Path(args.out), Path(args.work)
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    prepared = work / "prepared"
    spec = f"rmat:scale={args.scale},edge_factor={args.edge_factor},features={args.features}"
    if not prepared.exists():
        prepare_s, prepare_peak = run_measured([*GRIDGNN, "prepare", spec, "--out", str(prepared)],
                                               work / "prepare.log")
    else:  # reuse (and say so): its numbers come from the earlier preparation
        earlier = json.loads((work / "prepare.json").read_text())
        prepare_s, prepare_peak = earlier["prepare_s"], earlier["prepare_peak_bytes"]
    (work / "prepare.json").write_text(json.dumps({"prepare_s": prepare_s, "prepare_peak_bytes": prepare_peak}))
    manifest = json.loads((prepared / "prepared.json").read_text())
    runs = [train(prepared, algo, args, work) for algo in args.algos]
    baseline = baseline_bytes(work)
    predictions(prepared, runs, args)
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    report = {
        "scale": args.scale, "edge_factor": args.edge_factor, "features": args.features, "nprocs": args.nprocs,
        "threads": args.threads, "command": shlex.join(["python", "benchmarks/scale_rmat.py", *(argv or sys.argv[1:])]),
        "machine": f"{os.cpu_count()} cores, {memory_gib:.0f} GiB",
        "num_nodes": manifest["num_nodes"], "num_edges": manifest["num_edges"], "norm_nnz": manifest["norm_nnz"],
        "prepare_s": prepare_s, "prepare_peak_bytes": prepare_peak, "baseline_bytes": baseline, "runs": runs,
        "pyg": pyg(prepared, args, work) if args.pyg else None,
    }
    (out / "scale.json").write_text(json.dumps(report, indent=1) + "\n")
    (out / "scale.md").write_text(markdown(report))
    plot(report, out / "memory.png")
    print(markdown(report))
    return report


if __name__ == "__main__":
    main()
