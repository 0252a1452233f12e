"""Starting a distributed preparation: on P local workers (``gridgnn prepare ... --nprocs P``) or as the
processes torchrun started (``torchrun ... -m gridgnn prepare ...``), and finishing it atomically.

The shards go into a fresh sibling of ``--out``; every process writes its own, rank 0 writes the manifest last
(`gridgnn.prepare.manifest`), and only then is the folder renamed onto ``--out``. A worker that fails or dies
leaves no folder under the final name (the launcher removes the partial one) and no process behind it
(`gridgnn.launch.local`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from gridgnn.errors import ConfigError, DataError
from gridgnn.prepare.job import PrepareJob
from gridgnn.safe_files import partial_folder

TIMEOUT_S = 1800.0
"""How long a collective of the preparation waits for a peer (reading a large part may take minutes)."""


def plan_job(args: argparse.Namespace, operator: str, shards: int, folder: str) -> PrepareJob:
    """The job of ``gridgnn prepare`` with ``args`` for a distributed preparation into ``folder``; `ConfigError`
    (one line) for a source or flag that only a one-process preparation serves."""
    from gridgnn.data.attach import NodeFiles
    from gridgnn.data.formats import EDGE_LIST_SUFFIXES
    from gridgnn.data.readers.edgelist import is_edge_array

    files = NodeFiles.of(args)
    if getattr(args, "task", None) not in (None, "auto", "multiclass"):
        raise ConfigError(f"--task {args.task} needs targets that distributed preparation does not generate: "
                          "prepare without --nprocs")
    if args.reorder not in ("none", "random", "double-random"):
        raise ConfigError(f"--reorder {args.reorder} with --nprocs: a distributed preparation computes --reorder "
                          "random and double-random (vertex by vertex); prepare without --nprocs for the other orders")
    text = args.dataset.strip()
    feature_norm = "l1-row" if args.normalize_features else "none"
    common = dict(operator=operator, shards=shards, folder=folder, directed=args.directed, seed=args.seed,
                  normalize_features=bool(args.normalize_features), reorder=args.reorder,
                  reorder_parts=int(getattr(args, "parts", None) or 1), reorder_seed=int(args.seed))
    if text.split(":", 1)[0].lower() == "rmat":
        if files:
            raise ConfigError(f"{', '.join(files.flags())} with a generator: prepare without --nprocs "
                              "(distributed preparation attaches node files to edge lists and .npy edge arrays)")
        from gridgnn.data.generators import check_rmat
        from gridgnn.data.registry import generator_arguments

        _, kwargs = generator_arguments(text, args.seed)
        check_rmat(*(kwargs[k] for k in ("scale", "edge_factor", "a", "b", "c", "features", "classes",
                                         "chunk_edges")))
        meta = {"format": "rmat", "split": "per-vertex-60-20-20", "seed": kwargs["seed"],
                "symmetrized": not args.directed, "feature_normalization": feature_norm}
        return PrepareJob(source=text, kind="rmat", name=text, generator=kwargs, meta=meta,
                          **{**common, "seed": kwargs["seed"]})
    if text.split(":", 1)[0].lower() == "csbm":
        if files:
            raise ConfigError(f"{', '.join(files.flags())} with a generator: prepare without --nprocs "
                              "(distributed preparation attaches node files to edge lists and .npy edge arrays)")
        from gridgnn.data.generators import csbm_parts
        from gridgnn.data.registry import generator_arguments

        _, kwargs = generator_arguments(text, args.seed)
        if not kwargs["chunked"]:
            raise ConfigError("csbm draws its graph from one generator in sequence, which processes cannot share: "
                              "add chunked=1 (the same distributions in seeded parts: the same graph on any "
                              "--nprocs, and without it), or prepare without --nprocs")
        meta = csbm_parts(**kwargs, directed=args.directed).meta() | {
            "symmetrized": not args.directed, "feature_normalization": feature_norm}
        return PrepareJob(source=text, kind="csbm", name=text, generator=kwargs, meta=meta,
                          **{**common, "seed": kwargs["seed"]})
    path = Path(text).expanduser()
    from gridgnn.prepare.ogb_parts import is_ogb_binary, ogb_layout

    if is_ogb_binary(path):
        if files:
            raise ConfigError(f"{', '.join(files.flags())} with an OGB folder: it names its own node data; prepare "
                              "without them")
        layout, node_files, meta = ogb_layout(path)
        return PrepareJob(source=str(path), kind="ogb-binary", name=path.name, layout=layout,
                          meta=meta | {"symmetrized": not args.directed, "feature_normalization": feature_norm},
                          node_files=node_files, **common)
    binary = is_edge_array(path)
    if not path.is_file() or not (binary or path.name.lower().endswith(EDGE_LIST_SUFFIXES)):
        gz = " (a .gz edge list cannot be cut into byte ranges: decompress it first)" \
            if path.name.lower().endswith(".gz") else ""
        raise ConfigError(f"--nprocs: distributed preparation reads text edge lists ({', '.join(EDGE_LIST_SUFFIXES)}), "
                          f".npy edge arrays, OGB folders in the binary layout (raw/data.npz) and rmat: specs, not "
                          f"'{text}'{gz}; prepare it without --nprocs")
    from gridgnn.prepare.text_edges import file_state

    if binary:
        from gridgnn.data.readers.edgelist import open_edge_array

        open_edge_array(path)  # its dtype and shape, one line now rather than in every process
    from gridgnn.prepare.node_data import check_files

    meta = {"source": str(path), "format": "edge-array" if binary else "edge-list", "id_base": "compact",
            "features": "placeholder",
            "labels": "none", "split": "random-60-20-20", "symmetrized": not args.directed,
            "feature_normalization": feature_norm}
    node_files, node_meta = check_files(files.features, files.labels, files.split)
    if files.edge_features:  # one row per edge of the list, read by each process for its edges
        from gridgnn.data.file_digest import file_digest
        from gridgnn.prepare.edge_rows import check_file

        node_files["edge_features"], _ = check_file(files.edge_features)
        node_meta |= {"edge_features": "file", "edge_features_file": node_files["edge_features"],
                      "edge_features_sha256": file_digest(Path(node_files["edge_features"]))}
    return PrepareJob(source=str(path), kind="edge-list", name=path.name.split(".")[0],
                      source_state=file_state(path), meta=meta | node_meta, node_files=node_files, **common)


def run_job(job: PrepareJob, say=print) -> dict | None:
    """Collective on the world: this process's part of ``job``; rank 0 then writes the manifest and returns
    the run's summary (None on the other ranks)."""
    import torch.distributed as dist

    from gridgnn.prepare.exchange import world
    from gridgnn.prepare.manifest import write_manifest
    from gridgnn.prepare.pipeline import peak_rss_bytes, prepare_part

    start = time.perf_counter()
    part = prepare_part(job, say)
    rank, size = world()
    parts = [part] * size
    if size > 1:
        dist.all_gather_object(parts, part)
    if rank != 0:
        return None
    finish = time.perf_counter()
    info = part.node_info  # alike on every process
    manifest = write_manifest(job, parts, info.num_features, info.num_classes, info.task)
    parts[0].peak_rss_bytes = peak_rss_bytes()  # rank 0 also hashed the graph for the manifest
    seconds = {phase: max(p.seconds.get(phase, 0.0) for p in parts) for phase in part.seconds}
    seconds["manifest"] = time.perf_counter() - finish
    summary = {"nprocs": size, "shards": job.shards, "num_nodes": manifest["num_nodes"],
               "norm_nnz": manifest["norm_nnz"], "folder_bytes": sum(f["bytes"] for f in manifest["files"].values()),
               "seconds": seconds, "total_s": time.perf_counter() - start,
               "peak_rss_bytes": [p.peak_rss_bytes for p in parts],
               "peak_rss_after_phase": [p.peaks for p in parts],
               "bytes_read": [p.bytes_read for p in parts], "entries_sent": [p.entries_sent for p in parts]}
    phases = ", ".join(f"{k} {v:.1f} s" for k, v in seconds.items())
    say(f"prepare    done      {summary['total_s']:7.1f} s  ({phases}); peak memory per process "
        f"{', '.join(f'{b / 2**20:.0f}' for b in summary['peak_rss_bytes'])} MiB")
    return summary


