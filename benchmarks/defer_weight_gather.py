"""Training steps with and without ``--defer-weight-gather``, alternated in one invocation.

For each configuration (graph, P, grid; sparse communication with cached panels, full feature rows and
``metis-balanced`` order, where the deferral saves the most), ``--repeats`` pairs of ``gridgnn train`` runs,
the plain and the deferred run alternating (which goes first alternates too), each ``--epochs`` epochs. Per
run: the median step time over the epochs after the first, the busiest rank's bytes per step (all phases and
``weight_grad``) and the whole-weight gathers of the run (``comm.gather_bytes`` summed over epochs, busiest
rank). The two runs must train alike (losses within `LOSS_RTOL`); the summary gives, per configuration, the median over
repeats of each run's median step and the ratio deferred / plain.

    python benchmarks/defer_weight_gather.py --out results/defer_weight_gather --data-root ../shared/datasets

Writes ``runs.csv``, ``summary.md`` and ``command.txt`` (this machine is shared and noisy: compare ratios
within one invocation).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CONFIGS = [("coauthor-physics", 4, "2d", "2x2"), ("coauthor-physics", 16, "2d", "4x4"),
           ("coauthor-physics", 16, "3d", "2x2x4"), ("amazon-computers", 16, "2d", "4x4"),
           ("amazon-computers", 16, "3d", "2x2x4")]
LOSS_RTOL = 1e-5
"""How far apart the two runs' losses may be: equal but for rounding (the feature weights moved by rows are
summed in another order than the all-reduce's; the column deferral alone changes no bit)."""
FLAGS = ["--comm", "sparse", "--cache-panels", "--full-feature-rows", "--reorder", "metis-balanced", "--quiet"]


def run(graph: str, p: int, algo: str, grid: str, epochs: int, data_root: str, defer: bool) -> dict:
    """One ``gridgnn train`` run; its figures from the metrics file."""
    with tempfile.TemporaryDirectory() as tmp:
        metrics = Path(tmp) / "metrics.json"
        argv = [sys.executable, "-m", "gridgnn", "train", "--dataset", graph, "--data-root", data_root,
                "--algo", algo, "--nprocs", str(p), "--grid", grid, "--epochs", str(epochs), *FLAGS,
                "--defer-weight-gather" if defer else "--no-defer-weight-gather", "--metrics-out", str(metrics)]
        subprocess.run(argv, check=True, timeout=1800)
        doc = json.loads(metrics.read_text(encoding="utf-8"))
    epochs_ = doc["epochs"]
    return {"graph": graph, "p": p, "algo": algo, "grid": grid, "defer": defer,
            "deferred": doc["setup"]["defer_weight_gather"],
            "step_s": round(statistics.median(e["time_s"] for e in epochs_[1:]), 4),
            "max_bytes": max(epochs_[-1]["comm"]["bytes"]),
            "max_weight_grad_bytes": max(epochs_[-1]["comm"]["by_phase"]["weight_grad"]),
            "gather_bytes": max(sum(e["comm"]["gather_bytes"][r] for e in epochs_)
                                for r in range(len(epochs_[0]["comm"]["bytes"]))),
            "losses": [e["loss"] for e in epochs_]}


def summary(rows: list[dict]) -> list[str]:
    lines = ["| graph | P | grid | step plain (s) | step deferred (s) | deferred / plain | bytes per step plain → "
             "deferred (busiest rank) | weight_grad plain → deferred | gathers per run (deferred) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for graph, p, algo, grid in dict.fromkeys((r["graph"], r["p"], r["algo"], r["grid"]) for r in rows):
        mine = [r for r in rows if (r["graph"], r["p"], r["algo"], r["grid"]) == (graph, p, algo, grid)]
        plain = [r for r in mine if not r["defer"]]
        deferred = [r for r in mine if r["defer"]]
        a, b = statistics.median(r["step_s"] for r in plain), statistics.median(r["step_s"] for r in deferred)
        lines.append(f"| {graph} | {p} | {algo} {grid} | {a:.4f} | {b:.4f} | {b / a:.2f} | "
                     f"{plain[0]['max_bytes']:,} → {deferred[0]['max_bytes']:,} | "
                     f"{plain[0]['max_weight_grad_bytes']:,} → {deferred[0]['max_weight_grad_bytes']:,} | "
                     f"{deferred[0]['gather_bytes']:,} B |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--data-root", default="../shared/datasets")
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--configs", type=int, nargs="+", default=None,
                        help="indices into the configuration list (default: all)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "command.txt").write_text("python " + " ".join(sys.argv) + "\n", encoding="utf-8")
    rows = []
    for index, config in enumerate(CONFIGS):
        if args.configs is not None and index not in args.configs:
            continue
        for repeat in range(args.repeats):
            pair = {}
            for defer in ((False, True) if repeat % 2 == 0 else (True, False)):
                pair[defer] = run(*config, args.epochs, args.data_root, defer)
                print(f"{config} defer={defer}: step {pair[defer]['step_s']} s", flush=True)
            apart = max(abs(a - b) / max(abs(b), 1e-12) for a, b in
                        zip(pair[True]["losses"], pair[False]["losses"], strict=True))
            pair[True]["loss_rel_diff"], pair[False]["loss_rel_diff"] = apart, 0.0
            if apart > LOSS_RTOL:
                raise SystemExit(f"{config}: the deferred run's losses differ from the plain run's by {apart:.2e}")
            rows += [pair[False], pair[True]]
    with open(out / "runs.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=[k for k in rows[0] if k != "losses"], extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    lines = summary(rows)
    (out / "summary.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
