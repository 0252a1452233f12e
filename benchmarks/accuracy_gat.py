"""GAT accuracy in the setting of Veličković et al. (ICLR 2018) on Cora and CiteSeer, several seeds.

The paper's transductive setting: the public Planetoid split (20 labelled nodes per class, 500 validation,
1000 test), row-normalized features, 2 layers: 8 heads of 8 channels (concatenated) then 1 output head, dropout
0.6 on every layer's input and on the attention coefficients, Adam with lr 0.005 and L2 weight decay 5e-4 on
every parameter. Early stopping as the authors' code (``execute_cora.py``): training stops when neither the
validation loss nor the validation accuracy has improved for 100 epochs; the reported test accuracy is that
of the last epoch at which both improved (the weights they save). The paper reports 83.0 ± 0.7 (Cora) and
72.5 ± 0.7 (CiteSeer) over 100 runs. Differences from it: ReLU between the layers (gridgnn's LayerStack;
the paper uses ELU) and our layout-invariant dropout masks. Example (the results in
``results/accuracy/gat.*``)::

    OMP_NUM_THREADS=1 python benchmarks/accuracy_gat.py --seeds 10 --data-root ../shared/datasets \\
        --json results/accuracy/gat.json --markdown results/accuracy/gat.md
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
import torch.nn.functional as F

from gridgnn.config import TrainConfig
from gridgnn.nn import as_model_input, build_model
from gridgnn.train import build_aggregation, load_graph

PUBLISHED = {"cora": (83.0, 0.7), "citeseer": (72.5, 0.7)}
"""Mean and standard deviation of the test accuracy (%), Veličković et al. 2018, Table 3."""
SETTING = dict(model="gat", heads=8, hidden=8, output_heads=1, dropout=0.6, attn_dropout=0.6, lr=0.005,
               weight_decay=5e-4)


def run(graph, seed: int, *, max_epochs: int, patience: int) -> dict:
    """One training run; test accuracy of the weights saved by the authors' early-stopping rule."""
    config = TrainConfig(dataset=graph.name, seed=seed, **SETTING)
    torch.manual_seed(seed)
    model = build_model(config, graph.num_features, graph.num_classes)
    layout = build_aggregation(config, graph)
    x = as_model_input(graph.features)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    labels = torch.from_numpy(graph.labels).long()
    train, val, test = (torch.from_numpy(m) for m in (graph.train_mask, graph.val_mask, graph.test_mask))
    best_acc, best_loss, waited, saved = 0.0, float("inf"), 0, (None, 0)
    for epoch in range(1, max_epochs + 1):
        model.train()
        optimizer.zero_grad(set_to_none=True)
        F.nll_loss(model(x, layout, epoch=epoch)[train], labels[train]).backward()
        optimizer.step()
        model.eval()
        with torch.no_grad():
            log_probs = model(x, layout)
        val_loss = float(F.nll_loss(log_probs[val], labels[val]))
        val_acc = float((log_probs[val].argmax(1) == labels[val]).float().mean())
        if val_acc >= best_acc or val_loss <= best_loss:
            if val_acc >= best_acc and val_loss <= best_loss:
                saved = (float((log_probs[test].argmax(1) == labels[test]).float().mean()), epoch)
            best_acc, best_loss, waited = max(val_acc, best_acc), min(val_loss, best_loss), 0
        else:
            waited += 1
            if waited == patience:
                break
    return {"test_acc": saved[0], "saved_epoch": saved[1], "epochs": epoch}


def markdown(records: list[dict], command: str) -> str:
    lines = [f"`{command}`", "", f"torch {torch.__version__}; test accuracy (%) of the weights saved by the "
             "authors' early-stopping rule, seeds 0..k-1 (initialization and dropout; the split is the public one).",
             "", "| dataset | seeds | mean | sd | paper (Veličković et al., Table 3) | difference | epochs (median) "
             "| seconds per run |", "|---|---|---|---|---|---|---|---|"]
    for r in records:
        mean, sd = PUBLISHED[r["dataset"]]
        lines.append(f"| {r['dataset']} | {len(r['test_acc'])} | {100 * r['mean']:.1f} | {100 * r['sd']:.1f} "
                     f"| {mean:.1f} ± {sd:.1f} | {100 * r['mean'] - mean:+.1f} | "
                     f"{statistics.median(r['epochs']):.0f} | {r['seconds'] / len(r['test_acc']):.0f} |")
    return "\n".join(lines) + "\n"


def _record(dataset: str, runs: list[dict], seconds: float) -> dict:
    acc = [r["test_acc"] for r in runs]
    return {"dataset": dataset, "test_acc": acc, "mean": statistics.mean(acc),
            "sd": statistics.stdev(acc) if len(acc) > 1 else 0.0, "epochs": [r["epochs"] for r in runs],
            "saved_epochs": [r["saved_epoch"] for r in runs], "setting": SETTING, "seconds": seconds}


def _write(args: argparse.Namespace, records: list[dict], command: str) -> None:
    if args.json:
        Path(args.json).write_text(json.dumps({"command": command, "records": records}, indent=1) + "\n")
    if args.markdown:
        Path(args.markdown).write_text(markdown(records, command))


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", nargs="+", default=["cora", "citeseer"], choices=sorted(PUBLISHED))
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--max-epochs", type=int, default=1000)
    parser.add_argument("--patience", type=int, default=100)
    parser.add_argument("--data-root")
    parser.add_argument("--json")
    parser.add_argument("--markdown")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    command = "python benchmarks/accuracy_gat.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    records = []
    for dataset in args.dataset:
        graph = load_graph(TrainConfig(dataset=dataset, data_root=args.data_root))
        start, runs = time.perf_counter(), []
        for seed in range(args.seeds):  # results are written after every run: an interrupted run keeps them
            runs.append(run(graph, seed, max_epochs=args.max_epochs, patience=args.patience))
            record = _record(dataset, runs, time.perf_counter() - start)
            _write(args, records + [record], command)
        records.append(record)
        print(markdown(records[-1:], command), flush=True)
    return records


if __name__ == "__main__":
    main()
