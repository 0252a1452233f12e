"""Why the low-precision study runs GIN on the Amazon graphs with ``--gin-norm layer``: GIN without a normalization
layer does not train there, in gridgnn or in PyG, at float32 on one process; with a norm in its MLP it does.

Each row is one 200-epoch training on one process (no communication, so no precision involved), test accuracy at
the best validation epoch, on the same preprocessed graph and split (`gridgnn.data.registry.load_dataset`,
seeded as ``--seed``):

- ``gridgnn``: ``gridgnn.fit(dataset, model="gin", ...)``, the study's settings (hidden 64, dropout 0.5,
  Adam lr 0.01, weight decay 5e-4), i.e. ``gridgnn train --algo local --model gin --hidden 64``;
- ``pyg``: PyG's ``GINConv`` with the same MLP ``Linear(in, out), ReLU, Linear(out, out)``, the same dropout
  and optimizer, on the same edges (a torch CSR ``adj_t``);
- ``pyg+batchnorm``: the same with ``BatchNorm1d(out)`` after the MLP's first linear (the GIN paper's MLP);
- ``gridgnn+layernorm``: ``gridgnn.fit(..., gin_norm="layer")`` (``--gin-norm layer``: a per-vertex LayerNorm
  after the MLP's first linear, `gridgnn.nn.norm`);
- ``pyg+layernorm``: PyG's ``GINConv`` with ``LayerNorm(out)`` in the same place (what ``gridgnn.to_pyg`` builds
  from such a model).

gridgnn has no batch norm (its statistics would be sums over the vertex split, and its running statistics state
that model files and checkpoints do not carry); the layer norm needs neither. The committed results: the first
three variants (recorded as run before the layer-norm variants existed, without ``--variants``), then the two
layer-norm variants appended::

    python benchmarks/gin_amazon.py --data-root ../shared/datasets --out results/comm_precision/gin_amazon
    python benchmarks/gin_amazon.py --data-root ../shared/datasets --variants gridgnn+layernorm pyg+layernorm \
        --append --out results/comm_precision/gin_amazon
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

DATASETS = ("amazon-photo", "amazon-computers")
VARIANTS = ("gridgnn", "pyg", "pyg+batchnorm", "gridgnn+layernorm", "pyg+layernorm")
NORMS = {"batchnorm": "batch", "layernorm": "layer"}
"""A variant's suffix -> the norm in its MLP (none without a suffix)."""


def _mlp(f_in: int, f_out: int, norm_kind: str | None) -> torch.nn.Sequential:
    """``Linear(in, out), [norm,] ReLU, Linear(out, out)``; ``norm_kind``: None, ``batch`` or ``layer``."""
    norm = {None: [], "batch": [torch.nn.BatchNorm1d(f_out)], "layer": [torch.nn.LayerNorm(f_out)]}[norm_kind]
    return torch.nn.Sequential(torch.nn.Linear(f_in, f_out), *norm, torch.nn.ReLU(), torch.nn.Linear(f_out, f_out))


def train_pyg(graph, *, seed: int, hidden: int, epochs: int, lr: float, norm: str | None) -> dict:
    """A 2-layer PyG GIN (dropout, conv, ReLU, dropout, conv) on ``graph``; test accuracy at the best validation
    epoch (the first such epoch on ties, as gridgnn's ``best_epoch``)."""
    from torch_geometric.nn import GINConv

    torch.manual_seed(seed)
    features = graph.features.toarray() if hasattr(graph.features, "toarray") else np.asarray(graph.features)
    x = torch.as_tensor(features, dtype=torch.float32)
    adj = graph.adj.tocsr()  # adj[dst, src]: row = target, PyG's adj_t (its fused sparse-matrix product)
    adj_t = torch.sparse_csr_tensor(torch.as_tensor(adj.indptr, dtype=torch.long),
                                    torch.as_tensor(adj.indices, dtype=torch.long),
                                    torch.ones(adj.nnz, dtype=torch.float32), adj.shape,
                                    check_invariants=False)
    y = torch.as_tensor(graph.labels)
    train, val, test = (torch.as_tensor(m) for m in (graph.train_mask, graph.val_mask, graph.test_mask))
    convs = torch.nn.ModuleList([GINConv(_mlp(x.shape[1], hidden, norm)),
                                 GINConv(_mlp(hidden, graph.num_classes, norm))])
    optimizer = torch.optim.Adam(convs.parameters(), lr=lr, weight_decay=5e-4)

    def forward(training: bool) -> torch.Tensor:
        convs.train(training)
        h = F.dropout(x, 0.5, training)
        h = F.dropout(torch.relu(convs[0](h, adj_t)), 0.5, training)
        return convs[1](h, adj_t)

    best = (-1.0, -1, 0.0)
    for epoch in range(1, epochs + 1):
        optimizer.zero_grad()
        F.cross_entropy(forward(True)[train], y[train]).backward()
        optimizer.step()
        with torch.no_grad():
            predicted = forward(False).argmax(1)
        val_acc = float((predicted[val] == y[val]).float().mean())
        if val_acc > best[0]:
            best = (val_acc, epoch, float((predicted[test] == y[test]).float().mean()))
    return {"best_val_acc": best[0], "best_epoch": best[1], "test_acc": best[2],
            "classes_predicted": int(predicted.unique().numel())}


