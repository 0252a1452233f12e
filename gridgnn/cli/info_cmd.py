"""``gridgnn info DATASET``: load a graph and print its statistics (aligned text or ``--json``)."""

from __future__ import annotations

import argparse
import json

from gridgnn.cli.train_cmd import add_dataset_arguments


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("info", help="print a dataset's statistics",
                                 description="Load a dataset and print its statistics.")
    add_dataset_arguments(parser, positional=True)
    parser.add_argument("--json", action="store_true", help="print the statistics as one JSON object")
    parser.set_defaults(handler=run_info)


def flatten(stats: dict, prefix: str = "") -> list[tuple[str, object]]:
    """Nested statistics as (dotted key, value) pairs, in insertion order."""
    pairs: list[tuple[str, object]] = []
    for key, value in stats.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            pairs.extend(flatten(value, prefix=f"{name}."))
        else:
            pairs.append((name, value))
    return pairs


def format_value(value: object) -> str:
    if isinstance(value, bool) or value is None:
        return str(value).lower() if value is not None else "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(format_value(item) for item in value)
    return str(value)


def format_stats(stats: dict) -> str:
    """Aligned ``key  value`` lines."""
    pairs = flatten(stats)
    width = max((len(key) for key, _ in pairs), default=0)
    return "\n".join(f"{key:<{width}}  {format_value(value)}" for key, value in pairs)


def run_info(args: argparse.Namespace) -> int:
    """Handler of ``gridgnn info``."""
    from gridgnn.data.any_source import load_any
    from gridgnn.data.attach import NodeFiles
    from gridgnn.data.stats import graph_statistics

    graph = load_any(args.dataset, data_root=args.data_root, directed=args.directed,
                         normalize_features=args.normalize_features, seed=args.seed, node_files=NodeFiles.of(args))
    stats = graph_statistics(graph)
    if graph.meta.get("reorder", "none") != "none":  # a folder from gridgnn prepare --reorder
        stats["reorder"] = reorder_summary(graph.meta)
    print(json.dumps(stats, indent=1, default=str) if args.json else format_stats(stats))
    return 0


def reorder_summary(meta: dict) -> dict:
    """``method``, the METIS ``parts`` the folder holds (0: no partition) and their rows, max over mean."""
    from gridgnn.data.reorder import row_imbalance

    bounds = meta.get("reorder_bounds")
    parts = len(bounds) - 1 if bounds else 0
    return {"method": meta["reorder"], "parts": parts,
            "part_rows_max_over_mean": round(row_imbalance(bounds[-1], parts, bounds), 4) if parts else None}
