"""The set-up of ``--comm cover`` (cutting each pair's block of Â, its matching and cover) against one epoch.

For each graph, grid and source tree, one ``gridgnn train --comm cover --reorder metis-balanced`` run: the
metrics' ``setup.spmm_setup_s`` (the slowest rank's seconds building its blocks: every cut and cover it takes
part in) and the median of the epochs' ``time_s`` (one training step and its evaluation), skipping the first.
With two trees (``--tree before=DIR --tree after=DIR``: repository roots, each put first on ``PYTHONPATH``) the
runs alternate, tree by tree, for each case; ``--repeats`` rounds of that, and each figure is the median over
rounds (P processes share this machine's two cores, so one run of the set-up is noisy).

Usage (the committed run)::

    python benchmarks/cover_setup.py --data-root ../shared/datasets --tree before=/tmp/before --tree after=. \\
        --out results/sparse_comm/cover_setup
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CASES = [("coauthor-physics", "1d", 2), ("coauthor-physics", "1d", 4), ("coauthor-physics", "1d", 8),
         ("coauthor-physics", "1.5d", 8), ("amazon-computers", "1d", 2), ("amazon-computers", "1d", 4),
         ("amazon-computers", "1d", 8), ("amazon-computers", "1.5d", 8)]
"""(dataset, algorithm, P); 1.5d with replication 2."""


def run(tree: Path, dataset: str, algo: str, p: int, data_root: str, epochs: int, folder: Path) -> dict:
    metrics = folder / f"{tree.name}-{dataset}-{algo}-{p}.json"
    command = [sys.executable, "-m", "gridgnn", "train", "--dataset", dataset, "--data-root", data_root,
               "--nprocs", str(p), "--algo", algo, "--comm", "cover", "--reorder", "metis-balanced",
               "--epochs", str(epochs), "--metrics", str(metrics)]
    if algo == "1.5d":
        command += ["--replication", "2"]
    env = dict(os.environ, PYTHONPATH=str(tree.resolve()))
    subprocess.run(command, env=env, check=True, capture_output=True, cwd=tree)
    record = json.loads(metrics.read_text())
    steps = [e["time_s"] for e in record["epochs"][1:]]
    setup = record["setup"]["spmm_setup_s"]
    return {"setup_s": round(setup, 4), "median_epoch_s": round(statistics.median(steps), 4),
            "setup_over_epoch": round(setup / statistics.median(steps), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", default="../shared/datasets")
    parser.add_argument("--tree", action="append", default=[], help="NAME=DIR (default: this=.)")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    trees = [(name, Path(path)) for name, path in (t.split("=", 1) for t in args.tree or ["this=."])]
    data_root = str(Path(args.data_root).resolve())
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for dataset, algo, p in CASES:
            row = {"dataset": dataset, "grid": f"{algo} {p}" + (" (c = 2)" if algo == "1.5d" else "")}
            runs: dict[str, list[dict]] = {name: [] for name, _ in trees}
            for _ in range(args.repeats):
                for name, tree in trees:
                    runs[name].append(run(tree, dataset, algo, p, data_root, args.epochs, Path(tmp)))
            for name, _ in trees:
                row[name] = {key: statistics.median(r[key] for r in runs[name]) for key in runs[name][0]}
                row[name]["runs"] = runs[name]
            rows.append(row)
            print(json.dumps(row), flush=True)
    lines = ["# `--comm cover`: set-up against one epoch", "",
             "Command: `python benchmarks/cover_setup.py " + " ".join(sys.argv[1:]) + "`", "",
             "Set-up: `setup.spmm_setup_s` (slowest rank). Epoch: median `time_s` of epochs 2-"
             f"{args.epochs}. Medians of {args.repeats} runs per case and tree, alternating; P processes share this "
             "machine's two cores.", "",
             "| dataset | grid | " + " | ".join(f"{n}: set-up s | {n}: epoch s | {n}: set-up / epoch" for n, _ in trees)
             + " |", "|---|---|" + "---|---|---|" * len(trees)]
    for row in rows:
        cells = [f"{row[n]['setup_s']:.3f} | {row[n]['median_epoch_s']:.3f} | **{row[n]['setup_over_epoch']:.2f}**"
                 for n, _ in trees]
        lines.append(f"| {row['dataset']} | {row['grid']} | " + " | ".join(cells) + " |")
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "cover_setup.json").write_text(json.dumps(rows, indent=1) + "\n")
        (args.out / "cover_setup.md").write_text(report)


if __name__ == "__main__":
    main()
