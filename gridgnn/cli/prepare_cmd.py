"""``gridgnn prepare DATASET --out DIR``: load, preprocess and normalize a graph once, for distributed runs.

The folder (see `gridgnn.data.prepared`) is then given as ``--dataset DIR`` to ``gridgnn train --nprocs P``
or to torchrun workers: every worker memory-maps it and reads only its rows, instead of each loading and
normalizing the whole graph.
"""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

import gridgnn.config.choices
from gridgnn.cli.train_cmd import add_dataset_arguments
from gridgnn.config import REORDERS
from gridgnn.errors import ConfigError
from gridgnn.safe_files import partial_folder


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("prepare", help="prepare a graph once for distributed runs",
                                 description="Load, preprocess and normalize a dataset into a folder that "
                                             "distributed workers memory-map (--dataset DIR).")
    add_dataset_arguments(parser, positional=True)
    parser.add_argument("--out", required=True, metavar="DIR", help="folder to create (must not exist)")
    parser.add_argument("--model", choices=gridgnn.config.choices.MODELS, default="gcn",
                        help="the model the folder is for: it stores that model's aggregation operator "
                             "(gcn: Â, sage: D⁻¹A, gin: A, gat: the pattern of A + I) (default: %(default)s)")
    parser.add_argument("--reorder", choices=REORDERS, default="none",
                        help="renumber the vertices once, here (train with the same --reorder) "
                             "(default: %(default)s)")
    parser.add_argument("--parts", type=int, default=None, metavar="K",
                        help="the row blocks of the grid the folder is for (P for 1d, P/c for 1.5d, PR for 2d, "
                             "Q for 3d), or a multiple of them (each block then takes whole parts): METIS cuts "
                             "into K parts; needed by every --reorder metis*")
    parallel = parser.add_argument_group("distributed preparation (edge lists, .npy edge arrays and rmat: specs)")
    parallel.add_argument("--nprocs", type=int, default=None, metavar="P",
                          help="prepare on P local processes, each reading its part of the source; the folder "
                               "is then written as row shards (under torchrun: the processes torchrun starts)")
    parallel.add_argument("--shards", type=int, default=None, metavar="K",
                          help="row shards of a distributed preparation (default: P; at least P): the folder is "
                               "the same for every P <= K")
    parallel.add_argument("--summary", default=None, metavar="FILE",
                          help="write the distributed preparation's summary (seconds per phase, peak memory per "
                               "process) as JSON")
    parser.set_defaults(handler=run_prepare)


def run_prepare(args: argparse.Namespace) -> int:
    """Write the prepared folder atomically: into a temporary sibling, renamed into place when complete."""
    from gridgnn.data.attach import NodeFiles
    from gridgnn.data.prepared import prepare_graph
    from gridgnn.data.registry import load_dataset
    from gridgnn.nn.models import operator_of

    target = Path(args.out)
    if os.path.lexists(target):  # a dangling link too: the folder is renamed onto the name, never through it
        raise ConfigError(f"--out '{target}' exists; choose a new folder")
    if not target.parent.is_dir():
        raise ConfigError(f"--out '{target}': folder '{target.parent}' does not exist")
    if args.parts is not None and args.parts < 1:
        raise ConfigError(f"--parts must be at least 1, got {args.parts}")
    if args.reorder.startswith("metis") and args.parts is None:
        raise ConfigError(f"--reorder {args.reorder} needs --parts K: the grid's row blocks (P for 1d, P/c for "
                          "1.5d, PR for 2d, Q for 3d)")
    for flag in ("nprocs", "shards"):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
            raise ConfigError(f"--{flag} must be at least 1, got {getattr(args, flag)}")
    if args.shards is not None and args.nprocs is None and not _under_torchrun():
        raise ConfigError("--shards is for a distributed preparation: give --nprocs P too")
    if args.nprocs is not None or _under_torchrun():
        from gridgnn.prepare.launch import prepare_under_torchrun, prepare_with_workers

        if _under_torchrun():
            if args.nprocs is not None:
                raise ConfigError("--nprocs under torchrun: torchrun starts the processes; leave --nprocs out")
            return prepare_under_torchrun(args, operator_of(args.model), target)
        return prepare_with_workers(args, operator_of(args.model), target)
    graph = load_dataset(args.dataset, data_root=args.data_root, directed=args.directed,
                         normalize_features=args.normalize_features, seed=args.seed,
                         node_files=NodeFiles.of(args))
    if args.reorder != "none":
        from gridgnn.data.reorder import reorder_graph

        graph = reorder_graph(graph, args.reorder, args.parts or 1, args.seed)
    partial = partial_folder(target)
    try:
        prepare_graph(graph, partial, operator=operator_of(args.model))
        partial.rename(target)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    print(f"prepared   {graph.name}: {graph.num_nodes} nodes, {graph.num_edges} stored edges, "
          f"{graph.num_features} features, {graph.num_classes} classes -> {target}")
    return 0


def _under_torchrun() -> bool:
    """True when torchrun started this process as one of several (``WORLD_SIZE`` > 1)."""
    return int(os.environ.get("WORLD_SIZE", "1") or 1) > 1