def prepare_with_workers(args: argparse.Namespace, operator: str, target: Path) -> int:
    """``gridgnn prepare ... --nprocs P``: run the job on P local workers, then rename the folder into place."""
    from gridgnn.launch.local import launch_local

    nprocs, shards = args.nprocs, args.shards or args.nprocs
    if shards < nprocs:
        raise ConfigError(f"--shards {shards} is below --nprocs {nprocs}: every process writes at least one shard")
    partial = partial_folder(target)
    try:
        job = plan_job(args, operator, shards, str(partial))
        job.launcher_pid = os.getpid()
        with tempfile.TemporaryDirectory(prefix="gridgnn-prepare-") as scratch:
            job.summary_path = str(Path(scratch) / "summary.json")
            job_path = job.write(Path(scratch) / "job.json")
            status = launch_local(str(job_path), nprocs, threads=1)
            done = Path(job.summary_path)
            summary = json.loads(done.read_text()) if status == 0 and done.is_file() else None
        if status != 0:
            shutil.rmtree(partial, ignore_errors=True)
            return status
        _publish(partial, target)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    _say_done(summary, target, args.summary)
    return 0


def prepare_under_torchrun(args: argparse.Namespace, operator: str, target: Path) -> int:
    """``gridgnn prepare`` run by torchrun (WORLD_SIZE > 1): join the group, rank 0 makes the partial folder on
    the file system every process writes to, all prepare, rank 0 publishes."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method="env://", timeout=timedelta(seconds=TIMEOUT_S))
    try:
        rank, size = dist.get_rank(), dist.get_world_size()
        shards = args.shards or size
        if shards < size:
            raise ConfigError(f"--shards {shards} is below the {size} processes: each writes at least one shard")
        made = [None]
        if rank == 0:
            made[0] = str(partial_folder(target))
        dist.broadcast_object_list(made, src=0)
        partial = Path(made[0])
        try:
            summary = run_job(plan_job(args, operator, shards, str(partial)))
            dist.barrier()
            if rank == 0:
                _publish(partial, target)
        except BaseException:
            if rank == 0:
                shutil.rmtree(partial, ignore_errors=True)
            raise
        if rank == 0:
            _say_done(summary, target, args.summary)
        return 0
    finally:
        dist.destroy_process_group()


def worker_main(job: PrepareJob) -> int:
    """A local worker: join the launcher's group (gloo over loopback), run the job, leave."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://", timeout=timedelta(seconds=TIMEOUT_S))
    try:
        summary = run_job(job)
        if summary is not None and job.summary_path:
            Path(job.summary_path).write_text(json.dumps(summary) + "\n")
        dist.barrier()
        return 0
    finally:
        dist.destroy_process_group()


def _publish(partial: Path, target: Path) -> None:
    """Rename the complete folder onto ``target`` (refused when something appeared there meanwhile)."""
    if os.path.lexists(target):
        shutil.rmtree(partial, ignore_errors=True)
        raise ConfigError(f"--out '{target}' appeared while preparing (another preparation?); nothing replaced it")
    try:
        partial.rename(target)
    except OSError as exc:
        shutil.rmtree(partial, ignore_errors=True)
        raise ConfigError(f"--out '{target}': cannot move the prepared folder into place ({exc.strerror})") from None


def _say_done(summary: dict | None, target: Path, summary_file: str | None) -> None:
    if summary is None:
        raise DataError("the preparation ended without its summary")
    print(f"prepared   {summary['num_nodes']} nodes, {summary['norm_nnz']} operator entries in "
          f"{summary['shards']} shards by {summary['nprocs']} processes -> {target}", flush=True)
    if summary_file:
        Path(summary_file).write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    sys.stdout.flush()
