"""The planner's block statistics under torchrun: every worker computing all of them, against the world sharing
them out (`gridgnn/train/run/split_stats.py`), on a large prepared folder (issue 36).

Each measurement is one ``python -m torch.distributed.run --standalone --nproc-per-node W`` of a child that
joins the group and resolves ``gridgnn train --dataset DIR`` for W processes with every execution option free
(`resolve_run`, as a torchrun worker does), alone (``each``) or inside `blocks_split_by(split_over_world)`
(``split``); each worker reports its seconds and peak resident memory. The modes alternate, ``--repeats``
times; both choose the same run.

Usage (the committed run)::

    python benchmarks/torchrun_statistics.py --folder /work/scratch/r21 --world 2 --repeats 2 \\
        --out results/sharded_prepare
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import contextlib, json, resource, sys, time
import torch.distributed as dist
from gridgnn.config import TrainConfig
from gridgnn.cost.block_stats import blocks_split_by
from gridgnn.data.prepared import open_prepared
from gridgnn.train.run.resolve import resolve_run
from gridgnn.train.run.split_stats import split_over_world

folder, mode = sys.argv[1], sys.argv[2]
dist.init_process_group("gloo")
world = dist.get_world_size()
graph = open_prepared(folder)
dist.barrier()
start = time.perf_counter()
config = TrainConfig(dataset=folder, nprocs=world, algo="auto", comm="auto", reorder="none")
with blocks_split_by(split_over_world) if mode == "split" else contextlib.nullcontext():
    config, shape, _ = resolve_run(config, graph, world)
seconds = time.perf_counter() - start
print(json.dumps({"mode": mode, "rank": dist.get_rank(), "seconds": seconds,
                  "peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "chose": f"{shape.algo} {shape.label()} {config.comm}"}), flush=True)
dist.destroy_process_group()
"""


def measure(folder: Path, world: int, mode: str, script: Path) -> list[dict]:
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                           str(world), str(script), str(folder), mode], check=True, capture_output=True, text=True)
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    manifest = json.loads((args.folder / "prepared.json").read_text())
    runs: dict[str, list[list[dict]]] = {"each": [], "split": []}
    with tempfile.TemporaryDirectory() as scratch:
        script = Path(scratch) / "torchrun_statistics_child.py"
        script.write_text(CHILD)
        for _ in range(args.repeats):
            for mode in runs:
                runs[mode].append(measure(args.folder, args.world, mode, script))
                print(json.dumps(runs[mode][-1]), flush=True)
    lines = ["# The planner's statistics under torchrun: each worker alone, or shared out", "",
             f"`{args.folder.name}`: {manifest['num_nodes']:,} vertices, {manifest['norm_nnz']:,} entries of the "
             f"operator; {args.world} torchrun workers resolving `gridgnn train --dataset DIR` with every execution "
             "option free.", "", "Command: `python benchmarks/torchrun_statistics.py " + " ".join(sys.argv[1:]) + "`",
             "", "| statistics | slowest worker's seconds, each run | median | peak per worker (GiB) | chose |",
             "|---|---|---|---|---|"]
    for mode, label in (("each", "every worker computes all"), ("split", "shared out over the world")):
        slowest = [max(r["seconds"] for r in run) for run in runs[mode]]
        peaks = sorted({round(r["peak_bytes"] / 2**30, 2) for run in runs[mode] for r in run})
        lines.append(f"| {label} | {', '.join(f'{s:.1f}' for s in slowest)} | {statistics.median(slowest):.1f} | "
                     f"{', '.join(map(str, peaks))} | {runs[mode][0][0]['chose']} |")
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "torchrun-stats.md").write_text(report)
        (args.out / "torchrun-stats.json").write_text(json.dumps(runs, indent=1) + "\n")


if __name__ == "__main__":
    main()
