"""What ``--reorder double-random`` (Plexus's double random permutation, built) changes on 2D and 3D (issue 36).

`benchmarks/double_permutation.py` measured that a second, independent permutation of Â's columns balances 2D
blocks better than one permutation of rows and columns alike. This script prices the built variant
(`gridgnn.cost.column_order`, `gridgnn.spmm.column_exchange`) against ``--reorder random`` with the cost model
that the tests hold equal to the measured bytes per rank and phase (`tests/spmm/test_double_random.py`), per graph
and grid (GCN, 2 layers, hidden 16, dense communication, every switch off):

- ``Â kept``: the bytes of the Â panels the most loaded rank keeps (its own blocks, both orientations), and
  their max over mean: what a second column order balances;
- ``mult``: the entries of Â the busiest rank multiplies per SpMM over the mean (the SpMM's work imbalance);
- ``bytes``: bytes per rank per training step, max over ranks (the second order adds one all-to-all of rows on
  ``row`` per SpMM half, and balances the Â panels that move on ``col``);
- ``epoch``: the predicted step time on the ``gpu-cluster`` profile (communication plus computation of the
  slowest rank).

    python benchmarks/double_random.py --data-root ../shared/datasets --out results/sharded_prepare/double_random.md
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

GRAPHS = ("amazon-computers", "coauthor-physics", "rmat:scale=18,edge_factor=16")
SHAPES = (("2d", "4x4"), ("2d", "8x8"), ("2d", "16x16"), ("3d", "2x2x4"), ("3d", "4x4x4"))
ORDERS = ("random", "double-random")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", default="../shared/datasets")
    parser.add_argument("--graphs", nargs="+", default=list(GRAPHS))
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    import gridgnn
    from gridgnn.config import TrainConfig
    from gridgnn.cost.epoch_model import predict_epoch
    from gridgnn.cost.graph_stats import GraphStats
    from gridgnn.cost.profile import load_profile
    from gridgnn.cost.rank_cost import shape_blocks
    from gridgnn.data.reorder import reorder_graph
    from gridgnn.grid.shape import resolve_grid
    from gridgnn.nn.trace import model_spec

    profile = load_profile("gpu-cluster")
    rows_out = []
    for name in args.graphs:
        graph = gridgnn.load_dataset(name, data_root=args.data_root)
        config = TrainConfig(dataset=name, hidden=16)
        for algo, grid in SHAPES:
            shape = resolve_grid(algo, math.prod(int(k) for k in grid.split("x")), grid=grid)
            row = {"graph": name, "grid": f"{algo} {grid}", "p": shape.world_size}
            for order in ORDERS:
                ordered = reorder_graph(graph, order, shape.sizes[0], seed=0, nest=shape.depth)
                stats = GraphStats.from_graph(ordered)
                pred = predict_epoch(model_spec(config, ordered), stats, shape, profile=profile)
                mult = shape_blocks(shape, stats).mult_nnz
                graph_memory = pred.memory["graph"]
                row[order] = {"mult": float(mult.max() / mult.mean()), "bytes": int(pred.bytes.max()),
                              "epoch_ms": 1e3 * pred.epoch_s, "graph_max": int(graph_memory.max()),
                              "graph_imbalance": float(graph_memory.max() / graph_memory.mean())}
            rows_out.append(row)
            print(json.dumps(row), flush=True)
    lines = ["# `--reorder double-random` against `--reorder random` on 2D and 3D (model; GCN hidden 16, dense)", "",
             "Command: `python benchmarks/double_random.py " + " ".join(sys.argv[1:]) + "`", "",
             "Â kept: the bytes of the Â panels the most loaded rank keeps (both orientations), and over the mean; "
             "mult: Â entries the busiest rank multiplies per SpMM over the mean; bytes: per rank per step, max over "
             "ranks; step: predicted on the `gpu-cluster` profile. Each cell: `random` → `double-random`.", "",
             "| graph | grid | Â kept, max (B) | Â kept, max / mean | mult | bytes | step (ms) |",
             "|---|---|---|---|---|---|---|"]
    for r in rows_out:
        a, b = r["random"], r["double-random"]
        lines.append(f"| {r['graph']} | {r['grid']} (P = {r['p']}) | {a['graph_max']:,} → {b['graph_max']:,} | "
                     f"{a['graph_imbalance']:.3f} → {b['graph_imbalance']:.3f} | {a['mult']:.3f} → {b['mult']:.3f} | "
                     f"{a['bytes']:,} → {b['bytes']:,} | {a['epoch_ms']:.3f} → {b['epoch_ms']:.3f} |")
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report)
        args.out.with_suffix(".json").write_text(json.dumps(rows_out, indent=1) + "\n")


if __name__ == "__main__":
    main()
