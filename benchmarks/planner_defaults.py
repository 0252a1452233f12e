"""What a run with no execution flags moves and how fast it steps: today's default against the planner's choice.

Issue 39's table. For each graph and P, four configurations, each a real ``gridgnn train`` command:

- ``old default``: what ``gridgnn train --nprocs P`` ran before the planner chose the execution options:
  ``--algo auto`` over dense communication in the graph's own order, no switches, priced on this machine's
  profile (``cpu-local``). Run with those flags pinned (``--comm dense --reorder none --no-cache-panels
  --no-full-feature-rows --no-defer-weight-gather``) and its algorithm and grid.
- ``new default (cpu-local)``: ``gridgnn train --nprocs P`` with no execution flag at all (this machine's
  profile, the default on a CPU).
- ``new default (gpu-cluster)``: the same with ``--profile gpu-cluster``.
- ``fewest bytes``: the configuration of ``gridgnn plan`` (every algorithm, grid, comm, order and switch)
  whose busiest rank receives the fewest bytes per step, pinned.

Bytes per rank per step (max over ranks) come from the planner's model for every row; where a row is run
(``--measure P ...``), the measured bytes of its last epoch must equal the model (checked: the script fails
otherwise) and its step time is the median over the epochs after the first. The old default and the new
cpu-local default are run ``--repeats`` times alternating (which goes first alternates too), and the ratio
of their medians is reported: the issue's goal is new / old <= 1.05 at P = 8 on this machine.

    python benchmarks/planner_defaults.py --out results/planner_defaults --data-root ../shared/datasets

Writes ``rows.csv``, ``summary.md`` and ``command.txt``. The random geometric graph (12,000 vertices in the
unit square, ids in random order: strong hidden locality) is generated here, saved as a native ``.npz``.
"""

from __future__ import annotations

import argparse
import csv
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp

PINNED_OLD = ["--comm", "dense", "--reorder", "none", "--no-cache-panels", "--no-full-feature-rows",
              "--no-defer-weight-gather"]


def rgg(path: Path, n: int = 12_000, degree: float = 8.0, seed: int = 0) -> str:
    """A random geometric graph (points in random order), 16 random features, 4 quadrant classes, saved."""
    from scipy.spatial import cKDTree

    from gridgnn.data import save_graph
    from gridgnn.data.graph import Graph

    rng = np.random.default_rng(seed)
    points = rng.random((n, 2))
    pairs = cKDTree(points).query_pairs(np.sqrt(degree / (np.pi * n)), output_type="ndarray")
    rows, cols = np.r_[pairs[:, 0], pairs[:, 1]], np.r_[pairs[:, 1], pairs[:, 0]]
    adj = sp.coo_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(n, n)).tocsr()
    labels = (points[:, 0] > 0.5).astype(np.int64) * 2 + (points[:, 1] > 0.5)
    split = rng.random(n)
    graph = Graph(adj, rng.standard_normal((n, 16)).astype(np.float32), labels, split < 0.6,
                  (split >= 0.6) & (split < 0.8), split >= 0.8, 4, name="rgg-12k")
    return str(save_graph(graph, path))


def plan_entries(dataset: list[str], p: int, *flags: str) -> list[dict]:
    """``gridgnn plan --json`` for one P (best first)."""
    argv = [sys.executable, "-m", "gridgnn", "plan", *dataset, "--nprocs", str(p), "--json", *flags]
    done = subprocess.run(argv, check=True, capture_output=True, text=True, timeout=1800)
    return json.loads(done.stdout)


def pinned_flags(entry: dict) -> list[str]:
    """The train flags that run exactly ``entry``."""
    flags = ["--algo", entry["algo"], "--comm", entry["comm"], "--reorder", entry["reorder"]]
    flags += ["--grid", entry["grid"]] if entry["algo"] in ("2d", "3d") else []
    flags += ["--replication", str(entry["replication"])] if entry["algo"] == "1.5d" else []
    for key, name in (("cache_panels", "cache-panels"), ("full_feature_rows", "full-feature-rows"),
                      ("defer_weight_gather", "defer-weight-gather")):
        flags.append(f"--{name}" if entry[key] else f"--no-{name}")
    return flags


def label(entry: dict) -> str:
    options = [o for o, on in (("cache", entry["cache_panels"]), ("rows", entry["full_feature_rows"]),
                               ("defer", entry["defer_weight_gather"])) if on]
    return (f"{entry['algo']} {entry['grid']}, {entry['comm']}, order {entry['reorder']}"
            + (f", {'+'.join(options)}" if options else ""))


def train(dataset: list[str], p: int, flags: list[str], epochs: int) -> dict:
    """One ``gridgnn train`` run: the configuration it chose, its busiest rank's bytes of the last step and
    its median step time (epochs after the first)."""
    with tempfile.TemporaryDirectory() as tmp:
        metrics = Path(tmp) / "metrics.json"
        argv = [sys.executable, "-m", "gridgnn", "train", *dataset, "--nprocs", str(p), "--epochs", str(epochs),
                "--quiet", "--metrics-out", str(metrics), *flags]
        subprocess.run(argv, check=True, timeout=1800)
        doc = json.loads(metrics.read_text(encoding="utf-8"))
    config, epochs_ = doc["config"], doc["epochs"]
    return {"algo": config["algo"], "grid": config["grid_shape"], "comm": config["comm"],
            "reorder": config["reorder"], "cache_panels": config["cache_panels"],
            "full_feature_rows": config["full_feature_rows"],
            "defer_weight_gather": config["defer_weight_gather"],
            "measured_bytes": max(epochs_[-1]["comm"]["bytes"]),
            "step_s": statistics.median(e["time_s"] for e in epochs_[1:]),
            "loss": epochs_[-1]["loss"]}


