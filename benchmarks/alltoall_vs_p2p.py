"""How to move uneven row sets between processes on gloo: one `all_to_all_single` vs batched point-to-point.

Each of P processes sends ``rows`` rows of width ``width`` (float32) to every other process, as the sparse
SpMMs do once per SpMM half. Prints the median seconds per exchange of each method over ``repeats`` runs.

    python benchmarks/alltoall_vs_p2p.py --nprocs 4 --rows 2000 --width 16 --repeats 30
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import torch.distributed as dist

from gridgnn.launch.spawn import run_workers


def _p2p(send: torch.Tensor, recv: torch.Tensor, splits: list[int], recv_splits: list[int]) -> None:
    rank, size = dist.get_rank(), dist.get_world_size()
    out_at = [sum(splits[:p]) for p in range(size)]
    in_at = [sum(recv_splits[:p]) for p in range(size)]
    ops = []
    for p in range(size):
        if p != rank and splits[p]:
            ops.append(dist.P2POp(dist.isend, send[out_at[p]:out_at[p] + splits[p]], p))
        if p != rank and recv_splits[p]:
            ops.append(dist.P2POp(dist.irecv, recv[in_at[p]:in_at[p] + recv_splits[p]], p))
    for work in dist.batch_isend_irecv(ops) if ops else []:
        work.wait()


def worker(rank: int, world: int, rows: int, width: int, repeats: int) -> dict:
    splits = [0 if p == rank else rows + 37 * p for p in range(world)]  # uneven parts
    recv_splits = [0 if p == rank else rows + 37 * rank for p in range(world)]
    send = torch.randn(sum(splits), width)
    out = {}
    for name in ("all_to_all_single", "batched_p2p"):
        times = []
        for _ in range(repeats):
            recv = torch.empty(sum(recv_splits), width)
            dist.barrier()
            start = time.perf_counter()
            if name == "all_to_all_single":
                dist.all_to_all_single(recv, send, recv_splits, splits)
            else:
                _p2p(send, recv, splits, recv_splits)
            times.append(time.perf_counter() - start)
        out[name] = statistics.median(times)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nprocs", type=int, default=4)
    parser.add_argument("--rows", type=int, nargs="+", default=[100, 2000, 20000])
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    table = []
    for rows in args.rows:
        per_rank = run_workers(worker, args.nprocs, rows, args.width, args.repeats, timeout_s=300)
        slowest = {k: max(r[k] for r in per_rank) for k in per_rank[0]}
        table.append({"rows_per_peer": rows, "width": args.width, "nprocs": args.nprocs, **slowest})
        print(f"rows/peer {rows:6d}: all_to_all_single {slowest['all_to_all_single'] * 1e3:8.3f} ms, "
              f"batched p2p {slowest['batched_p2p'] * 1e3:8.3f} ms (median, slowest rank)")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(table, f, indent=1)


if __name__ == "__main__":
    main()
