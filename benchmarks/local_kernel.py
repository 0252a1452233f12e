"""The local SpMM kernel (`gridgnn.sparse.SparseBlock.matmul`) against torch's CSR product and scipy (issue 7).

Every case is a sparse block A (rows x cols, nnz stored values) times a dense float32 matrix of width f, on the
blocks and widths real runs multiply:

- ``full``: the whole normalized adjacency Â (what ``--algo local`` multiplies), at the hidden width 16, the
  class count C (the second layer's transform-first product) and the feature width f0 (aggregate-first,
  CAGNET's order);
- ``2d-block``: the block Â[0, 0] of a 2x2 grid (what each rank of ``--algo 2d --nprocs 4`` multiplies at each
  SUMMA stage), at widths 16 and C;
- ``features`` / ``features-t``: the sparse input features X and Xᵀ of the bag-of-words graphs at width 16
  (the first layer's ``X W`` forward and ``Xᵀ dY`` backward).

Methods, timed round-robin in the same process (each round runs every method once, in rotating order) and
summarized by their medians:

- ``gridgnn``: `SparseBlock.matmul` (what the model calls);
- ``torch-csr``: ``torch.sparse.mm`` on a CSR tensor built the default way (``Tensor.to_sparse_csr``, int64
  indices);
- ``scipy``: ``scipy.sparse.csr_matrix @ ndarray`` (single-threaded);
- ``gridgnn-1-thread``: `SparseBlock.matmul` with torch set to one thread, not an alternative but the check
  that the configured threads never lose to one on these products (the "threads gain" column).

Reported per case and method: median seconds, GFLOP/s (2·nnz·f flops) and effective bytes per second (the
least traffic a CSR product needs: values, column indices and row pointers once, the dense input once, the
output once); and for gridgnn its speed relative to the best alternative (torch-csr or scipy) and its threads
gain (time on one thread / time on the configured threads). A copy bandwidth (``clone`` of a
256 MiB float32 tensor, read + write bytes) measured in the same run tells what "fast" means on the machine.
Example (the results in ``results/perf/``)::

    python benchmarks/local_kernel.py --threads 2 --markdown results/perf/local_kernel.md
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy
import scipy.sparse as sp
import torch

from gridgnn.data.registry import load_dataset
from gridgnn.sparse.adjacency import gcn_normalize
from gridgnn.sparse.csr import SparseBlock, index_dtype_for

DEFAULT_DATASETS = ("cora", "citeseer", "amazon-computers", "rmat:scale=17,edge_factor=16,features=128")
ALTERNATIVES = ("torch-csr", "scipy")
METHODS = ("gridgnn", *ALTERNATIVES, "gridgnn-1-thread")


def _on_one_thread(f: Callable[[], object]) -> Callable[[], object]:
    def call() -> object:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return f()
        finally:
            torch.set_num_threads(threads)
    return call


@dataclass
class Case:
    """One product: a sparse ``matrix`` (rows x cols, scipy CSR float32) times a dense (cols x width)."""

    dataset: str
    piece: str
    matrix: sp.csr_matrix
    width: int


def cases_for(dataset: str, *, data_root: str | None = None, seed: int = 0) -> list[Case]:
    """The products real runs of ``dataset`` compute (see the module docstring)."""
    graph = load_dataset(dataset, data_root=data_root, seed=seed)
    adj = gcn_normalize(graph.adj)
    half = (adj.shape[0] + 1) // 2
    widths = sorted({16, graph.num_classes})
    out = [Case(dataset, "full", adj, w) for w in widths + [graph.num_features]]
    out += [Case(dataset, "2d-block", adj[:half, :half].tocsr(), w) for w in widths]
    if sp.issparse(graph.features):
        x = sp.csr_matrix(graph.features, dtype=np.float32)
        out += [Case(dataset, "features", x, 16), Case(dataset, "features-t", x.T.tocsr(), 16)]
    return out


def methods_for(case: Case) -> dict[str, Callable[[], object]]:
    """Zero-argument callables computing ``A @ D`` for every method, on inputs prepared outside the timing."""
    a = sp.csr_matrix(case.matrix, dtype=np.float32)
    a.sort_indices()
    dense = torch.randn(a.shape[1], case.width, generator=torch.Generator().manual_seed(0))
    dense_np = dense.numpy()
    block = SparseBlock.from_scipy(a, index_dtype=index_dtype_for(max(a.shape), a.nnz), transpose=False)
    default_csr = torch.from_numpy(a.toarray()).to_sparse_csr() if a.shape[0] * a.shape[1] <= 1 << 26 else \
        torch.sparse_coo_tensor(np.vstack(a.nonzero()), a.data, a.shape, check_invariants=False).to_sparse_csr()
    return {
        "gridgnn": lambda: block.matmul(dense),
        "torch-csr": lambda: torch.sparse.mm(default_csr, dense),
        "scipy": lambda: a @ dense_np,
        "gridgnn-1-thread": _on_one_thread(lambda: block.matmul(dense)),
    }


def _check_agree(methods: dict[str, Callable[[], object]]) -> None:
    results = {name: np.asarray(f()) for name, f in methods.items()}
    reference = results["scipy"]
    for name, value in results.items():
        scale = float(np.abs(reference).max(initial=1.0))
        np.testing.assert_allclose(value, reference, rtol=1e-4, atol=1e-5 * scale, err_msg=name)


def _repeats(f: Callable[[], object], min_sample_s: float) -> int:
    """Calls per sample so that one sample lasts at least ``min_sample_s``."""
    f()
    start = time.perf_counter()
    f()
    one = max(time.perf_counter() - start, 1e-7)
    return max(1, int(np.ceil(min_sample_s / one)))


def time_round_robin(methods: dict[str, Callable[[], object]], *, rounds: int,
                     min_sample_s: float) -> dict[str, float]:
    """Median seconds per call of each method; every round runs each once, the order rotating per round."""
    repeats = {name: _repeats(f, min_sample_s) for name, f in methods.items()}
    samples: dict[str, list[float]] = {name: [] for name in methods}
    names = list(methods)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            f, k = methods[name], repeats[name]
            start = time.perf_counter()
            for _ in range(k):
                f()
            samples[name].append((time.perf_counter() - start) / k)
    return {name: statistics.median(values) for name, values in samples.items()}


def copy_bandwidth(*, mib: int = 256, rounds: int = 7) -> float:
    """Bytes per second of ``Tensor.clone`` (read + write) on a ``mib`` MiB float32 tensor."""
    x = torch.ones(mib << 18)
    x.clone()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        x.clone()
        times.append(time.perf_counter() - start)
    return 2 * x.numel() * 4 / statistics.median(times)


def measure(case: Case, *, rounds: int, min_sample_s: float) -> dict:
    """One table row: the case's shape and, per method, median seconds, GFLOP/s and effective GB/s."""
    methods = methods_for(case)
    _check_agree(methods)
    seconds = time_round_robin(methods, rounds=rounds, min_sample_s=min_sample_s)
    rows, cols = case.matrix.shape
    nnz, f = case.matrix.nnz, case.width
    index_size = 4 if index_dtype_for(max(rows, cols), nnz) == torch.int32 else 8
    traffic = nnz * (4 + index_size) + (rows + 1) * index_size + (rows + cols) * f * 4
    best = min(seconds[name] for name in ALTERNATIVES)
    return {
        "dataset": case.dataset, "piece": case.piece, "rows": rows, "cols": cols, "nnz": nnz, "width": f,
        "seconds": seconds, "gflops": {name: 2 * nnz * f / s / 1e9 for name, s in seconds.items()},
        "gbytes_per_s": {name: traffic / s / 1e9 for name, s in seconds.items()},
        "speed_vs_best_alternative": best / seconds["gridgnn"],
        "threads_gain": seconds["gridgnn-1-thread"] / seconds["gridgnn"],
    }


