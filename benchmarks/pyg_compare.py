"""gridgnn ``--algo local`` against PyG's ``GCNConv``, side by side in one process (issue 7).

Both train the same 2-layer GCN (hidden 16, dropout 0.5 on the input and hidden layer, ReLU, log-softmax,
Adam lr 0.01 with weight decay 5e-4 on all parameters) on the same preprocessed graph, epochs alternating
(odd epochs gridgnn first, even epochs PyG first), so the two see the same machine load. An epoch is one
training step (zero_grad, forward, masked NLL, backward, Adam step), as ``gridgnn train`` times it.

- gridgnn: `gridgnn.train.Trainer` with `LocalSpMM` (what ``gridgnn train --algo local`` runs), under the
  same deterministic-algorithms setting as `Trainer.fit`.
- PyG: ``GCNConv(cached=True)`` fed a torch CSR adjacency (``adj_t``, rows = targets, its fastest CPU path:
  the normalization is computed once and cached, every aggregation is ``torch.sparse.mm``), dense features
  (PyG's dropout and linear layer need a dense X).

Prints a table and writes JSON (``--json``), Markdown (``--markdown``) and a PNG (``--plot``, needs
matplotlib). Example (the results in ``results/perf/``)::

    python benchmarks/pyg_compare.py --threads 2 --epochs 200 \\
        --dataset cora citeseer amazon-computers rmat:scale=17,edge_factor=16,features=128
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F

from gridgnn.config import TrainConfig
from gridgnn.data.graph import Graph
from gridgnn.data.registry import load_dataset
from gridgnn.nn import masked_accuracy
from gridgnn.sparse.adjacency import gcn_normalize
from gridgnn.spmm.local import LocalSpMM
from gridgnn.train.loop.trainer import Trainer, deterministic

DEFAULT_DATASETS = ("cora", "citeseer", "amazon-computers", "rmat:scale=17,edge_factor=16,features=128")


class PygGCN(torch.nn.Module):
    """PyG's 2-layer GCN (its ``examples/gcn.py``): dropout, GCNConv, ReLU, dropout, GCNConv, log-softmax."""

    def __init__(self, in_channels: int, hidden: int, out_channels: int, dropout: float):
        from torch_geometric.nn import GCNConv

        super().__init__()
        self.conv1 = GCNConv(in_channels, hidden, cached=True)
        self.conv2 = GCNConv(hidden, out_channels, cached=True)
        self.dropout = dropout

    def forward(self, x: torch.Tensor, adj_t: torch.Tensor) -> torch.Tensor:
        """x: dense (n, in_channels); adj_t: torch CSR (n, n), row i lists the in-neighbours of i."""
        x = F.dropout(x, self.dropout, training=self.training)
        x = F.relu(self.conv1(x, adj_t))
        x = F.dropout(x, self.dropout, training=self.training)
        return F.log_softmax(self.conv2(x, adj_t), dim=1)


class PygRun:
    """The PyG side: model, Adam, dense features, CSR adjacency, labels and masks of ``graph``."""

    def __init__(self, graph: Graph, config: TrainConfig):
        torch.manual_seed(config.seed)
        features = graph.features.toarray() if sp.issparse(graph.features) else graph.features
        self.x = torch.from_numpy(np.ascontiguousarray(features, dtype=np.float32))
        adj = sp.csr_matrix(graph.adj, dtype=np.float32)
        self.adj_t = torch.sparse_csr_tensor(torch.from_numpy(adj.indptr.astype(np.int64)),
                                             torch.from_numpy(adj.indices.astype(np.int64)),
                                             torch.from_numpy(adj.data), adj.shape, check_invariants=False)
        self.labels = torch.from_numpy(graph.labels).long()
        self.masks = [torch.from_numpy(m) for m in (graph.train_mask, graph.val_mask, graph.test_mask)]
        self.model = PygGCN(graph.num_features, config.hidden, graph.num_classes, config.dropout)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=config.lr, weight_decay=config.weight_decay)

    def train_step(self, epoch: int) -> float:
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        out = self.model(self.x, self.adj_t)
        loss = F.nll_loss(out[self.masks[0]], self.labels[self.masks[0]])
        loss.backward()
        self.optimizer.step()
        return float(loss.detach())

    @torch.no_grad()
    def evaluate(self) -> tuple[float, float, float]:
        self.model.eval()
        out = self.model(self.x, self.adj_t)
        return tuple(masked_accuracy(out, self.labels, mask) for mask in self.masks)


def compare(dataset: str, *, epochs: int = 200, seed: int = 0, data_root: str | None = None) -> dict:
    """Train gridgnn and PyG ``epochs`` epochs each, alternating; per-epoch times (s) and final accuracies."""
    config = TrainConfig(dataset=dataset, data_root=data_root, epochs=epochs, seed=seed)
    start = time.perf_counter()
    graph = load_dataset(dataset, data_root=data_root, seed=seed)
    load_s = time.perf_counter() - start
    ours = Trainer(config, graph, LocalSpMM(gcn_normalize(graph.adj)))
    pyg = PygRun(graph, config)
    times: dict[str, list[float]] = {"gridgnn": [], "pyg": []}
    losses: dict[str, list[float]] = {"gridgnn": [], "pyg": []}
    for epoch in range(1, epochs + 1):
        order = ("gridgnn", "pyg") if epoch % 2 else ("pyg", "gridgnn")
        for side in order:
            tick = time.perf_counter()
            if side == "gridgnn":
                with deterministic(seed):
                    loss = ours.train_step(epoch)
            else:
                loss = pyg.train_step(epoch)
            times[side].append(time.perf_counter() - tick)
            losses[side].append(loss)
    with deterministic(seed):
        accuracy = {"gridgnn": ours.evaluate(), "pyg": pyg.evaluate()}
    features = graph.features
    record = {
        "dataset": dataset, "num_nodes": graph.num_nodes, "num_edges": int(graph.adj.nnz),
        "num_features": graph.num_features, "num_classes": graph.num_classes,
        "feature_density": float(features.nnz / np.prod(features.shape)) if sp.issparse(features) else 1.0,
        "epochs": epochs, "seed": seed, "load_s": load_s,
    }
    for side in ("gridgnn", "pyg"):
        record[side] = {
            "median_epoch_s": statistics.median(times[side]), "epoch_times_s": times[side],
            "final_loss": losses[side][-1], "train_acc": accuracy[side][0], "val_acc": accuracy[side][1],
            "test_acc": accuracy[side][2],
        }
    record["ratio"] = record["gridgnn"]["median_epoch_s"] / record["pyg"]["median_epoch_s"]
    return record


