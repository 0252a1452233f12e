"""One SpMM's error in each ``--comm-precision``, against float32, per grid and graph.

For each graph, its GCN operator Â (``gcn_normalize``) and X = (row-normalized features) · W with W a seeded
Gaussian (width ``--width``, default 16: a hidden layer's activations), every grid of P = 4 (1d, 1.5d 2x2, 2d
2x2, 3d 1x1x4; dense and sparse) runs Y = Â X forward and dX = Âᵀ G backward (G seeded Gaussian) in fp32, bf16,
fp16 and int8, on P local workers (gloo, one thread each). Reported: the relative Frobenius error
||Y_p − Y_fp32|| / ||Y_fp32|| and the same for dX, and the bytes the rank that moves most received, against
fp32's. The fp32 run is also checked against one process's product (relative error under 1e-6).

    python benchmarks/spmm_precision_error.py --out results/comm_precision        # ~5 min on 2 cores
    python benchmarks/spmm_precision_error.py --tiny --out /tmp/spmm_error         # seconds

Writes ``spmm_error.csv``, ``spmm_error.md`` and ``spmm_error_command.txt``.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from pathlib import Path

import numpy as np

PRECISIONS = ("fp32", "bf16", "fp16", "int8")
GRIDS = (("1d", None, None, "dense"), ("1d", None, None, "sparse"), ("1.5d", 2, None, "dense"),
         ("2d", None, "2x2", "dense"), ("2d", None, "2x2", "sparse"), ("3d", None, "1x1x4", "dense"))
FULL_GRAPHS = ("cora", "citeseer", "amazon-photo", "amazon-computers", "coauthor-cs", "coauthor-physics")  # the study's
TINY_GRAPHS = ("csbm:nodes=200,classes=4,features=20",)
TINY_GRIDS = (GRIDS[0], GRIDS[3])


def inputs(graph, width: int, seed: int = 0):
    """(Â as scipy CSR, X (n, width), G (n, width)) as float32 torch tensors for X and G."""
    import torch

    from gridgnn.sparse.adjacency import gcn_normalize

    gen = torch.Generator().manual_seed(seed)
    features = torch.as_tensor(np.asarray(graph.features.todense() if hasattr(graph.features, "todense")
                                          else graph.features), dtype=torch.float32)
    features = features / features.abs().sum(dim=1, keepdim=True).clamp_min(1e-12)
    weight = torch.randn(features.shape[1], width, generator=gen) / np.sqrt(features.shape[1]) * 10
    return gcn_normalize(graph.adj), features @ weight, torch.randn(features.shape[0], width, generator=gen)


def spmm_worker(rank: int, world_size: int, adj, x, g, cases: list) -> list[dict]:
    """Every (algo, replication, grid, comm, precision) case on this rank: its rows of Y and dX, its bytes."""
    import torch

    from gridgnn.grid.comm import Communicator
    from gridgnn.grid.process_grid import ProcessGrid
    from gridgnn.grid.shape import resolve_grid
    from gridgnn.spmm.registry import build_spmm

    torch.set_num_threads(1)
    out = []
    for algo, replication, grid_text, comm_mode, precision in cases:
        shape = resolve_grid(algo, world_size, replication=replication, grid=grid_text)
        grid = ProcessGrid.create(shape, "cpu")
        comm = Communicator(grid, precision=precision, seed=1)
        op = build_spmm(grid, comm, adj, comm_mode=comm_mode)
        comm.reset()
        xs = op.local_slice(x).requires_grad_(True)
        y = op(xs)
        y.backward(op.local_slice(g))
        moved = comm.reset()
        out.append({"rows": op.row_range, "cols": op.col_range(x.shape[1]), "y": y.detach().numpy(),
                    "dx": xs.grad.numpy(), "bytes": sum(r.bytes for r in moved),
                    # 2d's Â panels are the col broadcasts of a plain SpMM: exact in every precision
                    "activation_bytes": sum(r.bytes for r in moved if (r.op, r.axis) != ("broadcast", "col"))})
    return out


def assemble(parts: list[dict], n: int, width: int, key: str) -> np.ndarray:
    """The global (n, width) matrix from every rank's block (replicated blocks written alike)."""
    full = np.zeros((n, width), dtype=np.float32)
    for part in parts:
        (r0, r1), (c0, c1) = part["rows"], part["cols"]
        full[r0:r1, c0:c1] = part[key]
    return full


