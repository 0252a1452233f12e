"""``gridgnn plan``: rank algorithms, grid shapes and replication factors for P processes (no training).

Statistics come from a loaded dataset (``--dataset``: exact nnz of every block) or, for graphs too large to
load, from ``--num-nodes --num-edges --num-features --num-classes`` (a uniform-nnz block estimate, said so in
the output). Prints an aligned table (best marked ``*``, configurations over ``--memory-per-proc`` marked
``no``; when none fits, none is marked best and the table is still ranked by time) or, with ``--json``, a list
with one object per configuration.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import shlex
import sys
from functools import partial
from types import SimpleNamespace
from typing import TYPE_CHECKING

from gridgnn.cli.model_args import add_model_arguments, model_flags, model_label
from gridgnn.cli.node_file_flags import add_node_file_arguments
from gridgnn.config import COMM_PRECISION_CHOICES, COMMS, MAX_HEADS, ORDERS, REORDER_CHOICES, TrainConfig, model_comms
from gridgnn.config.choices import COLUMN_ORDERED, COVER_ALGOS, check_column_order
from gridgnn.cost.memory_model import sparse_features
from gridgnn.cost.process_baseline import baseline_note
from gridgnn.cost.profile import profile_names
from gridgnn.cost.spmm_cost import SizeInfo
from gridgnn.errors import ConfigError
from gridgnn.grid.shape import ALGORITHMS
from gridgnn.limits import MAX_LAYERS, MAX_MEMORY_BYTES, MAX_PLAN_PROCS, check_plan_sizes, human_bytes

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
    if not value <= MAX_MEMORY_BYTES:  # inf (1e400) too
        raise ConfigError(f"memory size '{text}' is beyond {human_bytes(MAX_MEMORY_BYTES)} (2^63 bytes)")
    if value < 1:
        raise ConfigError(f"memory size '{text}' is less than one byte")
    return int(value)


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("plan", help="rank grid configurations by predicted cost",
                                 description="Predict communication, memory and epoch time of every algorithm, "
                                             "grid shape and replication for P processes, and mark the best.")
    data = parser.add_argument_group("graph (a dataset, or counts for graphs too large to load)")
    data.add_argument("--dataset", default=None, metavar="NAME|SPEC|PATH", help="dataset to load (exact blocks)")
    data.add_argument("--data-root", metavar="DIR", default=None, help="folder holding the named datasets")
    data.add_argument("--directed", action="store_true", help="keep edge direction (default: symmetrize)")
    add_node_file_arguments(data)
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
    grid.add_argument("--comm", choices=COMMS, default="auto",
                      help="SpMM communication to price: dense, sparse, cover (1d, 1.5d), or auto = all that "
                           "apply, side by side (default: %(default)s)")
    grid.add_argument("--comm-precision", choices=COMM_PRECISION_CHOICES, default="fp32",
                      help="wire precision of the activations the SpMMs and dense phases move, as gridgnn train "
                           "--comm-precision; auto: bf16 where the profile predicts it 5%% faster (default: "
                           "%(default)s, exact)")
    grid.add_argument("--cache-panels", action=argparse.BooleanOptionalAction, default=None,
                      help="price 2d and 3d with their Â panels received once, at set-up, and kept (as "
                           "gridgnn train --cache-panels; default: both, the planner decides)")
    grid.add_argument("--full-feature-rows", action=argparse.BooleanOptionalAction, default=None,
                      help="price 2d and 3d with every process keeping all feature columns of its rows, so the "
                           "first layer's product with the features moves nothing (as gridgnn train "
                           "--full-feature-rows; default: both, the planner decides)")
    grid.add_argument("--defer-weight-gather", action=argparse.BooleanOptionalAction, default=None,
                      help="price 2d and 3d with each process updating only its column blocks of the weights, "
                           "gathered whole only when read (as gridgnn train --defer-weight-gather; default: "
                           "both, the planner decides)")
    grid.add_argument("--reorder", choices=REORDER_CHOICES, default="auto",
                      help="price the graph renumbered this way (needs --dataset; METIS cuts into each grid's row "
                           "blocks); auto prices the graph's own order and metis-balanced when pymetis is "
                           "installed (default: %(default)s)")
    grid.add_argument("--profile", default=None, metavar="NAME|FILE",
                      help=f"machine profile: {', '.join(profile_names())}, or a file written by "
                           "'gridgnn calibrate' (default: the profile of this machine's device, as gridgnn "
                           "train uses)")
    grid.add_argument("--memory-per-proc", type=parse_size, default=None, metavar="SIZE",
                      help="memory per process, e.g. 16GiB (default: the profile's)")
    parser.add_argument("--json", action="store_true", help="print a JSON list, one object per configuration")
    parser.set_defaults(handler=run_plan)


def _graph_from_args(args: argparse.Namespace):
    """The graph of ``--dataset`` as loaded (None for a plan on counts; refuses both); a folder prepared for the
    model's operator stays on disk (its statistics are read block by block, as ``train`` reads them)."""
    counts = (args.num_nodes, args.num_edges, args.num_features, args.num_classes)
    from gridgnn.data.attach import NodeFiles

    files = NodeFiles.of(args)
    if args.dataset is None:
        if files:
            raise ConfigError(f"{', '.join(files.flags())} attach node data to a graph: give --dataset too")
        return None
    if any(c is not None for c in counts):
        raise ConfigError("give either --dataset or --num-nodes/--num-edges/--num-features/--num-classes")
    from gridgnn.data.any_source import load_any
    from gridgnn.nn.models import operator_of

    return load_any(args.dataset, data_root=args.data_root, directed=args.directed, seed=args.seed,
                    node_files=files, in_place_for=operator_of(args.model))


