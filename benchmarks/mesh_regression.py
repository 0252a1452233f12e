"""The mesh example of docs/edge-features.md: does reading the edges' features pay on a physical problem?

Trains each model on ``--dataset mesh:nodes=N`` (anisotropic heat conduction on a Delaunay-triangulated plate:
`gridgnn.data.task_generators.mesh`) with ``gridgnn train --nprocs P --algo 1d``, for ``--seeds`` seeds (the
seed draws the mesh, its split and the weights), and reports the test MSE at the best validation epoch (targets
have unit standard deviation: predicting the mean scores about 1), the step time and the bytes per rank per
step, against the feature-only models:

- with edge features: ``meshgraphnet`` (edges updated per layer), ``gine``;
- features only: ``gin``, ``sage``, ``gcn`` (the same graph, its edges' features unread).

Usage (the committed run, ``results/mesh/``)::

    python benchmarks/mesh_regression.py --nodes 3000 --nprocs 4 --epochs 300 --seeds 3 --out results/mesh
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EDGE_MODELS = ("meshgraphnet", "gine")
FEATURE_MODELS = ("gin", "sage", "gcn")


def run_one(model: str, seed: int, args) -> dict:
    """One ``gridgnn train`` run; its test MSE at the best validation epoch, step time and bytes."""
    with tempfile.TemporaryDirectory() as folder:
        metrics = Path(folder) / "metrics.json"
        command = [sys.executable, "-m", "gridgnn", "train", "--dataset", f"mesh:nodes={args.nodes}",
                   "--model", model, "--nprocs", str(args.nprocs), "--algo", "1d", "--epochs", str(args.epochs),
                   "--layers", str(args.layers), "--hidden", str(args.hidden), "--dropout", "0",
                   "--lr", str(args.lr), "--weight-decay", "0", "--seed", str(seed), "--threads", "1", "--quiet",
                   "--metrics-out", str(metrics)]
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env={**os.environ, "OMP_NUM_THREADS": "1"})
        wall = time.perf_counter() - start
        document = json.loads(metrics.read_text())
    final = document["final"]
    steps = [epoch["time_s"] for epoch in document["epochs"]]
    return {"model": model, "seed": seed, "test_mse": final["test_metric_at_best_val"],
            "best_epoch": final["best_epoch"], "median_step_s": statistics.median(steps),
            "bytes_per_rank": max(document["epochs"][-1]["comm"]["bytes"]), "wall_s": wall,
            "command": " ".join(command[1:])}


def summarize(records: list[dict]) -> list[dict]:
    rows = []
    for model in (*EDGE_MODELS, *FEATURE_MODELS):
        mine = [r for r in records if r["model"] == model]
        if not mine:
            continue
        mse = [r["test_mse"] for r in mine]
        rows.append({"model": model, "edge_features": model in EDGE_MODELS, "seeds": len(mine),
                     "test_mse_mean": statistics.mean(mse),
                     "test_mse_sd": statistics.stdev(mse) if len(mse) > 1 else 0.0,
                     "median_step_ms": 1e3 * statistics.median(r["median_step_s"] for r in mine),
                     "bytes_per_rank": max(r["bytes_per_rank"] for r in mine)})
    return rows


def markdown(rows: list[dict], args) -> str:
    lines = [f"# Mesh regression: {args.nodes} vertices, {args.nprocs} processes (1d), {args.epochs} epochs, "
             f"{args.layers} layers of {args.hidden}, {args.seeds} seeds", "",
             "Test MSE at the best validation epoch (targets of unit standard deviation), median training step, "
             "largest bytes per rank per step.", "",
             "| model | edge features | test MSE (mean ± sd) | median step | bytes per rank |", "|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['model']} | {'yes' if row['edge_features'] else 'no'} | {row['test_mse_mean']:.4f} ± "
                     f"{row['test_mse_sd']:.4f} | {row['median_step_ms']:.1f} ms | {row['bytes_per_rank']:,} |")
    best_edge = min((r for r in rows if r["edge_features"]), key=lambda r: r["test_mse_mean"], default=None)
    best_plain = min((r for r in rows if not r["edge_features"]), key=lambda r: r["test_mse_mean"], default=None)
    if best_edge and best_plain:
        lines += ["", f"Best with edge features ({best_edge['model']}) over best without ({best_plain['model']}): "
                  f"MSE ratio {best_edge['test_mse_mean'] / best_plain['test_mse_mean']:.3f}."]
    lines += ["", "Command: `python benchmarks/mesh_regression.py " + " ".join(sys.argv[1:]) + "`"]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=3000)
    parser.add_argument("--nprocs", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=300)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.005)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--models", nargs="*", default=[*EDGE_MODELS, *FEATURE_MODELS])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    records = []
    for seed in range(args.seeds):
        for model in args.models:
            records.append(run_one(model, seed, args))
            print(json.dumps({k: records[-1][k] for k in ("model", "seed", "test_mse", "median_step_s")}), flush=True)
    rows = summarize(records)
    report = markdown(rows, args)
    print(report)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "mesh_regression.json").write_text(json.dumps({"rows": rows, "runs": records}, indent=1) + "\n")
        (args.out / "mesh_regression.md").write_text(report)


if __name__ == "__main__":
    main()
