"""Time and size of the per-vertex output files (`gridgnn.train.outputs.per_vertex`): .npy against .csv.

Writes the predictions of n vertices with C classes and an (n, d) embedding, in one process, ``--repeats``
times each, and reports the median seconds and the file sizes (JSON on stdout and in ``--out``)::

    python benchmarks/outputs_write.py --nodes 1000000 --classes 10 --dim 16 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from gridgnn.train.outputs.per_vertex import prediction_records, write_rows


def _time(path: Path, block: np.ndarray, ids: np.ndarray, n: int, repeats: int) -> dict:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        write_rows(path, (0, n), n, block, ids)
        times.append(time.perf_counter() - start)
    return {"median_s": statistics.median(times), "times_s": times, "bytes": path.stat().st_size}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    n = args.nodes
    generator = torch.Generator().manual_seed(0)
    log_probs = torch.log_softmax(torch.randn(n, args.classes, generator=generator), dim=1)
    ids = np.arange(n, dtype=np.int64)
    records = prediction_records(log_probs, ids)
    embedding = torch.randn(n, args.dim, generator=generator).numpy()
    report = {"command": "python benchmarks/outputs_write.py " + " ".join(sys.argv[1:] if argv is None else argv),
              "nodes": n, "classes": args.classes, "dim": args.dim, "runs": {}}
    with tempfile.TemporaryDirectory() as folder:
        for what, block in (("predictions", records), ("embeddings", embedding)):
            for suffix in (".npy", ".csv"):
                report["runs"][f"{what}{suffix}"] = _time(Path(folder) / f"{what}{suffix}", block, ids, n,
                                                          args.repeats)
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    return report


if __name__ == "__main__":
    main()
