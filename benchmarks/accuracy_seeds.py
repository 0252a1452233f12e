"""Final-epoch test accuracy of `gridgnn train --algo local` over several seeds (the accuracy table of docs/models.md).

Kipf & Welling's setting (the `TrainConfig` defaults: 2 layers, hidden 16, dropout 0.5, Adam lr 0.01, weight
decay 5e-4, 200 epochs), one run per seed; reports every seed's accuracy, the mean, standard deviation and
minimum next to the published figure. Example (the results in ``results/accuracy/``)::

    python benchmarks/accuracy_seeds.py --dataset cora citeseer amazon-photo --seeds 10 \\
        --data-root ../shared/datasets --markdown results/accuracy/seeds.md --json results/accuracy/seeds.json
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import time
from pathlib import Path

import torch

from gridgnn.config import TrainConfig
from gridgnn.train import load_graph, run_training

PUBLISHED = {"cora": 81.5, "citeseer": 70.3, "pubmed": 79.0, "amazon-photo": 91.2, "amazon-computers": 82.6}
"""Test accuracy (%) published for GCN: Kipf & Welling 2017 (Planetoid), Shchur et al. 2018 (Amazon)."""


def seed_accuracies(dataset: str, seeds: int, *, data_root: str | None, epochs: int,
                    normalize_features: bool | None = None) -> dict:
    """Train ``dataset`` once per seed 0..seeds-1; final-epoch test accuracies and their summary.

    ``normalize_features``: None lets the dataset decide (the `gridgnn train` default), False keeps raw features.
    """
    accuracies, start = [], time.perf_counter()
    for seed in range(seeds):
        config = TrainConfig(dataset=dataset, data_root=data_root, seed=seed, epochs=epochs, quiet=True,
                             normalize_features=normalize_features)
        result = run_training(config, graph=load_graph(config))
        accuracies.append(result.metrics["final"]["test_acc"])
    return {
        "dataset": dataset, "epochs": epochs, "test_acc": accuracies,
        "mean": statistics.mean(accuracies), "sd": statistics.stdev(accuracies) if seeds > 1 else 0.0,
        "min": min(accuracies), "published": PUBLISHED.get(dataset), "seconds": time.perf_counter() - start,
    }


def markdown(records: list[dict], command: str) -> str:
    lines = [f"`{command}`", "", f"torch {torch.__version__}, final-epoch test accuracy (%), seeds 0..k-1.", "",
             "| dataset | mean | sd | min | published | every seed |", "|---|---|---|---|---|---|"]
    for r in records:
        seeds = ", ".join(f"{100 * a:.1f}" for a in r["test_acc"])
        published = "" if r["published"] is None else f"{r['published']:.1f}"
        lines.append(f"| {r['dataset']} | {100 * r['mean']:.1f} | {100 * r['sd']:.1f} | {100 * r['min']:.1f} "
                     f"| {published} | {seeds} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", nargs="+", default=["cora", "citeseer", "amazon-photo"])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--data-root")
    parser.add_argument("--no-normalize-features", action="store_true",
                        help="keep the raw features (as `gridgnn train --no-normalize-features`)")
    parser.add_argument("--json", help="write the records here")
    parser.add_argument("--markdown", help="write the table here")
    args = parser.parse_args(argv)
    records = []
    for dataset in args.dataset:
        record = seed_accuracies(dataset, args.seeds, data_root=args.data_root, epochs=args.epochs,
                                 normalize_features=False if args.no_normalize_features else None)
        print(f"{dataset}: mean {100 * record['mean']:.1f} %, sd {100 * record['sd']:.1f}, "
              f"min {100 * record['min']:.1f} ({record['seconds']:.0f} s)", flush=True)
        records.append(record)
    command = "python benchmarks/accuracy_seeds.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    if args.json:
        Path(args.json).write_text(json.dumps({"command": command, "records": records}, indent=1) + "\n")
    if args.markdown:
        Path(args.markdown).write_text(markdown(records, command))
    return records


if __name__ == "__main__":
    main()
