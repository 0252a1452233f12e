"""How fast the command line answers and talks: wall time and import time of short commands, and the
timeline of a distributed run (first line, workers started, grid ready, summary, exit).

Each command runs ``--repeats`` times per source tree, the trees alternating run by run (so both see the same
machine state), from an empty folder (no ``gridgnn`` folder in the current directory), with
``PYTHONPATH=<tree>``. Reports medians. Example (the figures in ``results/perf/startup.md``)::

    python benchmarks/startup.py --tree before=/tmp/gridgnn-before --tree after=. \\
        --data-root ../shared/datasets --repeats 5 --markdown results/perf/startup.md
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SHORT = {
    "--version": ["--version"],
    "--help": ["--help"],
    "info cora": ["info", "cora"],
    "plan (statistics)": ["plan", "--num-nodes", "1000000", "--num-edges", "20000000", "--num-features", "128",
                          "--num-classes", "40", "--nprocs", "8"],
}
TRAIN = ["train", "--dataset", "cora", "--algo", "2d", "--nprocs", "4", "--progress"]
MARKS = {"starting": re.compile(r"^starting "), "ready": re.compile(r"^ready "),
         "first epoch": re.compile(r"^epoch +1/"), "summary": re.compile(r"^dataset ")}
_IMPORT_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \| (\s*)(\S+)")


def run_short(tree: Path, argv: list[str], data_root: str, cwd: str) -> tuple[float, float]:
    """(wall seconds, seconds of imports made by the command: the sum of its top-level imports)."""
    env = dict(os.environ, PYTHONPATH=str(tree), GRIDGNN_DATA_ROOT=data_root)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "gridgnn", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{argv} failed in {tree}: {done.stderr[-2000:]}")
    total = 0
    for line in done.stderr.splitlines():
        match = _IMPORT_LINE.match(line)
        if match and not match.group(3):  # no indentation: imported at top level
            total += int(match.group(2))
    return wall, total / 1e6


def run_train(tree: Path, epochs: int, data_root: str, cwd: str) -> dict[str, float]:
    """Seconds from the start to each marked output line, to the last line, and to the exit."""
    env = dict(os.environ, PYTHONPATH=str(tree), GRIDGNN_DATA_ROOT=data_root)
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "gridgnn", *TRAIN, "--epochs", str(epochs)], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    seen: dict[str, float] = {}
    for line in proc.stdout:
        now = time.perf_counter() - start
        seen.setdefault("first line", now)
        seen["last line"] = now
        for name, pattern in MARKS.items():
            if pattern.search(line):
                seen.setdefault(name, now)
    if proc.wait() != 0:
        raise SystemExit(f"training failed in {tree}")
    seen["exit"] = time.perf_counter() - start
    seen["exit after last line"] = seen["exit"] - seen["last line"]
    return seen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", required=True, metavar="NAME=PATH",
                        help="a source tree to measure (its root goes first on PYTHONPATH); repeatable")
    parser.add_argument("--data-root", required=True)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--markdown", default=None, help="also write the table to this file")
    args = parser.parse_args(argv)
    trees = {name: Path(path).resolve() for name, path in (item.split("=", 1) for item in args.tree)}
    data_root = str(Path(args.data_root).resolve())
    walls: dict = {}
    imports: dict = {}
    trains: dict = {name: [] for name in trees}
    with tempfile.TemporaryDirectory() as cwd:
        for _ in range(args.repeats):
            for name, tree in trees.items():
                for label, command in SHORT.items():
                    wall, imported = run_short(tree, command, data_root, cwd)
                    walls.setdefault((label, name), []).append(wall)
                    imports.setdefault((label, name), []).append(imported)
                trains[name].append(run_train(tree, args.epochs, data_root, cwd))
    lines = [f"median of {args.repeats} runs each, trees alternating; load average at the end "
             f"{os.getloadavg()[0]:.2f}; {os.cpu_count()} cores", "",
             "| command | " + " | ".join(f"{n}: wall s | {n}: imports s" for n in trees) + " |",
             "|---|" + "---|---|" * len(trees)]
    for label in SHORT:
        cells = [f"{statistics.median(walls[label, n]):.2f} | {statistics.median(imports[label, n]):.2f}"
                 for n in trees]
        lines.append(f"| `gridgnn {' '.join(SHORT[label])[:40]}` | " + " | ".join(cells) + " |")
    lines += ["", f"`gridgnn {' '.join(TRAIN)} --epochs {args.epochs}`: seconds from the start "
              "(median; '-' where the tree prints no such line)", "",
              "| moment | " + " | ".join(trees) + " |", "|---|" + "---|" * len(trees)]
    moments = ["first line", "starting", "ready", "first epoch", "summary", "last line", "exit",
               "exit after last line"]
    for moment in moments:
        cells = []
        for name in trees:
            values = [run[moment] for run in trains[name] if moment in run]
            cells.append(f"{statistics.median(values):.2f}" if len(values) == len(trains[name]) else "-")
        lines.append(f"| {moment} | " + " | ".join(cells) + " |")
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