def _stats_from_counts(args: argparse.Namespace) -> GraphStats:
    """Uniform statistics from ``--num-nodes`` ... (raises `ConfigError`)."""
    from gridgnn.cost.graph_stats import GraphStats

    counts = (args.num_nodes, args.num_edges, args.num_features, args.num_classes)
    if getattr(args, "reorder", "none") not in ("none", "auto"):
        raise ConfigError("--reorder prices a renumbered graph: it needs --dataset, not counts")
    missing = [f"--{n}" for n, c in zip(("num-nodes", "num-edges", "num-features", "num-classes"), counts,
                                        strict=True) if c is None]
    if missing:
        raise ConfigError(f"without --dataset, give the graph's counts: missing {', '.join(missing)}")
    if args.feature_density is not None and not 0 < args.feature_density <= 1:
        raise ConfigError(f"--feature-density must be in (0, 1], got {args.feature_density}")
    from gridgnn.plan.op_templates import self_loops_of

    try:
        return GraphStats.from_counts(*counts, feature_density=args.feature_density,
                                      self_loops=self_loops_of(args.model))
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
    for name in ("features", "labels", "split", "edge_features"):
        if getattr(args, name, None):
            flags += [f"--{name.replace('_', '-')}", getattr(args, name)]
    if args.seed != _DEFAULTS.seed:
        flags += ["--seed", str(args.seed)]
    return flags


def format_plan(result: Plan) -> str:
    """The aligned table of one plan (one process count)."""
    from gridgnn.plan.planner import _human, _seconds

    head = ["", "algo", "grid", "c", "order", "spmm", "bytes/rank", "calls/rank", "memory/rank", "comm", "compute",
            "epoch", "fits"]
    rows = [head]
    for entry in result.entries:
        d = entry.to_dict()
        rows.append(["*" if d["best"] else "", d["algo"], d["grid"], str(d["replication"]), entry.reorder, entry.spmm,
                     _human(d["bytes_per_rank"]), str(d["calls_per_rank"]), _human(d["memory_per_rank_bytes"]),
                     _seconds(d["predicted_comm_s"]), _seconds(d["predicted_compute_s"]),
                     _seconds(d["predicted_epoch_s"]), "yes" if d["fits"] else "no"])
    widths = [max(len(r[k]) for r in rows) for k in range(len(head))]
    left = (0, 1, 2, 4, 5)  # marker, algo, grid, order, spmm (dense or sparse) are text
    lines = ["  ".join(c.ljust(w) if k in left else c.rjust(w) for k, (c, w) in enumerate(zip(r, widths, strict=True)))
             .rstrip() for r in rows]
    return "\n".join(lines)


