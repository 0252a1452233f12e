"""gridgnn ``--algo local`` GAT against PyG's ``GATConv``, in one process (same style as ``pyg_compare.py``).

Both sides train the same 2-layer GAT: 8 heads of 8 channels (concatenated), ReLU, 1 output head, dropout 0.6
on each layer's input and on the attention coefficients, log-softmax, Adam (lr 0.005, weight decay 5e-4), on
the same preprocessed graph; epochs alternate (odd epochs gridgnn first, even epochs PyG first) so both see
the same machine load, and the median training-step time (zero_grad, forward, masked NLL, backward, Adam
step) of each side is compared.

- gridgnn: `gridgnn.train.Trainer` with ``--model gat`` (edge softmax and per-head CSR products on the
  ``gat`` pattern, `gridgnn.spmm.attention`).
- PyG: ``GATConv(heads=8)`` then ``GATConv(heads=1)`` with ``edge_index`` (self-loops added by the layer)
  and dense features.

Example (the results in ``results/perf/pyg_gat_compare.*``)::

    python benchmarks/pyg_gat_compare.py --threads 1 --epochs 10 --data-root ../shared/datasets \\
        --json results/perf/pyg_gat_compare.json --markdown results/perf/pyg_gat_compare.md
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
from gridgnn.data.registry import load_dataset
from gridgnn.train import build_aggregation
from gridgnn.train.loop.trainer import Trainer, deterministic

SETTING = dict(model="gat", heads=8, hidden=8, output_heads=1, dropout=0.6, attn_dropout=0.6, lr=0.005,
               weight_decay=5e-4)


class PygGAT(torch.nn.Module):
    """Dropout, GATConv (K heads, concatenated), ReLU, dropout, GATConv (1 head), log-softmax."""

    def __init__(self, in_channels: int, out_channels: int):
        from torch_geometric.nn import GATConv

        super().__init__()
        p, heads, hidden = SETTING["dropout"], SETTING["heads"], SETTING["hidden"]
        self.conv1 = GATConv(in_channels, hidden, heads=heads, dropout=SETTING["attn_dropout"])
        self.conv2 = GATConv(hidden * heads, out_channels, heads=1, concat=False, dropout=SETTING["attn_dropout"])
        self.dropout = p

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        x = F.dropout(x, self.dropout, training=self.training)
        x = F.relu(self.conv1(x, edge_index))
        x = F.dropout(x, self.dropout, training=self.training)
        return F.log_softmax(self.conv2(x, edge_index), dim=1)


class PygRun:
    def __init__(self, graph, seed: int):
        torch.manual_seed(seed)
        features = graph.features.toarray() if sp.issparse(graph.features) else graph.features
        self.x = torch.from_numpy(np.ascontiguousarray(features, dtype=np.float32))
        coo = graph.adj.tocoo()
        self.edge_index = torch.from_numpy(np.vstack([coo.col, coo.row]).astype(np.int64))
        self.labels = torch.from_numpy(graph.labels).long()
        self.train_mask = torch.from_numpy(graph.train_mask)
        self.model = PygGAT(graph.num_features, graph.num_classes)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=SETTING["lr"],
                                          weight_decay=SETTING["weight_decay"])

    def train_step(self) -> float:
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        out = self.model(self.x, self.edge_index)
        loss = F.nll_loss(out[self.train_mask], self.labels[self.train_mask])
        loss.backward()
        self.optimizer.step()
        return float(loss.detach())


def compare(dataset: str, *, epochs: int, seed: int = 0, data_root: str | None = None) -> dict:
    """Train gridgnn and PyG ``epochs`` epochs each, alternating; median epoch times (s) and their ratio."""
    config = TrainConfig(dataset=dataset, data_root=data_root, epochs=epochs, seed=seed, **SETTING)
    graph = load_dataset(dataset, data_root=data_root, seed=seed)
    ours = Trainer(config, graph, build_aggregation(config, graph))
    pyg = PygRun(graph, seed)
    times: dict[str, list[float]] = {"gridgnn": [], "pyg": []}
    for epoch in range(1, epochs + 1):
        for side in (("gridgnn", "pyg") if epoch % 2 else ("pyg", "gridgnn")):
            tick = time.perf_counter()
            if side == "gridgnn":
                with deterministic(seed):
                    ours.train_step(epoch)
            else:
                pyg.train_step()
            times[side].append(time.perf_counter() - tick)
    record = {"model": "gat", "dataset": dataset, "num_nodes": graph.num_nodes, "num_edges": int(graph.adj.nnz),
              "num_features": graph.num_features, "epochs": epochs, "setting": SETTING}
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
        lines.append(f"| gat 8x8 + 1 | {r['dataset']} | {r['num_nodes']} | {r['num_edges']} | {r['num_features']} "
                     f"| {1e3 * r['gridgnn']['median_epoch_s']:.1f} | {1e3 * r['pyg']['median_epoch_s']:.1f} "
                     f"| {r['ratio']:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", nargs="+", default=["amazon-computers"])
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", default=None)
    parser.add_argument("--markdown", default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    command = "python " + " ".join(sys.argv if argv is None else ["benchmarks/pyg_gat_compare.py", *argv])
    records = []
    for dataset in args.dataset:
        records.append(compare(dataset, epochs=args.epochs, data_root=args.data_root))
        r = records[-1]
        print(f"gat {dataset}: gridgnn {1e3 * r['gridgnn']['median_epoch_s']:.1f} ms, "
              f"PyG {1e3 * r['pyg']['median_epoch_s']:.1f} ms, ratio {r['ratio']:.3f}", flush=True)
    table = markdown(records, command, args.threads)
    print(table)
    for path, text in ((args.json, json.dumps({"command": command, "records": records}, indent=1)),
                       (args.markdown, table)):
        if path:
            Path(path).write_text(text)
    return records


if __name__ == "__main__":
    main()