def train_gridgnn(dataset: str, data_root: str, *, seed: int, hidden: int, epochs: int, lr: float,
                  norm: str | None) -> dict:
    import gridgnn

    result = gridgnn.fit(dataset, data_root=data_root, model="gin", hidden=hidden, epochs=epochs, lr=lr,
                         seed=seed, threads=1, weights="last", gin_norm=norm or "none")
    final = result.metrics["final"]
    return {"best_val_acc": final["best_val_acc"], "best_epoch": final["best_epoch"],
            "test_acc": final["test_acc_at_best_val"],  # "test_acc" there is the last epoch's
            "classes_predicted": int(np.unique(result.predict().predicted).size)}


def markdown(document: dict) -> str:
    lines = [
        "# GIN on the Amazon graphs, one process, float32", "",
        f"Produced {document['date']} ({document['machine']}) by:", "",
        *(f"    {command}" for command in document.get("commands", [document["command"]])), "",
        f"Settings: {document['settings']}.",
        "Test accuracy (%) at the best validation epoch, per seed; in brackets the best epoch, then how many of "
        "the classes the last epoch's model predicts over all vertices.", "",
        "| dataset | variant | " + " | ".join(f"seed {s}" for s in document["seeds"]) + " | mean |",
        "|---|---|" + "---|" * (len(document["seeds"]) + 1),
    ]
    for dataset in document["datasets"]:
        for variant in VARIANTS:
            rows = [r for r in document["records"] if r["dataset"] == dataset and r["variant"] == variant]
            if not rows:
                continue
            cells = [f"{100 * r['test_acc']:.1f} ({r['best_epoch']}; {r['classes_predicted']})" for r in rows]
            mean = statistics.mean(100 * r["test_acc"] for r in rows)
            lines.append(f"| {dataset} | {variant} | " + " | ".join(cells) + f" | {mean:.1f} |")
    lines += ["", "A best epoch of 1-5 means validation accuracy never rose after the first steps."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--data-root")
    parser.add_argument("--out", help="write OUT.json and OUT.md")
    parser.add_argument("--append", action="store_true",
                        help="keep OUT.json's records of other (dataset, seed, variant) and its commands")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    from gridgnn.data.registry import load_dataset

    records = []
    for dataset in args.datasets:
        for seed in args.seeds:
            graph = load_dataset(dataset, args.data_root, seed=seed)
            for variant in args.variants:
                started = time.perf_counter()
                kw = dict(seed=seed, hidden=args.hidden, epochs=args.epochs, lr=args.lr,
                          norm=NORMS.get(variant.partition("+")[2]))
                if variant.startswith("gridgnn"):
                    result = train_gridgnn(dataset, args.data_root, **kw)
                else:
                    result = train_pyg(graph, **kw)
                records.append({"dataset": dataset, "seed": seed, "variant": variant, **result,
                                "wall_s": round(time.perf_counter() - started, 1)})
                print(f"{dataset} seed {seed} {variant}: test {100 * result['test_acc']:.1f} "
                      f"(best epoch {result['best_epoch']}, {result['classes_predicted']} classes predicted)",
                      flush=True)
    command = "python benchmarks/gin_amazon.py " + " ".join(argv if argv is not None else sys.argv[1:])
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    commands, dates = [command], [date]
    if args.append and args.out and Path(args.out).with_suffix(".json").exists():
        earlier = json.loads(Path(args.out).with_suffix(".json").read_text())
        done = {(r["dataset"], r["seed"], r["variant"]) for r in records}
        records = [r for r in earlier["records"] if (r["dataset"], r["seed"], r["variant"]) not in done] + records
        commands = earlier.get("commands", [earlier["command"]]) + commands
        dates = earlier.get("dates", [earlier["date"]]) + dates
        args.datasets = list(dict.fromkeys(earlier["datasets"] + args.datasets))
        args.seeds = sorted(set(earlier["seeds"]) | set(args.seeds))
    document = {
        "command": "; ".join(commands), "commands": commands, "dates": dates,
        "date": "; ".join(dates),
        "machine": f"torch {torch.__version__}, 1 thread",
        "settings": f"2 layers, hidden {args.hidden}, dropout 0.5, Adam lr {args.lr}, weight decay 5e-4, "
                    f"{args.epochs} epochs",
        "datasets": args.datasets, "seeds": args.seeds, "records": records,
    }
    if args.out:
        from gridgnn.safe_files import atomic_write

        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        for suffix, text in ((".json", json.dumps(document, indent=1) + "\n"), (".md", markdown(document))):
            with atomic_write(out.with_suffix(suffix), "benchmark output") as stream:
                stream.write(text.encode())
    return document


if __name__ == "__main__":
    main()