def environment(threads: int) -> dict:
    import torch_geometric

    return {"torch": torch.__version__, "torch_geometric": torch_geometric.__version__,
            "numpy": np.__version__, "python": platform.python_version(), "threads": threads,
            "machine": platform.machine(), "command": "python " + " ".join(sys.argv)}


def markdown(records: list[dict], env: dict) -> str:
    """A Markdown table of ``records`` (as `compare` returns them) with the command and versions."""
    lines = [
        f"`{env['command']}`", "",
        f"torch {env['torch']}, torch_geometric {env['torch_geometric']}, {env['threads']} threads, "
        f"{env['machine']}. Median training-step time over the epochs; test accuracy after the last epoch.", "",
        "| dataset | nodes | stored edges | features | gridgnn ms | PyG ms | ratio | gridgnn test acc | PyG test acc |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        ours, pyg = r["gridgnn"], r["pyg"]
        lines.append(
            f"| {r['dataset']} | {r['num_nodes']} | {r['num_edges']} | {r['num_features']} | "
            f"{1e3 * ours['median_epoch_s']:.2f} | {1e3 * pyg['median_epoch_s']:.2f} | {r['ratio']:.3f} | "
            f"{ours['test_acc']:.4f} | {pyg['test_acc']:.4f} |")
    return "\n".join(lines) + "\n"


def plot(records: list[dict], path: str) -> dict[str, list[float]]:
    """Bar chart (log scale) of the median epoch time per dataset, gridgnn next to PyG, ratios on top; returns
    the bars' heights as drawn (ms: ``gridgnn``, ``pyg``), read back from the figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["dataset"].split(",")[0].replace("rmat:scale=17", "R-MAT 2^17") for r in records]
    x = np.arange(len(records))
    ours = [1e3 * r["gridgnn"]["median_epoch_s"] for r in records]
    pyg = [1e3 * r["pyg"]["median_epoch_s"] for r in records]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.bar(x - 0.2, ours, 0.4, label="gridgnn --algo local")
    ax.bar(x + 0.2, pyg, 0.4, label="PyG GCNConv (cached, CSR)")
    for i, r in enumerate(records):
        ax.text(i, max(ours[i], pyg[i]) * 1.15, f"{r['ratio']:.2f}x", ha="center")
    ax.set_yscale("log")
    ax.set_ylim(top=max(pyg + ours) * 3)
    ax.set_xticks(x, names)
    ax.set_ylabel("median epoch time (ms, log scale)")
    ax.set_title("2-layer GCN training step, CPU, gridgnn / PyG ratio on top")
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    drawn = {label: [bar.get_height() for bar in bars] for label, bars in
             zip(("gridgnn", "pyg"), ax.containers, strict=True)}
    plt.close(fig)
    return drawn


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", nargs="+", default=list(DEFAULT_DATASETS),
                        help="dataset names or generator specs (default: the four graphs of issue 7)")
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", default=None, help="write all records (with per-epoch times) here")
    parser.add_argument("--markdown", default=None, help="write the table here")
    parser.add_argument("--plot", default=None, help="write a PNG bar chart here (needs matplotlib)")
    parser.add_argument("--from-json", nargs="+", default=None, metavar="FILE",
                        help="measure nothing: combine the records of these --json files into one table and plot")
    args = parser.parse_args(argv)
    if args.from_json:
        return _combine(args)
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        return _run(args)
    finally:
        torch.set_num_threads(previous_threads)


def _combine(args: argparse.Namespace) -> list[dict]:
    """Records of earlier ``--json`` files, written again as one table (each file's command listed) and plot."""
    documents = [json.loads(Path(path).read_text()) for path in args.from_json]
    records = [record for document in documents for record in document["records"]]
    env = dict(documents[0]["environment"])
    env["command"] = "`, `".join(document["environment"]["command"] for document in documents)
    _write(args, records, env)
    return records


def _write(args: argparse.Namespace, records: list[dict], env: dict) -> None:
    table = markdown(records, env)
    print(table)
    for path, text in ((args.json, json.dumps({"environment": env, "records": records}, indent=1)),
                       (args.markdown, table)):
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(text)
    if args.plot:
        Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
        plot(records, args.plot)


def _run(args: argparse.Namespace) -> list[dict]:
    env = environment(args.threads)
    records = []
    for dataset in args.dataset:
        record = compare(dataset, epochs=args.epochs, seed=args.seed, data_root=args.data_root)
        records.append(record)
        print(f"{dataset}: gridgnn {1e3 * record['gridgnn']['median_epoch_s']:.2f} ms, "
              f"PyG {1e3 * record['pyg']['median_epoch_s']:.2f} ms, ratio {record['ratio']:.3f}, test acc "
              f"{record['gridgnn']['test_acc']:.4f} vs {record['pyg']['test_acc']:.4f}", flush=True)
    _write(args, records, env)
    return records


if __name__ == "__main__":
    main()
