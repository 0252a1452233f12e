"""gridgnn ``--algo local`` GraphSAGE-mean and GIN against PyG's ``SAGEConv`` / ``GINConv``, in one process.

Same script style as ``benchmarks/pyg_compare.py`` (GCN): both sides train the same 2-layer model (hidden 16,
dropout 0.5 on the input and hidden layer, ReLU between layers, log-softmax, Adam lr 0.01 with weight decay 5e-4)
on the same preprocessed graph, epochs alternating (odd epochs gridgnn first, even epochs PyG first) so both
see the same machine load; the median training-step time (zero_grad, forward, masked NLL, backward, Adam step)
of each side is compared.

- gridgnn: `gridgnn.train.Trainer` with ``--model sage`` / ``--model gin`` and its single-process layout.
- PyG: ``SAGEConv(aggr="mean")`` / ``GINConv(MLP [in, out, out])`` fed a torch CSR ``adj_t`` of the 0/1
  adjacency (rows = targets; PyG's fused ``spmm`` path, no edge-wise messages) and dense features.

Example (the results in ``results/perf/pyg_models_compare.*``)::

    python benchmarks/pyg_models_compare.py --threads 1 --epochs 40 --data-root ../shared/datasets \\
        --json results/perf/pyg_models_compare.json --markdown results/perf/pyg_models_compare.md
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
from gridgnn.data.operators import pattern
from gridgnn.data.registry import load_dataset
from gridgnn.train import build_aggregation
from gridgnn.train.loop.trainer import Trainer, deterministic

DEFAULT_DATASETS = ("amazon-computers", "rmat:scale=17,edge_factor=16,features=128")


def _conv(kind: str, f_in: int, f_out: int) -> torch.nn.Module:
    from torch_geometric.nn import GINConv, SAGEConv

    if kind == "sage":
        return SAGEConv(f_in, f_out, aggr="mean", root_weight=True)
    mlp = torch.nn.Sequential(torch.nn.Linear(f_in, f_out), torch.nn.ReLU(), torch.nn.Linear(f_out, f_out))
    return GINConv(mlp)


class PygModel(torch.nn.Module):
    """Dropout, conv, ReLU, dropout, conv, log-softmax (PyG's example layout)."""

    def __init__(self, kind: str, in_channels: int, hidden: int, out_channels: int, dropout: float):
        super().__init__()
        self.conv1, self.conv2 = _conv(kind, in_channels, hidden), _conv(kind, hidden, out_channels)
        self.dropout = dropout

    def forward(self, x: torch.Tensor, adj_t: torch.Tensor) -> torch.Tensor:
        x = F.dropout(x, self.dropout, training=self.training)
        x = F.relu(self.conv1(x, adj_t))
        x = F.dropout(x, self.dropout, training=self.training)
        return F.log_softmax(self.conv2(x, adj_t), dim=1)


class PygRun:
    """The PyG side: model, Adam, dense features, 0/1 CSR adjacency (rows = targets), labels, masks."""

    def __init__(self, kind: str, graph, config: TrainConfig):
        torch.manual_seed(config.seed)
        features = graph.features.toarray() if sp.issparse(graph.features) else graph.features
        self.x = torch.from_numpy(np.ascontiguousarray(features, dtype=np.float32))
        adj = pattern(graph.adj)
        self.adj_t = torch.sparse_csr_tensor(torch.from_numpy(adj.indptr.astype(np.int64)),
                                             torch.from_numpy(adj.indices.astype(np.int64)),
                                             torch.from_numpy(adj.data), adj.shape, check_invariants=False)
        self.labels = torch.from_numpy(graph.labels).long()
        self.train_mask = torch.from_numpy(graph.train_mask)
        self.model = PygModel(kind, graph.num_features, config.hidden, graph.num_classes, config.dropout)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=config.lr, weight_decay=config.weight_decay)

    def train_step(self, epoch: int) -> float:
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        out = self.model(self.x, self.adj_t)
        loss = F.nll_loss(out[self.train_mask], self.labels[self.train_mask])
        loss.backward()
        self.optimizer.step()
        return float(loss.detach())


def compare(kind: str, dataset: str, *, epochs: int, seed: int = 0, data_root: str | None = None) -> dict:
    """Train gridgnn and PyG ``epochs`` epochs each, alternating; median epoch times (s) and their ratio."""
    config = TrainConfig(dataset=dataset, data_root=data_root, epochs=epochs, seed=seed, model=kind)
    graph = load_dataset(dataset, data_root=data_root, seed=seed)
    ours = Trainer(config, graph, build_aggregation(config, graph))
    pyg = PygRun(kind, graph, config)
    times: dict[str, list[float]] = {"gridgnn": [], "pyg": []}
    for epoch in range(1, epochs + 1):
        for side in (("gridgnn", "pyg") if epoch % 2 else ("pyg", "gridgnn")):
            tick = time.perf_counter()
            if side == "gridgnn":
                with deterministic(seed):
                    ours.train_step(epoch)
            else:
                pyg.train_step(epoch)
            times[side].append(time.perf_counter() - tick)
    record = {"model": kind, "dataset": dataset, "num_nodes": graph.num_nodes, "num_edges": int(graph.adj.nnz),
              "num_features": graph.num_features, "epochs": epochs}
    for side in ("gridgnn", "pyg"):
        record[side] = {"median_epoch_s": statistics.median(times[side]), "epoch_times_s": times[side]}
    record["ratio"] = record["gridgnn"]["median_epoch_s"] / record["pyg"]["median_epoch_s"]
    return record


def markdown(records: list[dict], command: str, threads: int) -> str:
    import torch_geometric

    lines = [f"`{command}`", "", f"torch {torch.__version__}, torch_geometric {torch_geometric.__version__}, "
             f"{threads} threads, {platform.machine()}. Median training-step time over alternating epochs.", "",
             "| model | dataset | nodes | stored edges | features | gridgnn ms | PyG ms | ratio |",
             "|---|---|---|---|---|---|---|---|"]
    for r in records:
        lines.append(f"| {r['model']} | {r['dataset']} | {r['num_nodes']} | {r['num_edges']} | {r['num_features']} "
                     f"| {1e3 * r['gridgnn']['median_epoch_s']:.2f} | {1e3 * r['pyg']['median_epoch_s']:.2f} "
                     f"| {r['ratio']:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["sage", "gin"])
    parser.add_argument("--dataset", nargs="+", default=list(DEFAULT_DATASETS))
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", default=None)
    parser.add_argument("--markdown", default=None)
    args = parser.parse_args(argv)
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        return _run(args, argv)
    finally:
        torch.set_num_threads(previous_threads)


def _run(args: argparse.Namespace, argv: list[str] | None) -> list[dict]:
    command = "python " + " ".join(sys.argv if argv is None else ["benchmarks/pyg_models_compare.py", *argv])
    records = []
    for dataset in args.dataset:
        for kind in args.models:
            records.append(compare(kind, dataset, epochs=args.epochs, data_root=args.data_root))
            r = records[-1]
            print(f"{kind} {dataset}: gridgnn {1e3 * r['gridgnn']['median_epoch_s']:.2f} ms, "
                  f"PyG {1e3 * r['pyg']['median_epoch_s']:.2f} ms, ratio {r['ratio']:.3f}", flush=True)
    table = markdown(records, command, args.threads)
    print(table)
    for path, text in ((args.json, json.dumps({"command": command, "records": records}, indent=1)),
                       (args.markdown, table)):
        if path:
            Path(path).write_text(text)
    return records


if __name__ == "__main__":
    main()