def edge_features_for(args, stats) -> int:
    """The edge features the planned model reads of the graph (0: none); `ConfigError` as ``gridgnn train``
    refuses (`gridgnn.nn.models.check_edge_inputs`)."""
    from gridgnn.plan.op_templates import known

    if known(args.model) and not getattr(args, "edge_dim", 0) and not getattr(args, "edge_features", None):
        return 0  # a kind of the committed table reads none: no torch import for the plan
    from gridgnn.nn.models import check_edge_inputs, reads_edges

    config = SimpleNamespace(model=args.model, edge_dim=getattr(args, "edge_dim", 0),
                             edge_features=getattr(args, "edge_features", None))
    check_edge_inputs(config, stats.num_edge_features)
    return stats.num_edge_features if reads_edges(config) else 0


def check_attention_flags(args) -> None:
    """`ConfigError` for GAT's flags without ``--model gat`` or out of range."""
    for name, value in (("heads", args.heads), ("output-heads", args.output_heads)):
        if not 1 <= value <= MAX_HEADS:
            raise ConfigError(f"--{name} must be from 1 to {MAX_HEADS}, got {value}")
    if not 0.0 <= args.attn_dropout < 1.0:
        raise ConfigError(f"--attn-dropout must be in [0, 1), got {args.attn_dropout}")
    if (args.heads != 1 or args.output_heads != 1 or args.attn_dropout != 0.0) and args.model != "gat":
        raise ConfigError(f"--heads, --output-heads and --attn-dropout apply to --model gat, not {args.model}")


def panels_line(result) -> str | None:
    """How much of the fastest fitting configuration that moves Â panels they weigh, pointing to
    ``--cache-panels`` (None when no fitting configuration moves any). Not for GAT, whose ``col`` broadcasts
    also carry the attention coefficients."""
    from gridgnn.plan.planner import _human

    for entry in (e for e in result.entries if e.fits):
        pred = entry.prediction
        panels = sum(t.bytes for t in pred.terms
                     if t.phase in ("spmm_forward", "spmm_backward") and t.op == "broadcast" and t.axis == "col")
        if isinstance(panels, int) or not panels.any():
            continue
        busiest = int(pred.bytes.argmax())
        return (f"panels     Â panels are {_human(int(panels[busiest]))} of the {_human(int(pred.bytes[busiest]))} "
                f"{entry.label} moves per rank per step: --cache-panels receives them once, at set-up, for more "
                "graph memory (gridgnn plan --cache-panels prices it)")
    return None


def _price_best(result, spec, stats, profile):
    """The best configuration of ``result`` priced again for the model ``spec`` (a `ModelSpec`), on ``stats``
    (those it was priced on: its own METIS order) and ``profile`` (and its device)."""
    from gridgnn.cost.epoch_model import predict_epoch

    best = result.best
    return predict_epoch(spec, stats, best.shape, profile=profile, comm=best.comm, cache_panels=best.cache_panels,
                         device=profile.device, comm_precision=best.comm_precision)


def feature_rows_line(result, stats, profile) -> str | None:
    """What ``--full-feature-rows`` would save on the best configuration: its first layer's ``dense``-phase
    bytes per rank per step, for more feature memory (None where it would not take effect). ``stats``: those
    the best configuration was priced on (its own METIS order)."""
    from gridgnn.plan.planner import _human

    best, pred = result.best, result.best.prediction
    spec = dataclasses.replace(pred.spec, full_feature_rows=True)
    if not spec.keeps_feature_rows(best.shape):
        return None
    rows = _price_best(result, spec, stats, profile)
    busiest = int(pred.bytes.argmax())
    saved = int(pred.bytes[busiest]) - int(rows.bytes[busiest])
    extra = int(rows.memory["features"].max()) - int(pred.memory["features"].max())
    return (f"rows       --full-feature-rows would save {_human(saved)} of the {_human(int(pred.bytes[busiest]))} "
            f"{best.label} moves per rank per step (its first layer's product with the features), for "
            f"{_human(extra)} more feature memory per rank (gridgnn plan --full-feature-rows prices it)")


