"""Accuracy on the three tasks' generated graphs (docs/tasks.md, "Measured accuracy"): GCN and GraphSAGE trained
by gridgnn against a feature-only MLP, over several seeds.

Tasks and their generated graphs (`gridgnn.data.generators.csbm`, `gridgnn.data.task_generators`):
multiclass with 2 % of the vertices labelled (``csbm:...,labelled=0.02``), multilabel whose targets depend on
neighbourhoods (``multilabel:...``) and the steady temperature of a heated plate (``heat:...``). Seed s
generates the graph and initializes the models. Every model has the same width, depth, dropout, epochs and
optimizer (Adam, the `TrainConfig` defaults unless given), the same loss over the same present target
entries of the same training vertices (`gridgnn.nn.loss.masked_task_loss`), and is scored with the same
functions (`gridgnn.train.loop.task_metrics.split_metrics`) at its best validation epoch (the weights ``gridgnn
train`` keeps by default). The MLP (plain torch, written here) sees only each vertex's own features.

After the runs it asserts that GCN beats the MLP on multilabel ROC-AUC (mean over seeds) and that GCN's
regression MSE is below half the variance of the test targets. Example (the committed figures)::

    python benchmarks/tasks_accuracy.py --seeds 3 --markdown results/tasks/accuracy.md \\
        --json results/tasks/accuracy.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import statistics
import sys
import time

import numpy as np
import torch
from torch import nn

import gridgnn
from gridgnn.config import LOWER_IS_BETTER, TrainConfig
from gridgnn.data.targets import target_block
from gridgnn.nn.loss import masked_task_loss
from gridgnn.safe_files import atomic_write
from gridgnn.train.loop.early_stop import ValidationTracker
from gridgnn.train.loop.task_metrics import SplitRows, resolve_metric, split_metrics

DATASETS = {
    "multiclass": "csbm:nodes=10000,labelled=0.02",
    "multilabel": "multilabel:nodes=3000",
    "regression": "heat:nodes=3000",
}
"""The generated graph of each task (a generator spec, as ``--dataset`` takes it)."""

MSE_SHARE = 0.5
"""GCN's regression test MSE must be below this share of the test targets' variance."""


class _OneProcess:
    """The one-process stand-in for a layout's ``global_sum`` (every row is here: the identity)."""

    @staticmethod
    def global_sum(values: torch.Tensor) -> torch.Tensor:
        return values


def mlp_run(graph, config: TrainConfig, metric: str) -> dict:
    """Train an MLP of ``config.layers`` linear layers on ``graph``'s own features (n, f) with ``config``'s
    width, dropout (on every layer's input, as gridgnn's models), ReLU between layers, epochs and Adam
    settings; returns the ``metric`` on the test split at the best validation epoch and at the last one, and
    the best epoch."""
    torch.manual_seed(config.seed)
    widths = [graph.num_features] + [config.hidden] * (config.layers - 1) + [graph.num_classes]
    layers: list[nn.Module] = []
    for k in range(config.layers):
        layers += [nn.Dropout(config.dropout), nn.Linear(widths[k], widths[k + 1])]
        layers += [nn.ReLU()] if k < config.layers - 1 else []
    model = nn.Sequential(*layers)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    x = torch.from_numpy(graph.dense_features())
    targets = torch.from_numpy(target_block(graph.labels))
    masks = [graph.train_mask, graph.val_mask, graph.test_mask]
    mask_tensors = [torch.from_numpy(m) for m in masks]
    rows = SplitRows.of(graph.labels, masks, (0, graph.num_nodes), torch.device("cpu"))

    def forward() -> torch.Tensor:
        out = model(x)
        return torch.log_softmax(out, dim=1) if graph.task == "multiclass" else out

    judge, test_at_best, test = ValidationTracker(higher_is_better=metric not in LOWER_IS_BETTER), 0.0, 0.0
    for epoch in range(1, config.epochs + 1):
        model.train()
        optimizer.zero_grad()
        masked_task_loss(forward(), targets, mask_tensors[0], graph.task).backward()
        optimizer.step()
        model.eval()
        with torch.no_grad():
            _, val, test = split_metrics(forward(), targets, mask_tensors, graph.task, metric, _OneProcess, rows)
        if judge.update(val, epoch):  # the best epoch as gridgnn's training loop judges it
            test_at_best = test
    return {"test_metric_at_best_val": test_at_best, "test_metric": test, "best_epoch": judge.best_epoch}


def gnn_run(spec: str, model: str, config: TrainConfig) -> dict:
    """Train ``model`` with `gridgnn.fit` on ``spec``; the same keys as `mlp_run`, from the metrics file."""
    result = gridgnn.fit(spec, model=model, seed=config.seed, epochs=config.epochs, hidden=config.hidden,
                         layers=config.layers, dropout=config.dropout, lr=config.lr,
                         weight_decay=config.weight_decay)
    final = result.metrics["final"]
    return {key: final[key] for key in ("test_metric_at_best_val", "test_metric", "best_epoch")}


