"""How often a lost host is named: issue 40's class 8, measured over many runs.

Two hosts (network namespaces joined by a bridge, `tests/helpers/netns_cluster.py`; needs root), 4 workers each under
torchrun with the c10d rendezvous, 3D 2x2x2 on a prepared Cora, a checkpoint every epoch. Once the first
checkpoint exists, every process of host 1 is killed (SIGKILL). A trial counts as *named* when some worker of
host 0 printed gridgnn's one line ``gridgnn: error: ... lost ranks ... (10.200.0.2) ...`` and no line that
blames host 0; the script also records host 0's torchrun status and how long it took to end.

    python benchmarks/lost_host_trials.py --trials 20 --out results/lost_host --data-root ../shared/datasets

Writes ``trials.csv``, ``summary.md`` and ``command.txt``.
"""

from __future__ import annotations

import argparse
import csv
import shlex
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests' namespace cluster

from gridgnn.config import TrainConfig  # noqa: E402
from gridgnn.data.prepared import prepare_graph  # noqa: E402
from gridgnn.launch.spawn import free_port  # noqa: E402
from gridgnn.train.checkpoint.naming import latest_checkpoint  # noqa: E402
from gridgnn.train.run.training import load_graph  # noqa: E402
from tests.helpers.netns_cluster import NetnsCluster, namespaces_unavailable  # noqa: E402


def trial(prepared: Path, work: Path, timeout_s: int) -> dict:
    """One run: train across two hosts, kill host 1 after the first checkpoint, read host 0's lines."""
    import os

    ckpt, logs = work / "ckpt", work / "logs"
    args = ["--dataset", str(prepared), "--epochs", "100000", "--algo", "3d", "--grid", "2x2x2", "--quiet",
            "--timeout", str(timeout_s), "--checkpoint-dir", str(ckpt), "--checkpoint-every", "1"]
    with NetnsCluster(2) as cluster:
        port = free_port()
        procs = [cluster.torchrun(host, 4, port, args, log_dir=logs / "run") for host in (0, 1)]
        deadline = time.monotonic() + 300
        while latest_checkpoint(ckpt) is None:
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                for proc in procs:
                    proc.kill()
                return {"named": False, "status": None, "seconds": None, "note": "no checkpoint"}
            time.sleep(0.1)
        for pid in cluster.pids(1):
            os.kill(pid, signal.SIGKILL)
        start = time.monotonic()
        procs[0].communicate(timeout=timeout_s + 120)
        seconds = time.monotonic() - start
        procs[1].communicate(timeout=60)
    lines = [line for path in sorted((logs / "run" / "h0").glob("**/stderr.log"))
             for line in path.read_text(errors="replace").splitlines() if line.startswith("gridgnn: error:")]
    named = any("lost ranks" in line and "(10.200.0.2)" in line for line in lines)
    blames_self = any("(10.200.0.1)" in line.split("lost")[-1] for line in lines if "lost" in line)
    return {"named": named and not blames_self, "status": procs[0].returncode, "seconds": round(seconds, 1),
            "note": lines[0][:160] if lines else "no gridgnn line"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--out", required=True)
    parser.add_argument("--data-root", default="../shared/datasets")
    parser.add_argument("--timeout", type=int, default=20)
    args = parser.parse_args()
    why = namespaces_unavailable()
    if why is not None:
        raise SystemExit(f"network namespaces unavailable: {why}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        prepared = Path(tmp) / "cora"
        prepare_graph(load_graph(TrainConfig(dataset="cora", data_root=args.data_root)), prepared)
        for k in range(args.trials):
            rows.append({"trial": k + 1, **trial(prepared, Path(tmp) / f"t{k}", args.timeout)})
            print(rows[-1], flush=True)
    with open(out / "trials.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    named = sum(r["named"] for r in rows)
    times = [r["seconds"] for r in rows if r["seconds"] is not None]
    summary = [f"# A lost host named: {named} of {len(rows)} runs", "",
               "Two namespaced hosts of 4 workers (3D 2x2x2, torchrun c10d), every process of host 1 killed "
               "after the first checkpoint.", "",
               f"- named (host 0 printed `lost ranks ... (10.200.0.2)` and blamed no rank of its own): {named}",
               f"- host 0's torchrun status: {sorted({r['status'] for r in rows}, key=str)}",
               f"- seconds host 0 took to end after the kill: median {statistics.median(times):.1f}, "
               f"max {max(times):.1f}" if times else "- no timing", ""]
    (out / "summary.md").write_text("\n".join(summary), encoding="utf-8")
    (out / "command.txt").write_text("python " + shlex.join(sys.argv) + "\n", encoding="utf-8")
    print("\n".join(summary))


if __name__ == "__main__":
    main()