def weight_gather_line(result, stats, profile) -> str | None:
    """What ``--defer-weight-gather`` would save on the best configuration: the ``col`` all-gather of its
    weight gradients, bytes per rank per step (None where it would not take effect). ``stats``: those the
    best configuration was priced on."""
    from gridgnn.plan.planner import _human

    best, pred = result.best, result.best.prediction
    spec = dataclasses.replace(pred.spec, defer_weight_gather=True)
    sparse = sparse_features(stats, profile.device)
    if not spec.defers_weight_gather(best.shape, sparse):
        return None
    busiest = int(pred.bytes.argmax())
    saved = int(pred.bytes[busiest]) - int(_price_best(result, spec, stats, profile).bytes[busiest])
    by_rows = "its feature weights' gradients moved by rows instead of summed whole"
    if not best.shape.splits_features:
        what = by_rows
    else:
        what = "the col all-gather of its weight gradients" + (
            f", and {by_rows}" if spec.reduces_feature_rows(best.shape, sparse) else "")
    return (f"weights    --defer-weight-gather would save {_human(saved)} of the {_human(int(pred.bytes[busiest]))} "
            f"{best.label} moves per rank per step: {what}; whole weights "
            "are then gathered only when read (gridgnn plan --defer-weight-gather prices it)")


def attention_line(result, stats, profile) -> str:
    """What attention adds over a GCN of the same widths on the best grid: bytes per rank and epoch time."""
    from gridgnn.plan.planner import _human

    best = result.best
    gat = best.prediction
    from gridgnn.plan.op_templates import spec_for

    gcn_spec = spec_for(dataclasses.replace(gat.spec, model="gcn", heads=1, output_heads=1, ops=None,
                                              hidden=gat.spec.widths[1] if gat.spec.layers > 1 else gat.spec.hidden),
                          stats)
    gcn = _price_best(result, gcn_spec, stats, profile)
    extra = int(gat.bytes.max()) - int(gcn.bytes.max())
    return (f"attention  adds {_human(extra)} per rank per epoch over a GCN of the same widths on "
            f"{best.algo} {best.shape.label()} ({_human(int(gcn.bytes.max()))} -> {_human(int(gat.bytes.max()))}; "
            f"epoch {gcn.epoch_s * 1e3:.3g} -> {gat.epoch_s * 1e3:.3g} ms): the score terms' stages, the row "
            "maxima and sums, and the SDDMM's second pass over x'")


