"""Measure the memory a gridgnn process holds before any data (`gridgnn.cost.process_baseline`).

Run in a fresh interpreter: ``python scripts/measure_process_baseline.py [--device cuda] [--repeat 3]``.
Each repeat is a new process that imports torch and gridgnn's training stack, runs one autograd step, joins
a one-process gloo group and prints its resident set (psutil RSS); on CUDA it also creates the device's
context and reports the device memory in use (``total - free``: run it on an idle GPU). Prints one JSON
object with every sample and the largest in MiB, the figure to store in ``PROCESS_BASELINE_BYTES``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys

PROBE = """
import json, os, sys
import psutil
import torch
import torch.distributed as dist
import gridgnn.train.run.training, gridgnn.train.run.worker, gridgnn.cli.main
x = torch.randn(4, 4, requires_grad=True)
(x @ x).sum().backward()
dist.init_process_group("gloo", rank=0, world_size=1)
t = torch.ones(4)
dist.all_reduce(t)
out = {"rss_bytes": psutil.Process().memory_info().rss, "torch": torch.__version__}
if sys.argv[1] == "cuda":
    torch.ones(1, device="cuda")
    free, total = torch.cuda.mem_get_info()
    out["device_used_bytes"] = total - free
print(json.dumps(out))
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    samples = []
    for _ in range(args.repeat):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
        done = subprocess.run([sys.executable, "-c", PROBE, args.device], capture_output=True, text=True,
                              env=env, check=True)
        samples.append(json.loads(done.stdout))
    key = "device_used_bytes" if args.device == "cuda" else "rss_bytes"
    print(json.dumps({"device": args.device, "samples": samples,
                      "baseline_mib": max(s[key] for s in samples) / 2**20}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