def same_configuration(run: dict, entry: dict) -> bool:
    return all(run[k] == entry[k] for k in ("algo", "comm", "reorder", "cache_panels", "full_feature_rows",
                                            "defer_weight_gather")) and run["grid"] == entry["grid"]


def rows_for(name: str, dataset: list[str], p: int, measure: bool, epochs: int, repeats: int) -> list[dict]:
    old = plan_entries(dataset, p, "--profile", "cpu-local", *PINNED_OLD)[0]
    new_cpu = plan_entries(dataset, p, "--profile", "cpu-local")
    new_gpu = plan_entries(dataset, p, "--profile", "gpu-cluster")[0]
    fewest = min(new_cpu, key=lambda e: (e["bytes_per_rank"], e["predicted_epoch_s"]))
    configs = {"old default": (old, pinned_flags(old)), "new default (cpu-local)": (new_cpu[0], []),
               "new default (gpu-cluster)": (new_gpu, ["--profile", "gpu-cluster"]),
               "fewest bytes": (fewest, pinned_flags(fewest))}
    rows = {key: {"graph": name, "p": p, "configuration": key, "chosen": label(entry),
                  "model_bytes": entry["bytes_per_rank"], "flags": shlex.join(flags), "steps_s": []}
            for key, (entry, flags) in configs.items()}
    if measure:
        timed = ["old default", "new default (cpu-local)"]
        for k in range(repeats):
            for key in timed if k % 2 == 0 else timed[::-1]:
                entry, flags = configs[key]
                run = train(dataset, p, flags, epochs)
                _check(run, entry, key, name, p)
                rows[key]["steps_s"].append(run["step_s"])
                rows[key]["measured_bytes"] = run["measured_bytes"]
        for key in ("new default (gpu-cluster)", "fewest bytes"):
            entry, flags = configs[key]
            run = train(dataset, p, flags, epochs)
            _check(run, entry, key, name, p)
            rows[key]["steps_s"].append(run["step_s"])
            rows[key]["measured_bytes"] = run["measured_bytes"]
    for row in rows.values():
        row["step_s"] = statistics.median(row["steps_s"]) if row["steps_s"] else None
    return list(rows.values())


def _check(run: dict, entry: dict, key: str, name: str, p: int) -> None:
    if not same_configuration(run, entry):
        raise SystemExit(f"{name} P={p} {key}: the run chose {run}, the plan {label(entry)}")
    if run["measured_bytes"] != entry["bytes_per_rank"]:
        raise SystemExit(f"{name} P={p} {key}: measured {run['measured_bytes']} B, model {entry['bytes_per_rank']} B")


def summary(rows: list[dict]) -> list[str]:
    lines = ["| graph | P | configuration | what it runs | bytes per rank per step (model; = measured where run) | "
             "vs old default | median step (s) | vs old default |", "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        old = next(r for r in rows if (r["graph"], r["p"], r["configuration"]) ==
                   (row["graph"], row["p"], "old default"))
        step = f"{row['step_s']:.4f}" if row["step_s"] is not None else "–"
        ratio = f"{row['step_s'] / old['step_s']:.3f}" if row["step_s"] and old["step_s"] else "–"
        measured = " (measured)" if "measured_bytes" in row else ""
        lines.append(f"| {row['graph']} | {row['p']} | {row['configuration']} | {row['chosen']} | "
                     f"{row['model_bytes']:,}{measured} | {old['model_bytes'] / row['model_bytes']:.1f}x fewer | "
                     f"{step} | {ratio} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--data-root", default="../shared/datasets")
    parser.add_argument("--graphs", nargs="+", default=["rgg-12k", "amazon-computers", "coauthor-physics"])
    parser.add_argument("--nprocs", type=int, nargs="+", default=[4, 8, 16])
    parser.add_argument("--measure", type=int, nargs="*", default=[8], help="process counts to run (default 8)")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.graphs:
            dataset = (["--dataset", rgg(Path(tmp) / "rgg-12k.npz")] if name == "rgg-12k"
                       else ["--dataset", name, "--data-root", args.data_root])
            for p in args.nprocs:
                rows += rows_for(name, dataset, p, p in args.measure, args.epochs, args.repeats)
                print(f"{name} P={p} done", flush=True)
    with open(out / "rows.csv", "w", newline="", encoding="utf-8") as handle:
        fields = [k for k in rows[0] if k != "steps_s"] + ["measured_bytes", "steps_s"]
        writer = csv.DictWriter(handle, fieldnames=list(dict.fromkeys(fields)))
        writer.writeheader()
        writer.writerows({**r, "steps_s": " ".join(f"{s:.4f}" for s in r["steps_s"])} for r in rows)
    (out / "summary.md").write_text("\n".join(summary(rows)) + "\n", encoding="utf-8")
    (out / "command.txt").write_text("python " + shlex.join(sys.argv) + "\n", encoding="utf-8")
    print("\n".join(summary(rows)))


if __name__ == "__main__":
    main()