def task_records(task: str, spec: str, seeds: int, models: list[str], config: TrainConfig) -> dict:
    """Every model's runs on ``spec`` for seeds 0..seeds-1, and the test targets' variance of each seed."""
    runs: dict[str, list[dict]] = {name: [] for name in [*models, "mlp"]}
    variances, metric, start = [], None, time.perf_counter()
    for seed in range(seeds):
        seeded = dataclasses.replace(config, seed=seed)
        graph = gridgnn.as_graph(spec, seed=seed)
        if graph.task != task:
            raise SystemExit(f"{spec} is a {graph.task} graph, not {task}")
        metric = resolve_metric("auto", graph.task)
        variances.append(float(np.nanvar(graph.labels[graph.test_mask])) if task == "regression" else None)
        for name in models:
            runs[name].append(gnn_run(spec, name, seeded))
        runs["mlp"].append(mlp_run(graph, seeded, metric))
    summary = {}
    for name, values in runs.items():
        scores = [r["test_metric_at_best_val"] for r in values]
        summary[name] = {"mean": statistics.mean(scores), "sd": statistics.stdev(scores) if seeds > 1 else 0.0,
                         "test_metric_at_best_val": scores, "runs": values}
    return {"task": task, "dataset": spec, "metric": metric, "seeds": seeds, "models": summary,
            "test_target_variance": variances, "seconds": time.perf_counter() - start}


def check(records: list[dict]) -> list[str]:
    """What the figures must show: GCN > MLP on multilabel ROC-AUC, GCN's MSE < MSE_SHARE * variance.
    Returns the statements checked (raises AssertionError on the first that fails)."""
    checked = []
    for r in records:
        gcn, mlp = r["models"].get("gcn"), r["models"]["mlp"]
        if gcn is None:
            continue
        if r["task"] == "multilabel":
            assert gcn["mean"] > mlp["mean"], f"multilabel: GCN ROC-AUC {gcn['mean']:.3f} <= MLP {mlp['mean']:.3f}"
            checked.append(f"multilabel: GCN ROC-AUC {gcn['mean']:.3f} > MLP {mlp['mean']:.3f}")
        if r["task"] == "regression":
            variance = statistics.mean(r["test_target_variance"])
            assert gcn["mean"] < MSE_SHARE * variance, \
                f"regression: GCN MSE {gcn['mean']:.3f} is not below {MSE_SHARE} x variance {variance:.3f}"
            checked.append(f"regression: GCN MSE {gcn['mean']:.3f} < {MSE_SHARE} x test variance {variance:.3f}")
    return checked


def markdown(records: list[dict], command: str, config: TrainConfig, checked: list[str]) -> str:
    """The table of docs/tasks.md: task, dataset, metric, each model's mean ± sd, the MLP beside them."""
    lines = [f"`{command}`", "",
             f"torch {torch.__version__}; {config.layers} layers, hidden {config.hidden}, dropout {config.dropout}, "
             f"Adam lr {config.lr}, weight decay {config.weight_decay}, {config.epochs} epochs; the test metric "
             "at the best validation epoch, mean ± sd over seeds 0..k-1 (seed: graph and initialization).", ""]
    models = [m for m in records[0]["models"] if m != "mlp"]
    lines += ["| task | dataset | metric | " + " | ".join(models) + " | feature-only MLP |",
              "|---|---|---|" + "---|" * (len(models) + 1)]
    for r in records:
        cells = [f"{r['models'][m]['mean']:.3f} ± {r['models'][m]['sd']:.3f}" for m in [*models, "mlp"]]
        lines.append(f"| {r['task']} | `{r['dataset']}` | {r['metric']} | " + " | ".join(cells) + " |")
    regression = [r for r in records if r["task"] == "regression"]
    if regression:
        variance = statistics.mean(regression[0]["test_target_variance"])
        lines += ["", f"Regression targets' test variance: {variance:.3f} (mean over seeds; an MSE below it beats "
                  "predicting the mean)."]
    lines += ["", "Checked: " + "; ".join(checked) + "." if checked else ""]
    return "\n".join(lines).rstrip() + "\n"


def _write(path: str, text: str) -> None:
    with atomic_write(path, "benchmark output") as stream:
        stream.write(text.encode())


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for task, spec in DATASETS.items():
        parser.add_argument(f"--{task}", default=spec, help=f"the {task} graph (default {spec})")
    parser.add_argument("--tasks", nargs="+", choices=list(DATASETS), default=list(DATASETS))
    parser.add_argument("--models", nargs="+", choices=["gcn", "sage", "gin"], default=["gcn", "sage"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--dropout", type=float, default=0.5)
    parser.add_argument("--json", help="write the raw numbers here")
    parser.add_argument("--markdown", help="write the table here")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    config = TrainConfig(epochs=args.epochs, hidden=args.hidden, dropout=args.dropout)
    records = []
    for task in args.tasks:
        record = task_records(task, getattr(args, task), args.seeds, args.models, config)
        print(f"{task} ({record['metric']}): " + ", ".join(f"{m} {v['mean']:.3f} ± {v['sd']:.3f}"
              for m, v in record["models"].items()) + f" ({record['seconds']:.0f} s)", flush=True)
        records.append(record)
    checked = check(records)
    command = "python benchmarks/tasks_accuracy.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    if args.json:
        _write(args.json, json.dumps({"command": command, "config": {k: getattr(config, k) for k in
               ("layers", "hidden", "dropout", "lr", "weight_decay", "epochs")}, "records": records}, indent=1) + "\n")
    if args.markdown:
        _write(args.markdown, markdown(records, command, config, checked))
    return records


if __name__ == "__main__":
    main()
