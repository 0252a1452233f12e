"""What the launcher's planner costs on a large prepared folder: wall time and peak memory of resolving
``gridgnn train --dataset DIR --nprocs P`` with every execution option free (`--algo auto`, `--comm auto`),
its statistics computed block by block in the launcher or on a pool of processes (`gridgnn/cost/block_stats.py`).

Each measurement is a fresh process (`resolve_run` on the opened folder, then its ``ru_maxrss``); the modes
alternate, ``--repeats`` times. ``--prepare SPEC`` first prepares the folder with ``gridgnn prepare SPEC --nprocs
2``. The pool processes' own peaks are not in the launcher's figure.

Usage (the committed run)::

    python benchmarks/planner_statistics.py --prepare rmat:scale=21,edge_factor=16,features=16,classes=4 \\
        --folder /work/scratch/r21 --nprocs 8 --pools 1 2 --repeats 2 --out results/sharded_prepare
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
import json, resource, sys, time
from gridgnn.config import TrainConfig
from gridgnn.data.prepared import open_prepared
from gridgnn.train.run.resolve import resolve_run

if __name__ == "__main__":
    folder, nprocs, pool = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    try:
        from gridgnn.cost.block_stats import enable_pool
        enable_pool(pool)
    except ImportError:  # code from before block-by-block statistics
        pool = 0
    start = time.perf_counter()
    config = TrainConfig(dataset=folder, nprocs=nprocs, algo="auto", comm="auto", reorder="none")
    config, shape, _ = resolve_run(config, open_prepared(folder), nprocs)
    print(json.dumps({"pool": pool, "seconds": time.perf_counter() - start,
                      "peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                      "chose": f"{shape.algo} {shape.label()} {config.comm}"}))
"""


def measure(folder: Path, nprocs: int, pool: int, script: Path) -> dict:
    done = subprocess.run([sys.executable, str(script), str(folder), str(nprocs), str(pool)], check=True,
                          capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--prepare", default=None, metavar="SPEC")
    parser.add_argument("--nprocs", type=int, default=8)
    parser.add_argument("--pools", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.prepare and not args.folder.exists():
        subprocess.run([sys.executable, "-m", "gridgnn", "prepare", args.prepare, "--out", str(args.folder),
                        "--nprocs", "2"], check=True)
    manifest = json.loads((args.folder / "prepared.json").read_text())
    runs = []
    with tempfile.TemporaryDirectory() as scratch:  # a script file: spawned pool processes re-import it
        script = Path(scratch) / "planner_statistics_child.py"
        script.write_text(CHILD)
        for _ in range(args.repeats):
            for pool in args.pools:
                runs.append(measure(args.folder, args.nprocs, pool, script))
                print(json.dumps(runs[-1]), flush=True)
    rows = []
    for pool in args.pools:
        mine = [r for r in runs if r["pool"] == pool]
        rows.append({"pool": pool, "seconds": [round(r["seconds"], 1) for r in mine],
                     "median_seconds": statistics.median(r["seconds"] for r in mine),
                     "peak_gib": [round(r["peak_bytes"] / 2**30, 2) for r in mine], "chose": mine[0]["chose"]})
    lines = ["# The launcher's planner on a large prepared folder", "",
             f"`{args.folder.name}`: {manifest['num_nodes']:,} vertices, {manifest['norm_nnz']:,} entries of the "
             f"operator, {len(manifest.get('shards', [1]))} shards; resolving `gridgnn train --dataset DIR --nprocs "
             f"{args.nprocs}` with every execution option free.", "",
             "Command: `python benchmarks/planner_statistics.py " + " ".join(sys.argv[1:]) + "`", "",
             "| processes computing the statistics | wall (s), each run | median | launcher's peak (GiB) | chose |",
             "|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['pool']} | {', '.join(map(str, row['seconds']))} | {row['median_seconds']:.1f} | "
                     f"{', '.join(map(str, row['peak_gib']))} | {row['chose']} |")
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "planner-stats.md").write_text(report)
        (args.out / "planner-stats.json").write_text(json.dumps({"runs": runs, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