def markdown(rows: list[dict], env: dict) -> str:
    lines = [
        f"`{env['command']}`", "",
        f"torch {env['torch']}, scipy {env['scipy']}, {env['threads']} threads, {env['machine']}. Copy "
        f"bandwidth (clone of {env['copy_mib']} MiB, read + write) measured in the same run: "
        f"**{env['copy_gbytes_per_s']:.2f} GB/s**. GFLOP/s = 2·nnz·f / time; GB/s = least CSR traffic / time; "
        "speed = best alternative's time / gridgnn's time; threads gain = gridgnn's time on one thread / on "
        f"{env['threads']}.", "",
        "| dataset | piece | rows x cols | nnz | f | gridgnn GFLOP/s (GB/s) | torch-csr GFLOP/s | scipy GFLOP/s "
        "| gridgnn ms | speed vs best | threads gain |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        g, b = r["gflops"], r["gbytes_per_s"]
        lines.append(
            f"| {r['dataset'].split(',')[0]} | {r['piece']} | {r['rows']} x {r['cols']} | {r['nnz']} | "
            f"{r['width']} | {g['gridgnn']:.2f} ({b['gridgnn']:.2f}) | {g['torch-csr']:.2f} | {g['scipy']:.2f} | "
            f"{1e3 * r['seconds']['gridgnn']:.3f} | {r['speed_vs_best_alternative']:.2f} | {r['threads_gain']:.2f} |")
    speeds = [r["speed_vs_best_alternative"] for r in rows]
    gains = [r["threads_gain"] for r in rows]
    lines += ["", f"gridgnn vs best alternative: median speed {statistics.median(speeds):.2f}, "
                  f"min {min(speeds):.2f} over {len(rows)} cases; threads gain median "
                  f"{statistics.median(gains):.2f}, min {min(gains):.2f}."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", nargs="+", default=list(DEFAULT_DATASETS))
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--min-sample-ms", type=float, default=5.0)
    parser.add_argument("--copy-mib", type=int, default=256, help="size of the copy-bandwidth tensor")
    parser.add_argument("--json", default=None)
    parser.add_argument("--markdown", default=None)
    args = parser.parse_args(argv)
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        return _run(args)
    finally:
        torch.set_num_threads(previous_threads)


def _run(args: argparse.Namespace) -> list[dict]:
    env = {"torch": torch.__version__, "scipy": scipy.__version__,
           "threads": args.threads, "machine": platform.machine(), "python": platform.python_version(),
           "copy_mib": args.copy_mib, "command": "python " + " ".join(sys.argv)}
    env["copy_gbytes_per_s"] = copy_bandwidth(mib=args.copy_mib) / 1e9
    rows = []
    for dataset in args.dataset:
        for case in cases_for(dataset, data_root=args.data_root):
            row = measure(case, rounds=args.rounds, min_sample_s=args.min_sample_ms / 1e3)
            rows.append(row)
            print(f"{dataset.split(',')[0]} {case.piece} f={case.width}: gridgnn "
                  f"{row['gflops']['gridgnn']:.2f} GFLOP/s, speed vs best {row['speed_vs_best_alternative']:.2f}",
                  flush=True)
    env["copy_gbytes_per_s_end"] = copy_bandwidth(mib=args.copy_mib) / 1e9
    table = markdown(rows, env)
    print(table)
    for path, text in ((args.json, json.dumps({"environment": env, "rows": rows}, indent=1)),
                       (args.markdown, table)):
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(text)
    return rows


if __name__ == "__main__":
    main()