def run_plan(args: argparse.Namespace) -> int:
    """Handler of ``gridgnn plan``."""
    from gridgnn.cost.epoch_model import ModelSpec
    from gridgnn.plan.op_templates import spec_for
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
    from gridgnn.config import ExecutionOptions
    from gridgnn.plan.execution import (
        OrderedStats,
        choose_precision,
        metis_note,
        options_to_price,
        orders_to_price,
        profile_of,
        reorder_seconds,
        this_device_type,
    )

    graph = _graph_from_args(args)
    options = ExecutionOptions(algo="auto", comm=args.comm, reorder=args.reorder, cache_panels=args.cache_panels,
                               full_feature_rows=args.full_feature_rows,
                               defer_weight_gather=args.defer_weight_gather, profile=args.profile)
    if graph is None:
        stats = _stats_from_counts(args)
        orders, by_order = ("none",), (lambda order, rows, depth: stats)
    else:  # exact block nnz, in every order priced (METIS cuts into each grid's row blocks, as training does)
        say = partial(print, file=sys.stderr if args.json else sys.stdout)  # JSON stays pure
        by_order = OrderedStats(graph, args.model, args.seed, say=say)
        stats, orders = by_order("none", 1, 1), orders_to_price(options, graph)
    check_plan_sizes(stats.num_nodes, stats.nnz, {"--hidden": args.hidden, "features": stats.num_features,
                                                   "classes": stats.num_classes})
    profile = profile_of(options, this_device_type())  # as gridgnn train prices: the device's by default
    if args.sage_normalize and args.model != "sage":
        raise ConfigError(f"--sage-normalize applies to --model sage, not {args.model}")
    if args.gin_train_eps and args.model not in ("gin", "gine"):
        raise ConfigError(f"--gin-train-eps applies to --model gin and gine, not {args.model}")
    if args.gin_norm != "none" and args.model not in ("gin", "gine"):
        raise ConfigError(f"--gin-norm applies to --model gin and gine, not {args.model}")
    check_attention_flags(args)
    spec = spec_for(ModelSpec(stats.num_features, stats.num_classes, args.layers, args.hidden, args.order,
                                model=args.model, sage_normalize=args.sage_normalize,
                                gin_train_eps=args.gin_train_eps, gin_norm=args.gin_norm, heads=args.heads,
                                output_heads=args.output_heads, attn_dropout=args.attn_dropout,
                                full_feature_rows=bool(args.full_feature_rows),
                                edge_features=edge_features_for(args, stats),
                                defer_weight_gather=bool(args.defer_weight_gather)), stats)
    flags = dataset_flags(args)
    if args.model == "gat" and not args.edge_dim and args.comm in ("sparse", "cover"):
        raise ConfigError(f"--comm {args.comm} is not implemented for --model gat (its attention stages move "
                          "whole blocks); use --comm dense or auto")
    comms = model_comms(args.model, args.comm)
    if args.reorder in COLUMN_ORDERED:  # the refusals of `gridgnn train`, for the grids asked
        grids = [a for a in args.algo if a not in ("1d", "1.5d")] or args.algo
        check_column_order(args.reorder, grids[0], args.comm, args.model, args.edge_dim)
    if args.comm == "cover" and not set(args.algo) & set(COVER_ALGOS):
        raise ConfigError(f"--comm cover runs on --algo 1d and 1.5d, not {' '.join(args.algo)}; use --comm sparse, "
                          "dense or auto")
    # the same pricing as gridgnn train's (gridgnn.plan.execution.choose_execution): each free option both ways
    def plan_for(world_size: int):
        def plan_in(precision: str):
            return plan(spec, stats, world_size, profile=profile, memory_per_proc=args.memory_per_proc,
                        algos=args.algo, run_flags=flags, comms=comms, orders=orders, stats_for_order=by_order,
                        reorder_s=reorder_seconds(stats), sizes=SizeInfo(precision=precision),
                        **options_to_price(options))
        return choose_precision(args.comm_precision, plan_in)[0]

    results = [plan_for(p) for p in args.nprocs]
    if args.json:
        print(json.dumps([entry for result in results for entry in result.to_json()], indent=1))
        return 0
    limit = results[0].memory_limit

    def priced_on(entry) -> GraphStats:
        """The statistics ``entry`` was priced on: its own order, cut for its grid (row blocks, depth)."""
        return by_order(entry.reorder, entry.shape.sizes[0], entry.shape.depth)

    print(f"graph      {stats.describe()}")
    print(f"model      {model_label(spec.model)} widths {'-'.join(map(str, spec.widths))}, order {spec.order}")
    print(f"machine    {profile.name}: {profile.description}; memory per process "
          f"{_human(limit) if limit else 'unlimited'}")
    print(f"memory     memory/rank counts {baseline_note(profile.device)}")
    for result in results:
        fits = result.best.fits
        print(f"\nP = {result.best.shape.world_size}: " + ("best " if fits else "NOTHING FITS (none marked best), "
                                                                             "fastest ") + result.reason)
        print(format_plan(result))
        missing = [] if args.dataset is not None else ["--dataset", "YOUR_GRAPH"]  # priced on counts alone
        command = "gridgnn train " + shlex.join(missing + result.best.train_flags() + model_flags(spec))
        print(f"train with: {command}" if fits else "train with: nothing: give more memory per process "
              f"(--memory-per-proc) or more processes; the fastest, over the limit, is {command} --no-memory-check")
        if spec.model == "gat":
            print(attention_line(result, priced_on(result.best), profile))
        elif not args.cache_panels and not result.best.cache_panels and (line := panels_line(result)) is not None:
            print(line)  # the hints: what an option the best configuration leaves off would change
        if not args.full_feature_rows and not result.best.feature_rows and \
                (line := feature_rows_line(result, priced_on(result.best), profile)):
            print(line)
        if not args.defer_weight_gather and not result.best.defer_weight_gather and \
                (line := weight_gather_line(result, priced_on(result.best), profile)):
            print(line)
    if graph is not None and (note := metis_note(options)) is not None:
        print(note)
    return 0