def main(argv: list[str] | None = None) -> int:
    from gridgnn.data.registry import load_dataset
    from gridgnn.launch.spawn import run_workers

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--data-root", default=str(Path(__file__).resolve().parents[1].parent / "shared" / "datasets"))
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--tiny", action="store_true", help="one small generated graph, 1d and 2d (a smoke run)")
    parser.add_argument("--graphs", nargs="+", help="dataset names (default: the accuracy study's six)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    grids = TINY_GRIDS if args.tiny else GRIDS
    cases = [(*grid, precision) for grid in grids for precision in PRECISIONS]
    rows = []
    for name in args.graphs or (TINY_GRAPHS if args.tiny else FULL_GRAPHS):
        graph = load_dataset(name, data_root=args.data_root)
        adj, x, g = inputs(graph, args.width)
        exact_y, exact_dx = (adj @ x.numpy()), (adj.T @ g.numpy())
        results = run_workers(spmm_worker, 4, adj, x, g, cases, timeout_s=1200)
        reference = {}
        for index, (algo, replication, grid_text, comm_mode, precision) in enumerate(cases):
            parts = [rank[index] for rank in results]
            y = assemble(parts, graph.num_nodes, args.width, "y")
            dx = assemble(parts, graph.num_nodes, args.width, "dx")
            label = f"{algo} {grid_text or (f'c={replication}' if replication else '4')} {comm_mode}"
            most = max(part["bytes"] for part in parts)
            active = max(part["activation_bytes"] for part in parts)
            if precision == "fp32":
                reference[label] = (y, dx, most, active)
                for got, want in ((y, exact_y), (dx, exact_dx)):
                    assert np.linalg.norm(got - want) <= 1e-5 * np.linalg.norm(want), (name, label)
            ref_y, ref_dx, ref_bytes, ref_active = reference[label]
            rows.append({"graph": name, "grid": label, "precision": precision,
                         "forward_error": float(np.linalg.norm(y - ref_y) / np.linalg.norm(ref_y)),
                         "backward_error": float(np.linalg.norm(dx - ref_dx) / np.linalg.norm(ref_dx)),
                         "bytes": most, "bytes_ratio": most / ref_bytes if ref_bytes else float("nan"),
                         "activation_bytes": active,
                         "activation_ratio": active / ref_active if ref_active else float("nan")})
            print(f"{name:14s} {label:18s} {precision:5s} forward {rows[-1]['forward_error']:.2e} backward "
                  f"{rows[-1]['backward_error']:.2e} bytes x{rows[-1]['bytes_ratio']:.3f} activations "
                  f"x{rows[-1]['activation_ratio']:.3f}", flush=True)
    with open(args.out / "spmm_error.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    lines = ["# One SpMM's relative error against float32, per precision, grid and graph", "",
             f"Â X and Âᵀ G at width {args.width} on P = 4 (gloo, one thread per worker); error = "
             "‖result − fp32's‖_F / ‖fp32's‖_F; bytes: received by the busiest rank, forward and backward, "
             "against fp32's: all of them (2d's Â panels included: they stay exact), and the activations alone.",
             "", "| graph | grid | precision | forward error | backward error | bytes vs fp32 "
             "| activation bytes vs fp32 |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['graph']} | {r['grid']} | {r['precision']} | {r['forward_error']:.2e} | "
              f"{r['backward_error']:.2e} | {r['bytes_ratio']:.3f} | {r['activation_ratio']:.3f} |"
              for r in rows if r["precision"] != "fp32"]
    (args.out / "spmm_error.md").write_text("\n".join(lines) + "\n")
    command = " ".join(["python", sys.argv[0], *(argv or sys.argv[1:])])
    (args.out / "spmm_error_command.txt").write_text(command + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
