"""GraphSAGE-mean, GAT and GIN accuracy under Shchur et al.'s protocol, 10 seeds (the model accuracy table of
docs/models.md).

Protocol of Shchur, Mumme, Bojchevski and Günnemann, "Pitfalls of Graph Neural Network Evaluation"
(Relational Representation Learning workshop, NeurIPS 2018; arXiv 1811.05868): per seed a random split of 20
labelled nodes per class for training, 30 per class for validation, every other node for test
(`gridgnn.data.splits.per_class_split`); Adam; early stopping on the validation loss with patience 50, the
weights of the best-validation-loss epoch restored (their "gnnbench" criterion); the test accuracy of those
weights is reported. GraphSAGE-mean uses their optimized hyper-parameters (their repository,
``config/optimized/graphsage_mean.conf.yaml``): 2 layers, hidden 32, dropout 0.4, lr 0.001, weight decay 0.1
on the first layer's weights only, raw (not row-normalized) features as their ``normalize_features: false``
(``--features default`` uses gridgnn's default row normalization instead: how docs/models.md's Coauthor CS row,
``results/accuracy/sage_coauthor_cs_l2.md``, reaches the published mean).
Our SAGE is PyG's ``SAGEConv`` (mean over in-neighbours without a self-loop, root weight) without ``normalize``:
their TensorFlow code divides each layer's output rows by ``max(norm, 1)`` and averages over the neighbours
and the vertex itself; PyG's ``normalize=True`` (``--sage-normalize``, rows of norm 1) makes the logits so
small with lr 0.001 that the validation loss stalls and early stopping ends training near epoch 180
(Cora, 3 seeds: 72.2 % with it, 77.6 % without).

GAT uses their optimized hyper-parameters (``config/optimized/gat.conf.yaml``): 2 layers, 8 heads of 8
channels (concatenated) then 1 output head, input dropout 0.6, attention-coefficient dropout 0.3, lr 0.01,
weight decay 0.01 on every parameter, raw features. Differences from their TensorFlow GAT: ReLU between the
layers (gridgnn's LayerStack; theirs is ELU) and no second dropout on the transformed features.

GIN has no canonical full-graph figure: ours (`gridgnn.nn.gin`) is compared with PyG's own
``torch_geometric.nn.models.GIN`` (GINConv with MLP [in, out, out], dropout between layers) trained by this
same loop: 2 layers, hidden 64, dropout 0.5, lr 0.01, weight decay 5e-4 on every parameter.

GIN's features are preprocessed as ``gridgnn train`` does by default (L1 rows on Planetoid, L2 rows on the
gnn-benchmark data). PyG's GIN needs dense features: it runs on the four datasets whose dense features fit
this shared machine comfortably (Coauthor CS and Physics would be 0.5 and 1.2 GB dense). Shchur et al.
keep each graph's largest connected component (their "standardize_graph"), and so does this script
(`largest_component`); the graphs are already undirected and unweighted here.
Results are written after every (model, dataset), so an interrupted run keeps what finished. Example (the
results in ``results/accuracy/models.*``)::

    OMP_NUM_THREADS=1 python benchmarks/accuracy_models.py --seeds 10 --data-root ../shared/datasets \\
        --json results/accuracy/models.json --markdown results/accuracy/models.md
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from gridgnn.config import TrainConfig
from gridgnn.data.splits import per_class_split
from gridgnn.nn import as_model_input, build_model
from gridgnn.train import build_aggregation, load_graph

DATASETS = ["cora", "citeseer", "amazon-photo", "amazon-computers", "coauthor-cs", "coauthor-physics"]
PUBLISHED_SAGE = {"cora": 79.2, "citeseer": 71.6, "amazon-computers": 82.4, "amazon-photo": 91.4,
                  "coauthor-cs": 91.3, "coauthor-physics": 93.0}
"""GraphSAGE-mean ("GS-mean") mean test accuracy (%), Shchur et al. 2018, Table 2 (random splits)."""
PUBLISHED_GAT = {"cora": 81.8, "citeseer": 71.4, "amazon-computers": 78.0, "amazon-photo": 85.7,
                 "coauthor-cs": 90.5, "coauthor-physics": 92.5}
"""GAT mean test accuracy (%), Shchur et al. 2018, Table 2 (random splits)."""
PUBLISHED = {"sage": PUBLISHED_SAGE, "gat": PUBLISHED_GAT}
PUBLISHED_GCN = {"cora": 81.5, "citeseer": 71.9, "amazon-computers": 82.6, "amazon-photo": 91.2,
                 "coauthor-cs": 91.1, "coauthor-physics": 92.8}
"""GCN in the same table, for reference."""
SETTINGS = {
    "sage": dict(hidden=32, dropout=0.4, lr=0.001, weight_decay=0.1, first_layer_decay=True,
                 normalize_features=False),
    "gin": dict(hidden=64, dropout=0.5, lr=0.01, weight_decay=5e-4, first_layer_decay=False,
                normalize_features=None),
    "gat": dict(hidden=8, dropout=0.6, lr=0.01, weight_decay=0.01, first_layer_decay=False,
                normalize_features=False, heads=8, output_heads=1, attn_dropout=0.3),
}
MODEL_FIELDS = ("heads", "output_heads", "attn_dropout")
"""Settings passed to `TrainConfig` as they are (GAT's)."""
SETTINGS["pyg-gin"] = SETTINGS["gin"]
DENSE_FEATURE_LIMIT = 20_000_000
"""PyG's GIN runs where nodes x features (its dense input) is at most this."""


def largest_component(graph):
    """The subgraph of ``graph`` induced by its largest (weakly) connected component."""
    from scipy.sparse.csgraph import connected_components

    _, component = connected_components(graph.adj, directed=False)
    keep = np.flatnonzero(component == np.bincount(component).argmax())
    adj = graph.adj.tocsr()[keep][:, keep].tocsr()
    return dataclasses.replace(graph, adj=adj, features=graph.features[keep], labels=graph.labels[keep],
                               train_mask=graph.train_mask[keep], val_mask=graph.val_mask[keep],
                               test_mask=graph.test_mask[keep], name=f"{graph.name}-lcc")


def _split(graph, seed: int):
    return [torch.from_numpy(m) for m in per_class_split(graph.labels, 20, 30, seed=seed)]


def _optimizer(model, lr: float, weight_decay: float, first_layer_decay: bool, first_layer_params):
    if not first_layer_decay:
        return torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    decayed = {id(p) for p in first_layer_params}
    rest = [p for p in model.parameters() if id(p) not in decayed]
    return torch.optim.Adam([{"params": list(first_layer_params), "weight_decay": weight_decay},
                             {"params": rest, "weight_decay": 0.0}], lr=lr)


def early_stopped_run(forward, model, optimizer, labels, masks, *, max_epochs: int, patience: int) -> dict:
    """Train until the validation loss has not improved for ``patience`` epochs; test accuracy of the
    best-validation-loss weights. ``forward(epoch)`` returns log-probabilities (epoch 0: eval mode)."""
    train, val, test = masks
    best = (float("inf"), None, 0)
    for epoch in range(1, max_epochs + 1):
        model.train()
        optimizer.zero_grad(set_to_none=True)
        F.nll_loss(forward(epoch)[train], labels[train]).backward()
        optimizer.step()
        model.eval()
        with torch.no_grad():
            log_probs = forward(0)
            val_loss = float(F.nll_loss(log_probs[val], labels[val]))
        if val_loss < best[0]:
            test_acc = float((log_probs[test].argmax(1) == labels[test]).float().mean())
            best = (val_loss, test_acc, epoch)
        elif epoch - best[2] >= patience:
            break
    return {"test_acc": best[1], "best_epoch": best[2], "epochs": epoch}


def ours(kind: str, graph, seed: int, **kw) -> dict:
    s = SETTINGS[kind]
    extra = {k: s[k] for k in MODEL_FIELDS if k in s}
    config = TrainConfig(dataset=graph.name, model=kind, hidden=s["hidden"], dropout=s["dropout"], seed=seed,
                         **extra)
    model = build_model(config, graph.num_features, graph.num_classes)
    layout = build_aggregation(config, graph)
    x = as_model_input(graph.features)
    first = [model.layers[0].weight_neigh, model.layers[0].weight_root] if kind == "sage" else []
    optimizer = _optimizer(model, s["lr"], s["weight_decay"], s["first_layer_decay"], first)
    labels = torch.from_numpy(graph.labels).long()

    def forward(epoch: int):
        return model(x, layout, epoch=epoch)

    return early_stopped_run(forward, model, optimizer, labels, _split(graph, seed), **kw)


def pyg_gin(graph, seed: int, **kw) -> dict:
    from torch_geometric.nn.models import GIN

    s = SETTINGS["gin"]
    torch.manual_seed(seed)
    model = GIN(graph.num_features, s["hidden"], num_layers=2, out_channels=graph.num_classes,
                dropout=s["dropout"])
    adj = graph.adj.tocoo()
    edge_index = torch.from_numpy(np.vstack([adj.col, adj.row]).astype(np.int64))  # source -> target
    feats = graph.features
    x = torch.from_numpy(np.asarray(feats.todense() if hasattr(feats, "todense") else feats, dtype=np.float32))
    optimizer = torch.optim.Adam(model.parameters(), lr=s["lr"], weight_decay=s["weight_decay"])
    labels = torch.from_numpy(graph.labels).long()

    def forward(epoch: int):
        return F.log_softmax(model(x, edge_index), dim=1)

    return early_stopped_run(forward, model, optimizer, labels, _split(graph, seed), **kw)


def summarize(model: str, dataset: str, nodes: int, runs: list[dict], seconds: float) -> dict:
    acc = [r["test_acc"] for r in runs]
    published = PUBLISHED.get(model, {}).get(dataset)
    return {"model": model, "dataset": dataset, "nodes": nodes, "test_acc": acc, "mean": statistics.mean(acc),
            "sd": statistics.stdev(acc) if len(acc) > 1 else 0.0, "epochs": [r["epochs"] for r in runs],
            "published": published, "seconds": seconds}


def markdown(records: list[dict], command: str) -> str:
    lines = [f"`{command}`", "", f"torch {torch.__version__}; test accuracy (%) at the best validation loss, "
             "seeds 0..k-1 (each its own split and initialization).", "",
             "| model | dataset (LCC nodes) | mean | sd | published (Shchur et al. Table 2) | difference "
             "| epochs (median) |", "|---|---|---|---|---|---|---|"]
    for r in records:
        published = "" if r["published"] is None else f"{r['published']:.1f}"
        diff = "" if r["published"] is None else f"{100 * r['mean'] - r['published']:+.1f}"
        lines.append(f"| {r['model']} | {r['dataset']} ({r['nodes']}) | {100 * r['mean']:.1f} | {100 * r['sd']:.1f} "
                     f"| {published} | {diff} | {statistics.median(r['epochs']):.0f} |")
    return "\n".join(lines) + "\n"


def _feature_norm(model: str, features: str) -> bool | None:
    """``normalize_features`` for `TrainConfig`: the model's setting, None (the dataset's default) or False."""
    return {"setting": SETTINGS[model]["normalize_features"], "default": None, "raw": False}[features]


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", nargs="+", default=DATASETS)
    parser.add_argument("--models", nargs="+", default=["sage", "gat", "gin", "pyg-gin"])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--max-epochs", type=int, default=1000)
    parser.add_argument("--patience", type=int, default=50)
    parser.add_argument("--features", choices=["setting", "default", "raw"], default="setting",
                        help="input features: each model's setting (Shchur et al.'s, SETTINGS), gridgnn's default "
                             "row normalization (L1 Planetoid, L2 gnn-benchmark), or raw")
    parser.add_argument("--data-root")
    parser.add_argument("--json")
    parser.add_argument("--markdown")
    args = parser.parse_args(argv)
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _run(args, argv)
    finally:
        torch.set_num_threads(previous_threads)


def _run(args: argparse.Namespace, argv: list[str] | None) -> list[dict]:
    command = "python benchmarks/accuracy_models.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    records = []
    for model in args.models:
        for dataset in args.dataset:
            graph = largest_component(load_graph(TrainConfig(
                dataset=dataset, data_root=args.data_root, normalize_features=_feature_norm(model, args.features))))
            if model == "pyg-gin" and graph.num_nodes * graph.num_features > DENSE_FEATURE_LIMIT:
                print(f"{model} {dataset}: skipped (dense features too large here)", flush=True)
                continue
            start, runs = time.perf_counter(), []
            for seed in range(args.seeds):
                kw = dict(max_epochs=args.max_epochs, patience=args.patience)
                runs.append(pyg_gin(graph, seed, **kw) if model == "pyg-gin" else ours(model, graph, seed, **kw))
            records.append(summarize(model, dataset, graph.num_nodes, runs, time.perf_counter() - start))
            r = records[-1]
            print(f"{model} {dataset}: {100 * r['mean']:.1f} ± {100 * r['sd']:.1f} ({r['seconds']:.0f} s)", flush=True)
            if args.json:
                Path(args.json).write_text(json.dumps({"command": command, "records": records}, indent=1) + "\n")
            if args.markdown:
                Path(args.markdown).write_text(markdown(records, command))
    return records


if __name__ == "__main__":
    main()
