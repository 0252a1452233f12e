"""``gridgnn plan``: rank algorithms, grid shapes and replication factors for P processes (no training).

Statistics come from a loaded dataset (``--dataset``: exact nnz of every block) or, for graphs too large to
load, from ``--num-nodes --num-edges --num-features --num-classes`` (a uniform-nnz block estimate, said so in
the output). Prints an aligned table (best marked ``*``, configurations over ``--memory-per-proc`` marked
``no``) or, with ``--json``, a list with one object per configuration.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
from typing import TYPE_CHECKING

from gridgnn.cli.model_args import MODEL_NAMES, add_model_arguments, model_flags
from gridgnn.config import ORDERS, TrainConfig
from gridgnn.cost.profile import load_profile, profile_names
from gridgnn.errors import ConfigError
from gridgnn.grid.shape import ALGORITHMS
from gridgnn.limits import MAX_LAYERS, MAX_PLAN_PROCS, check_plan_sizes

if TYPE_CHECKING:  # the cost model (numpy, scipy) is imported when a plan is made, not to build the parser
    from gridgnn.cost.graph_stats import GraphStats
    from gridgnn.plan.planner import Plan

_DEFAULTS = TrainConfig()
_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1000, "kib": 1024, "m": 1024**2, "mb": 1000**2, "mib": 1024**2,
          "g": 1024**3, "gb": 1000**3, "gib": 1024**3, "t": 1024**4, "tb": 1000**4, "tib": 1024**4}


def parse_size(text: str) -> int:
    """``"16GiB"``, ``"512MB"``, ``"1e9"`` -> bytes (raises `ConfigError`)."""
    match = re.fullmatch(r"\s*([0-9.eE+]+)\s*([a-zA-Z]*)\s*", text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise ConfigError(f"memory size '{text}' is not a number with an optional unit (KiB, MiB, GiB, GB, ...)")
    try:
        value = float(match.group(1)) * _UNITS[unit]
    except ValueError:
        raise ConfigError(f"memory size '{text}' is not a number") from None
    if value <= 0:
        raise ConfigError(f"memory size must be positive, got '{text}'")
    return int(value)


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("plan", help="rank grid configurations by predicted cost",
                                 description="Predict communication, memory and epoch time of every algorithm, "
                                             "grid shape and replication for P processes, and mark the best.")
    data = parser.add_argument_group("graph (a dataset, or counts for graphs too large to load)")
    data.add_argument("--dataset", default=None, metavar="NAME|SPEC|PATH", help="dataset to load (exact blocks)")
    data.add_argument("--data-root", metavar="DIR", default=None, help="folder holding the named datasets")
    data.add_argument("--directed", action="store_true", help="keep edge direction (default: symmetrize)")
    data.add_argument("--seed", type=int, default=_DEFAULTS.seed, help="seed of generators and splits")
    data.add_argument("--num-nodes", type=int, help="vertices (without --dataset)")
    data.add_argument("--num-edges", type=int, help="stored adjacency entries, an undirected edge twice")
    data.add_argument("--num-features", type=int, help="input features")
    data.add_argument("--num-classes", type=int, help="classes")
    data.add_argument("--feature-density", type=float, default=None,
                      help="share of non-zero input features (sparse features; default dense)")
    model = parser.add_argument_group("model (as gridgnn train)")
    add_model_arguments(model, eps_value=False)
    model.add_argument("--layers", type=int, default=_DEFAULTS.layers, help="GCN layers (default: %(default)s)")
    model.add_argument("--hidden", type=int, default=_DEFAULTS.hidden, help="hidden width (default: %(default)s)")
    model.add_argument("--order", choices=ORDERS, default=_DEFAULTS.order, help="product order (default: auto)")
    grid = parser.add_argument_group("configurations and machine")
    grid.add_argument("--nprocs", type=int, nargs="+", default=[4], metavar="P",
                      help="process counts to plan for (default: 4)")
    grid.add_argument("--algo", choices=ALGORITHMS, nargs="+", default=list(ALGORITHMS),
                      help="algorithms to consider (default: all)")
    grid.add_argument("--profile", default="gpu-cluster", metavar="NAME|FILE",
                      help=f"machine profile: {', '.join(profile_names())}, or a file written by "
                           "'gridgnn calibrate' (default: %(default)s)")
    grid.add_argument("--memory-per-proc", type=parse_size, default=None, metavar="SIZE",
                      help="memory per process, e.g. 16GiB (default: the profile's)")
    parser.add_argument("--json", action="store_true", help="print a JSON list, one object per configuration")
    parser.set_defaults(handler=run_plan)


def graph_stats_from_args(args: argparse.Namespace) -> GraphStats:
    """Exact statistics of ``--dataset``, else uniform statistics from the counts (raises `ConfigError`)."""
    from gridgnn.cost.graph_stats import GraphStats

    counts = (args.num_nodes, args.num_edges, args.num_features, args.num_classes)
    if args.dataset is not None:
        if any(c is not None for c in counts):
            raise ConfigError("give either --dataset or --num-nodes/--num-edges/--num-features/--num-classes")
        from gridgnn.data.any_source import load_any

        graph = load_any(args.dataset, data_root=args.data_root, directed=args.directed, seed=args.seed)
        return GraphStats.from_graph(graph, self_loops=args.model == "gcn")
    missing = [f"--{n}" for n, c in zip(("num-nodes", "num-edges", "num-features", "num-classes"), counts,
                                        strict=True) if c is None]
    if missing:
        raise ConfigError(f"without --dataset, give the graph's counts: missing {', '.join(missing)}")
    if args.feature_density is not None and not 0 < args.feature_density <= 1:
        raise ConfigError(f"--feature-density must be in (0, 1], got {args.feature_density}")
    try:
        return GraphStats.from_counts(*counts, feature_density=args.feature_density,
                                      self_loops=args.model == "gcn")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def dataset_flags(args: argparse.Namespace) -> list[str]:
    """The ``gridgnn train`` flags that load the graph this plan priced: the dataset, the data root a name was
    looked up in (resolved here, so the hint works from any folder), ``--directed`` and a non-default seed
    (generators and random splits depend on it). Empty for a plan on counts."""
    if args.dataset is None:
        return []
    from pathlib import Path

    from gridgnn.data.registry import KNOWN_DATASETS, resolve_data_root

    flags = ["--dataset", args.dataset]
    if args.dataset.strip().lower().replace("_", "-") in KNOWN_DATASETS and not Path(args.dataset).exists():
        flags += ["--data-root", str(resolve_data_root(args.data_root).resolve())]
    if args.directed:
        flags.append("--directed")
    if args.seed != _DEFAULTS.seed:
        flags += ["--seed", str(args.seed)]
    return flags


def format_plan(result: Plan) -> str:
    """The aligned table of one plan (one process count)."""
    from gridgnn.plan.planner import _human, _seconds

    head = ["", "algo", "grid", "c", "bytes/rank", "calls/rank", "memory/rank", "comm", "compute", "epoch", "fits"]
    rows = [head]
    for entry in result.entries:
        d = entry.to_dict()
        rows.append(["*" if d["best"] else "", d["algo"], d["grid"], str(d["replication"]),
                     _human(d["bytes_per_rank"]), str(d["calls_per_rank"]), _human(d["memory_per_rank_bytes"]),
                     _seconds(d["predicted_comm_s"]), _seconds(d["predicted_compute_s"]),
                     _seconds(d["predicted_epoch_s"]), "yes" if d["fits"] else "no"])
    widths = [max(len(r[k]) for r in rows) for k in range(len(head))]
    lines = ["  ".join(c.ljust(w) if k < 3 else c.rjust(w) for k, (c, w) in enumerate(zip(r, widths, strict=True)))
             .rstrip() for r in rows]
    return "\n".join(lines)


def run_plan(args: argparse.Namespace) -> int:
    """Handler of ``gridgnn plan``."""
    from gridgnn.cost.epoch_model import ModelSpec
    from gridgnn.plan.planner import _human, plan

    if any(p < 1 for p in args.nprocs):
        raise ConfigError(f"--nprocs must be positive, got {args.nprocs}")
    if max(args.nprocs) > MAX_PLAN_PROCS:
        raise ConfigError(f"--nprocs {max(args.nprocs)} is more than the {MAX_PLAN_PROCS} processes gridgnn "
                          "plans for (its tables grow with the square of P)")
    for name, value in (("layers", args.layers), ("hidden", args.hidden)):
        if value < 1:
            raise ConfigError(f"--{name} must be at least 1, got {value}")
    if args.layers > MAX_LAYERS:
        raise ConfigError(f"--layers must be at most {MAX_LAYERS}, got {args.layers}")
    stats = graph_stats_from_args(args)
    check_plan_sizes(stats.num_nodes, stats.nnz, {"--hidden": args.hidden, "features": stats.num_features,
                                                   "classes": stats.num_classes})
    profile = load_profile(args.profile)
    if args.sage_normalize and args.model != "sage":
        raise ConfigError(f"--sage-normalize applies to --model sage, not {args.model}")
    if args.gin_train_eps and args.model != "gin":
        raise ConfigError(f"--gin-train-eps applies to --model gin, not {args.model}")
    spec = ModelSpec(stats.num_features, stats.num_classes, args.layers, args.hidden, args.order,
                     model=args.model, sage_normalize=args.sage_normalize, gin_train_eps=args.gin_train_eps)
    flags = dataset_flags(args)
    results = [plan(spec, stats, p, profile=profile, memory_per_proc=args.memory_per_proc, algos=args.algo,
                    run_flags=flags) for p in args.nprocs]
    if args.json:
        print(json.dumps([entry for result in results for entry in result.to_json()], indent=1))
        return 0
    limit = results[0].memory_limit
    print(f"graph      {stats.describe()}")
    print(f"model      {MODEL_NAMES[spec.model]} widths {'-'.join(map(str, spec.widths))}, order {spec.order}")
    print(f"machine    {profile.name}: {profile.description}; memory per process "
          f"{_human(limit) if limit else 'unlimited'}")
    for result in results:
        print(f"\nP = {result.best.shape.world_size}: best {result.reason}")
        print(format_plan(result))
        missing = [] if args.dataset is not None else ["--dataset", "YOUR_GRAPH"]  # priced on counts alone
        print("train with: gridgnn train " + shlex.join(missing + result.best.train_flags() + model_flags(spec)))
    return 0
