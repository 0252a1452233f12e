"""Time and peak memory of the planner's exact statistics on a prepared graph (what a worker pays for them).

Two steps, each in a fresh process so their peaks are separate:

- ``predicted``: the model's communication for one configuration (`gridgnn.train.run.auto.predicted_comm`, what
  rank 0 adds to the metrics after training);
- ``auto``: ``--algo auto``'s choice among every grid for P processes (`choose_configuration`, what the
  launcher runs before starting the workers).

Example (the prepared graph of ``benchmarks/scale_rmat.py``; results in ``results/perf/plan_stats.md``)::

    python benchmarks/plan_stats.py /tmp/gridgnn-scale/prepared --nprocs 4 --algo 2d \\
        --markdown results/perf/plan_stats.md --json results/perf/plan_stats.json
"""

from __future__ import annotations

import argparse
import json
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path

STEPS = ("predicted", "auto")


def _peak_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def run_step(step: str, folder: str, nprocs: int, algo: str) -> dict:
    """One step in this process: its wall time, this process's peak resident memory before and after."""
    from gridgnn.config import TrainConfig
    from gridgnn.data.prepared import open_prepared
    from gridgnn.grid.shape import resolve_grid
    from gridgnn.train.run.auto import choose_configuration, predicted_comm

    graph = open_prepared(folder)
    before = _peak_bytes()
    start = time.perf_counter()
    if step == "predicted":
        predicted_comm(TrainConfig(dataset=folder, algo=algo), graph, resolve_grid(algo, nprocs))
        detail = f"{algo} on {nprocs} processes"
    else:
        _, detail = choose_configuration(TrainConfig(dataset=folder, algo="auto"), graph, nprocs)
    return {"step": step, "seconds": time.perf_counter() - start, "peak_before_bytes": before,
            "peak_bytes": _peak_bytes(), "detail": detail}


def markdown(report: dict) -> str:
    lines = [f"`{report['command']}`", "", f"Graph: {report['graph']}", "",
             "| step | seconds | peak before (open graph) | peak | detail |", "|---|---|---|---|---|"]
    for r in report["steps"]:
        lines.append(f"| {r['step']} | {r['seconds']:.1f} | {r['peak_before_bytes'] / 2**30:.2f} GiB "
                     f"| {r['peak_bytes'] / 2**30:.2f} GiB | {r['detail']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prepared", help="a folder written by `gridgnn prepare`")
    parser.add_argument("--nprocs", type=int, default=4)
    parser.add_argument("--algo", default="2d", choices=["1d", "1.5d", "2d", "3d"],
                        help="the configuration of the 'predicted' step")
    parser.add_argument("--step", choices=STEPS, help=argparse.SUPPRESS)  # internal: run one step, print JSON
    parser.add_argument("--json")
    parser.add_argument("--markdown")
    args = parser.parse_args(argv)
    if args.step:
        print(json.dumps(run_step(args.step, args.prepared, args.nprocs, args.algo)))
        return {}
    steps = []
    for step in STEPS:
        out = subprocess.run([sys.executable, __file__, args.prepared, "--nprocs", str(args.nprocs),
                              "--algo", args.algo, "--step", step], check=True, capture_output=True, text=True)
        steps.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(f"{step}: {steps[-1]['seconds']:.1f} s, peak {steps[-1]['peak_bytes'] / 2**30:.2f} GiB", flush=True)
    manifest = json.loads((Path(args.prepared) / "prepared.json").read_text())
    report = {
        "command": "python benchmarks/plan_stats.py " + shlex.join(argv if argv is not None else sys.argv[1:]),
        "graph": f"{manifest.get('name')}: {manifest.get('num_nodes'):,} vertices, "
                 f"{manifest.get('norm_nnz'):,} entries of Â",
        "steps": steps,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    if args.markdown:
        Path(args.markdown).write_text(markdown(report))
    return report


if __name__ == "__main__":
    main()
