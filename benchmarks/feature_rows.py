"""What moving the feature weights by rows saves in the weight-gradient phase, by grid (model, pure).

``--defer-weight-gather`` on sparse input features moves the weights read only by the features' products by
rows (`gridgnn.parallel.feature_weight_rows`, priced by `gridgnn.cost.feature_row_cost`): on 1D/1.5D instead of
the all-reduce of the whole weight, on 2D and 3D instead of the sum of each process's column block over
``row`` (and ``depth``). For each graph and grid (GCN, hidden 16, ``metis-balanced`` order, P = 16) the busiest rank's
``weight_grad`` bytes per step, and its bytes per step in all phases, three ways:

- plain: no deferral;
- columns deferred: ``--defer-weight-gather`` with the features dense (as on CUDA, where they are made dense):
  on 2D/3D the ``col`` gather leaves the step, 1D/1.5D is unchanged;
- by rows: ``--defer-weight-gather`` with sparse features (on the CPU): the feature weights also move by rows.

Plus the largest fraction of the F feature columns one block row touches (``touched``), which bounds the saving.

    python benchmarks/feature_rows.py --data-root ../shared/datasets --out results/sparse_comm

Writes ``feature_rows.md`` and ``feature_rows.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

CASES = [("coauthor-physics", "1d", None), ("coauthor-physics", "2d", "4x4"), ("coauthor-physics", "3d", "4x4x1"),
         ("coauthor-physics", "3d", "2x2x4"), ("coauthor-cs", "1d", None), ("coauthor-cs", "2d", "4x4"),
         ("coauthor-cs", "3d", "2x2x4")]
"""(dataset, algorithm, grid) at P = 16; on 3D 2x2x4 the exchange runs within each depth slice and the own rows'
sums are all-reduced on ``depth``."""

WAYS = (("plain", "cpu", False), ("columns deferred", "cuda", True), ("by rows", "cpu", True))
"""(name, device priced, --defer-weight-gather): the device decides whether the features stay sparse."""


def measure(dataset: str, algo: str, grid: str | None, data_root: str, full_feature_rows: bool) -> dict:
    from gridgnn.config import TrainConfig
    from gridgnn.cost.epoch_model import predict_epoch
    from gridgnn.cost.graph_stats import GraphStats
    from gridgnn.grid.shape import resolve_grid
    from gridgnn.nn.trace import model_spec
    from gridgnn.train.run.resolve import reordered_for_grid
    from gridgnn.train.run.training import load_graph

    run = TrainConfig(dataset=dataset, data_root=data_root, hidden=16, nprocs=16, algo=algo, grid=grid,
                      reorder="metis-balanced", full_feature_rows=full_feature_rows)
    shape = resolve_grid(algo, 16, grid=grid)
    graph = reordered_for_grid(run, load_graph(run), shape)
    stats = GraphStats.from_graph(graph)
    rows = stats.feature_touch_counts(list(graph.meta["reorder_bounds"]), 1) if "reorder_bounds" in graph.meta \
        else None
    record = {"dataset": dataset, "grid": f"{algo} {shape.label()}", "full_feature_rows": full_feature_rows,
              "touched": None if rows is None else round(float(rows.max()) / stats.num_features, 3)}
    for name, device, defer in WAYS:
        spec = model_spec(dataclasses.replace(run, defer_weight_gather=defer), graph)
        predicted = predict_epoch(spec, graph, shape, comm="dense", device=device)
        record[name] = {"weight_grad": int(predicted.bytes_by_phase["weight_grad"].max()),
                        "step": int(predicted.bytes.max())}
    return record


def table(records: list[dict]) -> str:
    head = ("| graph | grid | touched (max block) | weight_grad: plain | columns deferred | by rows | by rows / "
            "columns deferred | step bytes: columns deferred → by rows |")
    lines = [head, "|" + "---|" * 8]
    for r in records:
        grid = r["grid"] + (" `--full-feature-rows`" if r["full_feature_rows"] else "")
        cols, rows = r["columns deferred"], r["by rows"]
        lines.append(f"| {r['dataset']} | {grid} | {r['touched']} | {r['plain']['weight_grad']:,} | "
                     f"{cols['weight_grad']:,} | {rows['weight_grad']:,} | "
                     f"{rows['weight_grad'] / cols['weight_grad']:.2f} | {cols['step']:,} → {rows['step']:,} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", required=True)
    parser.add_argument("--out", default="results/sparse_comm")
    args = parser.parse_args(argv)
    records = []
    for dataset, algo, grid in CASES:
        records.append(measure(dataset, algo, grid, args.data_root, False))
        if algo == "2d":
            records.append(measure(dataset, algo, grid, args.data_root, True))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "feature_rows.json").write_text(json.dumps(records, indent=1) + "\n")
    (out / "feature_rows.md").write_text(
        "# Feature weights by rows (model; GCN hidden 16, metis-balanced, P = 16, busiest rank, bytes per step)\n\n"
        + table(records) + "\n\n`touched`: the largest fraction of the F feature columns one block row of the "
        "grid's row blocks has.\n\nCommand: `python benchmarks/feature_rows.py --data-root ../shared/datasets "
        "--out results/sparse_comm`\n")
    print(table(records))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
