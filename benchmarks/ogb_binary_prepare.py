"""An OGB folder in the binary layout prepared by one process and by P processes: time, peak memory, same folder.

Writes an OGB node-property folder the way ogbn-papers100M ships it (``raw/data.npz`` with ``edge_index`` (2, E),
``num_nodes_list`` and ``node_feat``; ``raw/node-label.npz``; ``split/time/``), from an R-MAT graph (edges as
generated: duplicates and self-loops included), then runs ``gridgnn prepare`` on it once in one process and
once with ``--nprocs P`` (each process streams its ranges of the compressed arrays:
`gridgnn.prepare.ogb_parts`), and reports each run's wall time, the peak resident memory of every process
(``--summary``; the one-process run's from ``/usr/bin/time``-like ``getrusage`` of the child), the folder's
bytes, and whether the two folders hold the same graph (manifest digests).

    python benchmarks/ogb_binary_prepare.py --scale 20 --features 64 --nprocs 4 \
        --out results/sharded_prepare/ogb_binary.md
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def write_folder(root: Path, scale: int, edge_factor: int, features: int, classes: int, seed: int) -> Path:
    """The OGB binary folder of an R-MAT graph (``root/ogbn_rmat``); returns it."""
    from gridgnn.data.generators import rmat_chunks, rmat_edge_chunks

    n = 1 << scale
    chunk = 1 << 20
    src, dst = rmat_edge_chunks(scale, edge_factor, (0.57, 0.19, 0.19), chunk, seed, 0,
                                rmat_chunks(scale, edge_factor, chunk))
    rng = np.random.default_rng(seed)
    folder = root / "ogbn_rmat"
    (folder / "raw").mkdir(parents=True)
    np.savez_compressed(folder / "raw" / "data.npz", edge_index=np.stack([src, dst]).astype(np.int64),
                        num_nodes_list=np.array([n]), num_edges_list=np.array([len(src)]),
                        node_feat=rng.normal(size=(n, features)).astype(np.float32))
    labels = rng.integers(0, classes, size=(n, 1)).astype(np.float64)
    labels[rng.random(n) < 0.5] = np.nan  # half unlabelled, as in ogbn-papers100M (most are)
    np.savez_compressed(folder / "raw" / "node-label.npz", node_label=labels)
    labelled = rng.permutation(np.flatnonzero(~np.isnan(labels[:, 0])))
    split = folder / "split" / "time"
    split.mkdir(parents=True)
    for part, ids in zip(("train", "valid", "test"), np.array_split(labelled, [len(labelled) * 8 // 10,
                                                                               len(labelled) * 9 // 10]), strict=True):
        with gzip.open(split / f"{part}.csv.gz", "wt") as out:
            out.write("\n".join(map(str, ids.tolist())) + "\n")
    return folder


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file())


def prepare(folder: Path, out: Path, nprocs: int | None, summary: Path) -> dict:
    """One ``gridgnn prepare`` run: wall time, peak memory per process, folder bytes, digest."""
    command = [sys.executable, "-m", "gridgnn", "prepare", str(folder), "--out", str(out)]
    if nprocs:
        command += ["--nprocs", str(nprocs), "--summary", str(summary)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - start
    manifest = json.loads((out / "prepared.json").read_text())
    if nprocs:
        peaks = json.loads(summary.read_text())["peak_rss_bytes"]
    else:  # the child's peak (ru_maxrss of the largest child so far: this one, the first and largest run)
        peaks = [max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) * 1024]
    return {"nprocs": nprocs or 1, "wall_s": wall, "peak_rss_bytes": peaks, "folder_bytes": folder_bytes(out),
            "digest": manifest["digest"], "num_nodes": manifest["num_nodes"], "norm_nnz": manifest["norm_nnz"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=int, default=20)
    parser.add_argument("--edge-factor", type=int, default=16)
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--classes", type=int, default=16)
    parser.add_argument("--nprocs", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ogb-binary-") as scratch:
        root = Path(scratch)
        start = time.perf_counter()
        folder = write_folder(root, args.scale, args.edge_factor, args.features, args.classes, args.seed)
        written = time.perf_counter() - start
        source_bytes = sum(p.stat().st_size for p in (folder / "raw").iterdir())
        one = prepare(folder, root / "one", None, root / "one.json")
        many = prepare(folder, root / "many", args.nprocs, root / "many.json")
    same = one["digest"] == many["digest"]
    rows = {"scale": args.scale, "edge_factor": args.edge_factor, "features": args.features,
            "source_bytes": source_bytes, "write_source_s": written, "one": one, "many": many, "same_graph": same}
    print(json.dumps(rows), flush=True)
    mib = 2 ** 20
    lines = [f"# OGB binary layout (R-MAT 2^{args.scale}, edge factor {args.edge_factor}, {args.features} features): "
             "one process against distributed preparation", "",
             "Command: `python benchmarks/ogb_binary_prepare.py " + " ".join(sys.argv[1:]) + "`", "",
             f"Source: `raw/data.npz` and `raw/node-label.npz`, {source_bytes / mib:.1f} MiB compressed; "
             f"{one['num_nodes']:,} vertices, {one['norm_nnz']:,} entries of Â. Same graph (manifest digests): "
             f"**{'yes' if same else 'NO'}**.", "",
             "| run | wall (s) | peak resident memory per process (MiB) | folder (MiB) |", "|---|---|---|---|"]
    for label, run in (("one process", one), (f"--nprocs {args.nprocs}", many)):
        peaks = ", ".join(f"{b / mib:.0f}" for b in run["peak_rss_bytes"])
        lines.append(f"| {label} | {run['wall_s']:.1f} | {peaks} | {run['folder_bytes'] / mib:.1f} |")
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report)
        args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
