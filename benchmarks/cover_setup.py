"""The set-up of ``--comm cover`` (cutting each pair's block of Â, its matching and cover) against one epoch.

For each graph, grid and source tree, one ``gridgnn train --comm cover --reorder metis-balanced`` run: the
metrics' ``setup.spmm_setup_s`` (the slowest rank's seconds building its blocks: every cut and cover it takes
part in) and the median of the epochs' ``time_s`` (one training step and its evaluation), skipping the first.
With two trees (``--tree before=DIR --tree after=DIR``: repository roots, each put first on ``PYTHONPATH``) the
runs alternate, tree by tree, for each case; ``--repeats`` rounds of that, and each figure is the median over
rounds (P processes share this machine's two cores, so one run of the set-up is noisy).

``--calibrate`` instead times each rank's set-up work alone, in this process (every rank of 1D at P = 2 to 32
in turn: its cuts, covers and blocks, as `gridgnn.spmm.cover_15d.CoverSpMM15D` builds them, best of three),
and fits the constants of `gridgnn.cost.setup_cost` by least squares: ``calibration.md``.

Usage (the committed runs)::

    python benchmarks/cover_setup.py --data-root ../shared/datasets --tree before=/tmp/before --tree after=. \\
        --out results/sparse_comm/cover_setup
    python benchmarks/cover_setup.py --data-root ../shared/datasets --calibrate --out results/sparse_comm/cover_setup
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

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


def rank_setup_s(adj, bounds: list[int], i: int, share: list[int]) -> float:
    """Best of three: the local work of rank i's cover set-up (receiver cuts and covers, its three blocks)."""
    import scipy.sparse as sp
    import torch

    from gridgnn.sparse.cover import covered_columns, pair_cover, uncovered_entries
    from gridgnn.sparse.csr import SparseBlock
    from gridgnn.spmm.cover_15d import receiver_cuts

    def block(matrix):
        return SparseBlock.from_scipy(matrix, index_dtype=torch.int64, dtype=torch.float32, device=torch.device("cpu"))

    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        cuts = receiver_cuts(adj, bounds, i, share)
        own = cuts.pop(i, None)
        post, pre = [], []
        for cut in cuts.values():
            cover = pair_cover(cut)
            post.append(covered_columns(cut, cover.columns))
            pre.append(uncovered_entries(cut, cover.rows, cover.columns))
        if not pre:  # no pair in this rank's share: its row block alone
            pre, post = [sp.csr_matrix((0, 1))], [sp.csr_matrix((own.shape[0] if own is not None else 0, 0))]
        width = max(m.shape[1] for m in pre)  # a sender stacks such pieces of its receivers (one width)
        pre = [sp.csr_matrix((m.data, m.indices, m.indptr), shape=(m.shape[0], width)) for m in pre]
        built = [own] if own is not None else []
        for matrix in built + [sp.hstack(post, format="csr"), sp.vstack(pre, format="csr")]:
            block(matrix)
        best = min(best, time.perf_counter() - start)
    return best


def calibrate(data_root: str, out: Path | None) -> None:
    """Time every rank's set-up work of 1D (and 1.5D c = 2 at P = 8 and 16, to check) and fit `setup_cost`."""
    import gridgnn.cost.setup_cost as setup_cost
    from gridgnn.config import TrainConfig
    from gridgnn.cost.graph_stats import GraphStats
    from gridgnn.cost.rank_cost import shape_blocks
    from gridgnn.data.operators import operator_matrix
    from gridgnn.data.reorder import reorder_graph
    from gridgnn.grid.shape import resolve_grid
    from gridgnn.train.run.training import load_graph

    rows = []
    for dataset in ("coauthor-physics", "amazon-computers"):
        base = load_graph(TrainConfig(dataset=dataset, data_root=data_root))
        for algo, p in [("1d", 2), ("1d", 4), ("1d", 8), ("1d", 16), ("1d", 32), ("1.5d", 8), ("1.5d", 16)]:
            shape = resolve_grid(algo, p, replication=2 if algo == "1.5d" else None)
            graph = reorder_graph(base, "metis-balanced", shape.sizes[0])
            adj = operator_matrix("gcn", graph.adj)
            stats = GraphStats.from_graph(graph)
            blocks = shape_blocks(shape, stats)
            bounds = [int(b) for b in blocks.layout.row_bounds]
            pairs = stats.grouped_nnz(bounds, bounds)
            group = blocks.groups
            for rank in range(p):
                i, k = int(blocks.coords["row"][rank]), int(group[rank])
                share = [j for j in range(len(bounds) - 1) if blocks.layout.group[j] == k]
                others = [j for j in share if j != i]
                rows.append({"dataset": dataset, "grid": f"{algo} {p}", "rank": rank,
                             "seconds": rank_setup_s(adj, bounds, i, share), "row_entries": int(pairs[i].sum()),
                             "cut_entries": int(pairs[i, others].sum()), "pairs": len(others)})
            print(json.dumps(rows[-1]), flush=True)
    fit = [r for r in rows if r["grid"].startswith("1d ")]
    x = np.array([[r["row_entries"], r["cut_entries"], r["pairs"]] for r in fit], dtype=float)
    coef = np.linalg.lstsq(x, np.array([r["seconds"] for r in fit]), rcond=None)[0]
    lines = ["# `--comm cover`: the set-up's local work per rank, fitted", "",
             "Command: `python benchmarks/cover_setup.py " + " ".join(sys.argv[1:]) + "`", "",
             "Each rank's set-up work timed alone in one process (best of 3), METIS-balanced order, GCN's Â. "
             "Fitted on the 1D rows by least squares:", "",
             f"- `ROW_ENTRY_S` = {coef[0]:.3e} s per entry of the rank's row block",
             f"- `CUT_ENTRY_S` = {coef[1]:.3e} s per entry of its pairs' cuts",
             f"- `PAIR_S` = {coef[2]:.3e} s per pair", "",
             "| dataset | grid | ranks | measured s (median) | fitted s (median) | measured / fitted (min-max) |",
             "|---|---|---|---|---|---|"]
    for (dataset, grid) in dict.fromkeys((r["dataset"], r["grid"]) for r in rows):
        mine = [r for r in rows if (r["dataset"], r["grid"]) == (dataset, grid)]
        fitted = [coef[0] * r["row_entries"] + coef[1] * r["cut_entries"] + coef[2] * r["pairs"] for r in mine]
        ratios = [r["seconds"] / f for r, f in zip(mine, fitted, strict=True)]
        lines.append(f"| {dataset} | {grid} | {len(mine)} | {statistics.median(r['seconds'] for r in mine):.4f} | "
                     f"{statistics.median(fitted):.4f} | {min(ratios):.2f}-{max(ratios):.2f} |")
    lines += ["", f"Constants in use (`gridgnn/cost/setup_cost.py`): {setup_cost.ROW_ENTRY_S:.3e}, "
              f"{setup_cost.CUT_ENTRY_S:.3e}, {setup_cost.PAIR_S:.3e}."]
    report = "\n".join(lines) + "\n"
    print(report)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "calibration.json").write_text(json.dumps({"fit": coef.tolist(), "rows": rows}, indent=1) + "\n")
        (out / "calibration.md").write_text(report)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", default="../shared/datasets")
    parser.add_argument("--tree", action="append", default=[], help="NAME=DIR (default: this=.)")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--calibrate", action="store_true", help="fit gridgnn.cost.setup_cost (see above)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.calibrate:
        calibrate(str(Path(args.data_root).resolve()), args.out)
        return
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
