"""Distributed preparation at scale: peak memory per process against the folder's share, and time per phase.

Two studies (issue: "No process holds the whole graph"):

``rmat``: ``gridgnn prepare rmat:scale=S,edge_factor=16,features=F --nprocs P`` on P local workers; each
process's peak resident memory (VmHWM) is compared with 1.5 x (the folder's bytes / P) + the interpreter's
baseline (`baseline_bytes`: a worker that prepares a tiny graph); then ``gridgnn train`` on P processes
reads the shards for a few epochs. Beside it, the one-process
``gridgnn prepare`` of the same graph (its peak memory and time), unless ``--skip-one-process``.

``text``: a text edge list (written here from an R-MAT graph's edges, one ``u v`` per line) prepared with
P = 1, 2, 4 and the same shard count: the folders' manifests (which list every file's SHA-256) must be equal
byte for byte; time and peak memory per process of each.

    python benchmarks/sharded_prepare.py rmat --scale 23 --nprocs 8 --epochs 3 --out results/sharded_prepare
    python benchmarks/sharded_prepare.py text --scale 22 --nprocs 1 2 4 --out results/sharded_prepare

Results: ``OUT/rmat-S.json`` / ``OUT/text-S.json`` and a Markdown table beside each.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

GIB = 2**30


def run_measured(command: list[str]) -> tuple[int, float, int, str]:
    """(status, seconds, the process's peak resident bytes from wait4, its stdout)."""
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        return proc.returncode, time.perf_counter() - start, int(usage.ru_maxrss) * 1024, out.read()


def baseline_bytes(nprocs: int, scratch: Path) -> int:
    """A preparation worker's peak resident memory when it has (almost) nothing to hold: the largest over the
    ``nprocs`` workers of ``prepare rmat:scale=10 --nprocs nprocs`` (the interpreter, torch, gridgnn and a
    gloo process group)."""
    summary = scratch / "baseline.json"
    status, _, _, output = run_measured(gridgnn("prepare", "rmat:scale=10,features=1", "--out",
                                                str(scratch / "baseline"), "--nprocs", str(nprocs),
                                                "--summary", str(summary)))
    if status != 0:
        raise SystemExit(f"baseline preparation failed:\n{output}")
    shutil.rmtree(scratch / "baseline")
    return max(json.loads(summary.read_text())["peak_rss_bytes"])


PINNED = ("--algo", "1d", "--comm", "dense", "--reorder", "none", "--no-cache-panels", "--no-full-feature-rows",
          "--no-defer-weight-gather")
"""The training run's execution, pinned: the launcher then prices nothing (the planner reads the statistics of
the whole operator in one process, which the sharded folder does not yet distribute)."""


def gridgnn(*args: str) -> list[str]:
    return [sys.executable, "-m", "gridgnn", *args]


def study_rmat(args: argparse.Namespace, scratch: Path) -> dict:
    spec = f"rmat:scale={args.scale},edge_factor={args.edge_factor},features={args.features},classes=8"
    record = {"spec": spec, "nprocs": args.nprocs, "baseline_bytes": baseline_bytes(args.nprocs, scratch)}
    folder = scratch / "sharded"
    status, seconds, _, output = run_measured(gridgnn("prepare", spec, "--out", str(folder), "--nprocs",
                                                      str(args.nprocs), "--summary", str(scratch / "s.json")))
    record["prepare_output"] = output.strip().splitlines()[-8:]
    if status != 0:
        raise SystemExit(f"distributed prepare failed ({status}):\n{output}")
    summary = json.loads((scratch / "s.json").read_text())
    share = summary["folder_bytes"] / args.nprocs
    bound = 1.5 * share + record["baseline_bytes"]
    record |= {"distributed": summary, "wall_s": seconds, "share_bytes": share, "bound_bytes": bound,
               "max_peak_bytes": max(summary["peak_rss_bytes"]),
               "within_bound": max(summary["peak_rss_bytes"]) <= bound}
    print(f"distributed: {seconds:.1f} s, peak {max(summary['peak_rss_bytes']) / GIB:.2f} GiB per process, "
          f"bound {bound / GIB:.2f} GiB", flush=True)
    if args.epochs:
        metrics = scratch / "train.json"
        status, seconds, _, output = run_measured(gridgnn(
            "train", "--dataset", str(folder), "--nprocs", str(args.nprocs), "--epochs", str(args.epochs), "--quiet",
            "--metrics-out", str(metrics), "--timeout", "1800", *PINNED))
        record["train"] = {"status": status, "wall_s": seconds, "output": output.strip().splitlines()[-5:]}
        if status == 0:
            document = json.loads(metrics.read_text())
            record["train"] |= {"losses": [e["loss"] for e in document["epochs"]],
                                "epoch_s": [e["time_s"] for e in document["epochs"]],
                                "peak_memory_bytes": document["setup"].get("peak_memory_bytes"),
                                "launcher_peak_memory_bytes": document["setup"].get("launcher_peak_memory_bytes")}
        print(f"training: status {status}, {seconds:.1f} s", flush=True)
    shutil.rmtree(folder, ignore_errors=True)
    if not args.skip_one_process:
        status, seconds, peak, output = run_measured(gridgnn("prepare", spec, "--out", str(scratch / "one")))
        record["one_process"] = {"status": status, "seconds": seconds, "peak_bytes": peak,
                                 "output": output.strip().splitlines()[-3:]}
        print(f"one process: status {status}, {seconds:.1f} s, peak {peak / GIB:.2f} GiB", flush=True)
        shutil.rmtree(scratch / "one", ignore_errors=True)
    return record


def write_edge_list(path: Path, scale: int, edge_factor: int) -> int:
    """An R-MAT graph's sampled edges as ``u v`` lines (directed, duplicates kept); returns the bytes."""
    from gridgnn.data.generators import rmat_chunks, rmat_edge_chunks

    chunk = 1 << 20
    chunks = rmat_chunks(scale, edge_factor, chunk)
    with open(path, "w") as stream:
        for k in range(0, chunks, 8):
            src, dst = rmat_edge_chunks(scale, edge_factor, (0.57, 0.19, 0.19), chunk, 0, k, min(chunks, k + 8))
            np.savetxt(stream, np.stack([src, dst], axis=1), fmt="%d")
    return path.stat().st_size


def study_text(args: argparse.Namespace, scratch: Path) -> dict:
    source = scratch / "edges.txt"
    size = write_edge_list(source, args.scale, args.edge_factor)
    record = {"source_bytes": size, "scale": args.scale, "shards": max(args.nprocs), "runs": [],
              "baseline_bytes": baseline_bytes(max(args.nprocs), scratch)}
    print(f"edge list: {size / 1e9:.2f} GB", flush=True)
    manifests = []
    for p in args.nprocs:
        folder = scratch / f"p{p}"
        status, seconds, _, output = run_measured(gridgnn(
            "prepare", str(source), "--out", str(folder), "--nprocs", str(p), "--shards", str(max(args.nprocs)),
            "--summary", str(scratch / f"s{p}.json")))
        if status != 0:
            raise SystemExit(f"prepare --nprocs {p} failed ({status}):\n{output}")
        summary = json.loads((scratch / f"s{p}.json").read_text())
        manifests.append((folder / "prepared.json").read_bytes())
        record["runs"].append({"nprocs": p, "wall_s": seconds, "summary": summary})
        print(f"P = {p}: {seconds:.1f} s, peak {max(summary['peak_rss_bytes']) / GIB:.2f} GiB", flush=True)
        if len(manifests) > 1:
            shutil.rmtree(folder)
    record["identical_folders"] = all(m == manifests[0] for m in manifests)
    record["digest"] = json.loads(manifests[0])["digest"]
    return record


def markdown(kind: str, record: dict, command: str) -> str:
    lines = [f"# Distributed preparation: {kind}", "", "Command:", "", f"    {command}", ""]
    if kind == "rmat":
        d = record["distributed"]
        lines += [f"Graph `{record['spec']}`: {d['num_nodes']} vertices, {d['norm_nnz']} entries of Â; folder "
                  f"{d['folder_bytes'] / GIB:.2f} GiB in {d['shards']} shards.", "",
                  "| processes | wall s | phases (slowest process, s) | peak per process (GiB) | share = folder / P "
                  "(GiB) | bound 1.5 share + baseline (GiB) | within |", "|---|---|---|---|---|---|---|",
                  f"| {record['nprocs']} | {record['wall_s']:.1f} | "
                  + ", ".join(f"{k} {v:.1f}" for k, v in d["seconds"].items())
                  + f" | {', '.join(f'{b / GIB:.2f}' for b in d['peak_rss_bytes'])} | {record['share_bytes'] / GIB:.2f}"
                  f" | {record['bound_bytes'] / GIB:.2f} | {'yes' if record['within_bound'] else '**no**'} |", "",
                  f"Baseline (the largest worker of a preparation of rmat:scale=10 on as many processes): "
                  f"{record['baseline_bytes'] / GIB:.2f} GiB."]
        if "train" in record:
            t = record["train"]
            lines += ["", f"Training on the shards (`{' '.join(PINNED)}`, {record['nprocs']} processes): "
                      f"status {t['status']}, {t['wall_s']:.1f} s wall; losses {t.get('losses')}; epoch seconds "
                      f"{t.get('epoch_s')}."]
        if "one_process" in record:
            o = record["one_process"]
            lines += ["", f"One-process `gridgnn prepare` of the same graph: status {o['status']}, "
                      f"{o['seconds']:.1f} s, peak {o['peak_bytes'] / GIB:.2f} GiB."]
    else:
        lines += [f"Edge list of {record['source_bytes'] / 1e9:.2f} GB (R-MAT scale {record['scale']} edges), "
                  f"{record['shards']} shards. Identical folders (manifests with every file's SHA-256, byte for "
                  f"byte): **{record['identical_folders']}**; content digest {record['digest'][:16]}.", "",
                  "| P | wall s | phases (slowest process, s) | peak per process (GiB) |", "|---|---|---|---|"]
        for run in record["runs"]:
            s = run["summary"]
            lines.append(f"| {run['nprocs']} | {run['wall_s']:.1f} | "
                         + ", ".join(f"{k} {v:.1f}" for k, v in s["seconds"].items())
                         + f" | {', '.join(f'{b / GIB:.2f}' for b in s['peak_rss_bytes'])} |")
        lines += ["", f"Baseline: {record['baseline_bytes'] / GIB:.2f} GiB."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("study", choices=("rmat", "text"))
    parser.add_argument("--scale", type=int, default=20)
    parser.add_argument("--edge-factor", type=int, default=16)
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--nprocs", type=int, nargs="+", default=[8])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--skip-one-process", action="store_true")
    parser.add_argument("--scratch", default=None, help="folder for the graphs (default: a temporary one)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    command = "python benchmarks/sharded_prepare.py " + " ".join(sys.argv[1:])
    with tempfile.TemporaryDirectory(dir=args.scratch) as scratch:
        if args.study == "rmat":
            args.nprocs = args.nprocs[0]
            record = study_rmat(args, Path(scratch))
        else:
            record = study_text(args, Path(scratch))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{args.study}-{args.scale}"
    record["command"] = command
    (out / f"{stem}.json").write_text(json.dumps(record, indent=1) + "\n")
    (out / f"{stem}.md").write_text(markdown(args.study, record, command))
    print((out / f"{stem}.md").read_text())


if __name__ == "__main__":
    main()
