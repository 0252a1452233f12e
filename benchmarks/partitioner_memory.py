"""METIS against KaMinPar (a shared-memory partitioner built for low memory) on large R-MAT graphs: which fits,
time, peak memory, edge cut, balance, and the sparse 1D bytes per rank each partition gives (the cost model's).

Each partitioner runs in its own process, which generates ``rmat:scale=S`` (as ``gridgnn prepare`` would),
builds the symmetric pattern `gridgnn.data.reorder` partitions, and then partitions it into ``--parts`` parts:
its peak resident memory before and after the partitioner (VmHWM) says what the partitioner itself needed.
METIS is pymetis (what ``--reorder metis`` runs); KaMinPar reads the pattern from a ParHIP binary file written
here (`gridgnn.data.kaminpar_parts`, what ``--reorder metis`` falls back on) with its default context on one
thread, as METIS runs (its memory-efficient ``terapart`` context crashed with SIGSEGV in kaminpar 3.7.3
here). A process that dies (out of memory) is reported as not fitting.

    python benchmarks/partitioner_memory.py --scales 20 22 --parts 16 --out results/sharded_prepare/partitioners.md
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

GIB = 2**30
PARTITIONERS = ("metis", "kaminpar")


def hwm() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))


def child(name: str, scale: int, parts: int) -> dict:
    """Generate, partition with ``name``, price: one process's record."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from partition_objective import priced

    from gridgnn.data.registry import load_dataset
    from gridgnn.data.reorder import symmetric_pattern
    from gridgnn.sparse.adjacency import gcn_normalize

    graph = load_dataset(f"rmat:scale={scale},edge_factor=16,features=1,classes=2")
    sym = symmetric_pattern(graph.adj)
    record = {"partitioner": name, "scale": scale, "parts": parts, "nodes": graph.num_nodes,
              "pattern_entries": int(sym.nnz), "peak_before_bytes": hwm()}
    start = time.perf_counter()
    if name == "metis":
        from gridgnn.data.metis import metis_membership

        membership = metis_membership(sym, parts)
    else:
        from gridgnn.data.kaminpar_parts import kaminpar_membership

        membership = kaminpar_membership(sym, parts)
    record |= {"seconds": time.perf_counter() - start, "peak_after_bytes": hwm()}
    rows = np.repeat(np.arange(sym.shape[0]), np.diff(sym.indptr))
    record["edge_cut"] = int((membership[rows] != membership[sym.indices]).sum() // 2)
    del sym, rows
    record |= priced(f"rmat-{scale}", graph, gcn_normalize(graph.adj).tocsr(), parts, membership)
    return record


def run(name: str, scale: int, parts: int) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "record.json"
        proc = subprocess.Popen([sys.executable, __file__, "--child", name, "--scales", str(scale), "--parts",
                                 str(parts), "--record", str(out)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        tail = proc.stdout.read()[-600:]
        code = os.waitstatus_to_exitcode(status)
        if code != 0 or not out.is_file():
            return {"partitioner": name, "scale": scale, "parts": parts, "fits": False, "status": code,
                    "peak_bytes": int(usage.ru_maxrss) * 1024, "tail": tail}
        return {**json.loads(out.read_text()), "fits": True, "peak_bytes": int(usage.ru_maxrss) * 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scales", type=int, nargs="+", default=[20, 22])
    parser.add_argument("--parts", type=int, default=16)
    parser.add_argument("--out", default=None)
    parser.add_argument("--child", choices=PARTITIONERS, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--record", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--partitioners", nargs="+", choices=PARTITIONERS, default=list(PARTITIONERS))
    args = parser.parse_args()
    if args.child:
        record = child(args.child, args.scales[0], args.parts)
        Path(args.record).write_text(json.dumps(record))
        return
    rows = []
    for scale in args.scales:
        for name in args.partitioners:
            rows.append(run(name, scale, args.parts))
            print(json.dumps({k: v for k, v in rows[-1].items() if k != "tail"}), flush=True)
    command = "python benchmarks/partitioner_memory.py " + " ".join(sys.argv[1:])
    lines = ["# METIS against KaMinPar on R-MAT", "", f"Command: `{command}` (this machine: 2 cores, 24 GiB).",
             "Peak: the partitioning process's high-water mark (it also generated the graph: 'before' is the "
             "mark when the partitioner started). Bytes: the busiest rank's per training step of 1D "
             "`--comm sparse`, GCN 2 layers, hidden 16, row blocks following the parts (the cost model's).", "",
             "| scale | partitioner | fits | seconds | peak before (GiB) | peak (GiB) | edge cut | rows max/mean | "
             "sparse 1D B | dense 1D B |", "|---" * 10 + "|"]
    for r in rows:
        if not r["fits"]:
            lines.append(f"| {r['scale']} | {r['partitioner']} | **no** (status {r['status']}) | | | "
                         f"{r['peak_bytes'] / GIB:.2f} | | | | |")
            continue
        lines.append(f"| {r['scale']} | {r['partitioner']} | yes | {r['seconds']:.1f} | "
                     f"{r['peak_before_bytes'] / GIB:.2f} | {r['peak_bytes'] / GIB:.2f} | {r['edge_cut']:,} | "
                     f"{r['rows_max_over_mean']:.3f} | {r['sparse']:,} | {r['dense']:,} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        Path(args.out).with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
