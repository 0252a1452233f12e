"""METIS (``--reorder metis``, or ``--method`` metis-nnz / metis-balanced) on a large R-MAT graph: time and peak
resident memory of the reordering alone.

Generates ``rmat:scale=S,edge_factor=E`` (as ``gridgnn prepare`` would), then times `gridgnn.data.reorder`'s
symmetric pattern and METIS k-way into ``--parts`` parts, reporting the process's peak resident set after each
step (Linux ``ru_maxrss``) and the non-zero imbalance before and after (and the parts' row imbalance).

    python benchmarks/metis_scale.py --scale 22 --edge-factor 16 --parts 16 --out results/sparse_comm/metis_rmat.json
"""

from __future__ import annotations

import argparse
import json
import resource
import time

from gridgnn.data.registry import load_dataset
from gridgnn.data.reorder import nnz_imbalance, row_imbalance, symmetric_pattern, vertex_order


def peak() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=int, default=22)
    parser.add_argument("--edge-factor", type=int, default=16)
    parser.add_argument("--parts", type=int, default=16)
    parser.add_argument("--method", default="metis", choices=["metis", "metis-nnz", "metis-balanced"])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    out = {"scale": args.scale, "edge_factor": args.edge_factor, "parts": args.parts, "method": args.method}
    start = time.perf_counter()
    graph = load_dataset(f"rmat:scale={args.scale},edge_factor={args.edge_factor},features=1,classes=2")
    out.update(nodes=graph.num_nodes, stored_edges=int(graph.adj.nnz), load_s=time.perf_counter() - start,
               peak_after_load_bytes=peak())
    start = time.perf_counter()
    sym = symmetric_pattern(graph.adj)
    out.update(pattern_s=time.perf_counter() - start, peak_after_pattern_bytes=peak())
    del sym
    start = time.perf_counter()
    order, bounds = vertex_order(graph.adj, args.method, args.parts)
    out.update(metis_s=time.perf_counter() - start, peak_after_metis_bytes=peak())
    out["nnz_imbalance_before"] = nnz_imbalance(graph.adj, args.parts)
    out["nnz_imbalance_after"] = nnz_imbalance(graph.adj[order][:, order], args.parts, bounds)
    if bounds is not None:
        out["row_imbalance_after"] = row_imbalance(graph.num_nodes, args.parts, bounds)
    print(json.dumps(out, indent=1))
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
