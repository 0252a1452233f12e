"""Accuracy and bytes of ``gridgnn train --comm-precision fp32|bf16|fp16|int8`` on real graphs, and its step time.

Accuracy mode (default). For each model x dataset x precision x seed x grid, one ``gridgnn train`` run as a
subprocess on ``--nprocs`` local workers (1 compute thread each), the grid pinned so the runs compare: ``1d``
is ``--algo 1d``, ``2d`` is ``--algo 2d --grid RxC`` (the square grid of ``--nprocs``); both with ``--comm dense
--reorder none`` and the three switches off (``--no-cache-panels --no-full-feature-rows
--no-defer-weight-gather``; overlap left at its default). Per seed also one process (``--algo local``, fp32) for
reference. Each run's own metrics file gives:

- ``test_acc``: ``final.test_acc_at_best_val`` (the test accuracy of the best-validation-accuracy epoch);
- ``wire_bytes``: bytes per rank per training step of the phases whose rows travel at ``--comm-precision``
  (``spmm_forward + spmm_backward + dense``, `gridgnn.grid.comm_records.WIRE_PHASES`), max over ranks, median
  over epochs; ``all_bytes``: the same for every phase (``comm.bytes``: the weight gradients and the loss
  stay float32);
- ``step_s``: the median over epochs of the per-epoch step time ``time_s``.

Every record carries the exact command that produced it; a failed run keeps its status and the tail of its
stderr. Writes ``accuracy.json`` (every run, rewritten after each), ``accuracy.md`` (per model x dataset x grid
x precision: mean ± sample standard deviation and min-max of the test accuracy over seeds, the difference to
the same grid's fp32 mean in points and the paired t statistic of the per-seed differences, flagged where
bf16/fp16 are more than 0.3 points below it or int8 more than 0.5, the comparison with AdaQP's 0.30-point bound,
and the byte ratios to fp32) and, when matplotlib is installed (an optional, ``bench`` extra), ``accuracy.png``.

Timing mode (``--timing``): one dataset, each grid at ``--nprocs``, the four precisions run alternately
(1d fp32, bf16, fp16, int8, 2d fp32, ..., then again) for ``--rounds`` rounds; writes ``timing.json`` and
``timing.md`` with the median over rounds of each run's median step time.

Models use the usual small-graph settings (Kipf & Welling's GCN: hidden 16, dropout 0.5, lr 0.01, weight decay 5e-4,
200 epochs; SAGE the same; GIN hidden 64, and ``gin-ln`` the same with ``--gin-norm layer``; GAT as Veličković et
al.: 8 heads of 8, 1 output head, dropout and attention dropout 0.6, lr 0.005), all for ``--epochs`` (200) epochs.
Examples::

    nice -n 10 python benchmarks/comm_precision.py --data-root ../shared/datasets --datasets cora citeseer \\
        --out results/comm_precision
    nice -n 10 python benchmarks/comm_precision.py --data-root ../shared/datasets --timing --datasets cora \\
        --epochs 30 --rounds 3 --out results/comm_precision
    python benchmarks/comm_precision.py --report --out results/comm_precision   # the .md and .png from the .json

``--append`` adds to the out folder's study and skips the runs it already holds (same model, dataset,
precision, seed and grid, successful). Two studies can run side by side into separate ``--out`` folders and be
joined with ``--merge FOLDER --out results/comm_precision``: the folder's runs the study lacks, its commands
(as they were run) and dates, and this command.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gridgnn.grid.comm_records import WIRE_PHASES
from gridgnn.safe_files import atomic_write

DATASETS = ["cora", "citeseer", "amazon-photo", "amazon-computers", "coauthor-cs", "coauthor-physics"]
MODELS = ["gcn", "sage", "gin", "gin-ln", "gat"]
"""The study's models, in the report's order; ``gin-ln`` is GIN with ``--gin-norm layer`` (run where plain GIN
does not train: the Amazon graphs, ``results/comm_precision/gin_amazon.md``), not run by default."""
DEFAULT_MODELS = ["gcn", "sage", "gin", "gat"]
PRECISIONS = ["fp32", "bf16", "fp16", "int8"]
GRIDS = ["1d", "2d"]
MODEL_FLAGS = {
    "gcn": [],
    "sage": [],
    "gin": ["--hidden", "64"],
    "gin-ln": ["--hidden", "64", "--gin-norm", "layer"],
    "gat": ["--hidden", "8", "--heads", "8", "--output-heads", "1", "--dropout", "0.6", "--attn-dropout", "0.6",
            "--lr", "0.005"],
}
"""Each model's flags beyond ``gridgnn train``'s defaults (hidden 16, dropout 0.5, lr 0.01, weight decay 5e-4)."""
PINNED = ["--comm", "dense", "--reorder", "none", "--no-cache-panels", "--no-full-feature-rows",
          "--no-defer-weight-gather"]
"""The execution options every grid run pins, so that only ``--comm-precision`` differs between them."""
LIMITS = {"bf16": 0.3, "fp16": 0.3, "int8": 0.5}
"""A precision is flagged when its mean test accuracy is more than this many points below fp32's (same grid)."""
ADAQP_POINTS = 0.30
"""AdaQP (Wan et al., MLSys 2023): at most 0.30 points of accuracy lost with 2-8-bit messages."""
STDERR_TAIL = 2000


def grid_flags(grid: str, nprocs: int) -> list[str]:
    """The ``gridgnn train`` flags of grid ``grid`` (``local``, ``1d``, ``2d``) on ``nprocs`` workers; ``2d``
    needs a square ``nprocs``."""
    if grid == "local":
        return ["--algo", "local"]
    if grid == "1d":
        return ["--algo", "1d", "--nprocs", str(nprocs)]
    side = math.isqrt(nprocs)
    if grid != "2d" or side * side != nprocs:
        raise ValueError(f"grid {grid!r} on {nprocs} processes: 1d, or 2d on a square count")
    return ["--algo", "2d", "--nprocs", str(nprocs), "--grid", f"{side}x{side}"]


def train_command(run: dict, data_root: str | None, epochs: int, nprocs: int) -> list[str]:
    """The ``gridgnn train`` argument list of ``run`` ({model, dataset, precision, seed, grid}), without the
    metrics file."""
    command = ["python", "-m", "gridgnn", "train", "--dataset", run["dataset"]]
    if data_root:
        command += ["--data-root", data_root]
    command += ["--model", run["model"].partition("-")[0], *MODEL_FLAGS[run["model"]], "--epochs", str(epochs),
                "--seed", str(run["seed"]), *grid_flags(run["grid"], nprocs)]
    if run["grid"] != "local":
        command += [*PINNED, "--comm-precision", run["precision"]]
    return command + ["--threads", "1", "--quiet"]


def _median_max(epochs: list[dict], per_rank) -> int:
    """Median over ``epochs`` of the max over ranks of ``per_rank(comm)`` (a list per rank)."""
    return int(statistics.median(max(per_rank(e["comm"])) for e in epochs))


def measure(metrics: dict) -> dict:
    """The record's numbers from a run's metrics document (see the module docstring)."""
    final, epochs = metrics["final"], metrics["epochs"]
    out = {"test_acc": final["test_acc_at_best_val"], "best_val_acc": final["best_val_acc"],
           "best_epoch": final["best_epoch"], "epochs_run": len(epochs),
           "step_s": statistics.median(e["time_s"] for e in epochs)}
    timed = [e for e in epochs if isinstance(e.get("comm"), dict)]
    if timed:
        out["wire_bytes"] = _median_max(timed, lambda c: [sum(c["by_phase"][p][r] for p in WIRE_PHASES)
                                                          for r in range(len(c["bytes"]))])
        out["all_bytes"] = _median_max(timed, lambda c: c["bytes"])
        out["wire_bytes_by_phase"] = {p: _median_max(timed, lambda c, p=p: c["by_phase"][p]) for p in WIRE_PHASES}
    return out


def run_one(run: dict, *, data_root: str | None, epochs: int, nprocs: int, nice: int = 0) -> dict:
    """Train ``run`` as a ``gridgnn train`` subprocess (``python`` is this interpreter, the environment this
    one's with OMP_NUM_THREADS=1) and return it with the command, wall seconds and `measure`'s numbers, or
    ``status`` and ``stderr`` on failure."""
    command = train_command(run, data_root, epochs, nprocs)
    with tempfile.TemporaryDirectory(prefix="comm-precision-") as folder:
        metrics_path = Path(folder) / "metrics.json"
        argv = [sys.executable, *command[1:], "--metrics-out", str(metrics_path)]
        if nice:
            argv = ["nice", "-n", str(nice), *argv]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        start = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, text=True)
        record = {**run, "command": shlex.join(command), "wall_s": round(time.perf_counter() - start, 2),
                  "status": done.returncode}
        if done.returncode != 0 or not metrics_path.exists():
            record["stderr"] = done.stderr[-STDERR_TAIL:]
            return record
        record.update(measure(json.loads(metrics_path.read_text())))
    return record


def plan_runs(models, datasets, precisions, seeds, grids) -> list[dict]:
    """Every run, model by model within dataset by dataset (so an interrupted study has whole model x
    dataset cells), each seed's local fp32 reference first."""
    runs = []
    for dataset in datasets:
        for model in models:
            for seed in seeds:
                runs.append(dict(model=model, dataset=dataset, precision="fp32", seed=seed, grid="local"))
                runs += [dict(model=model, dataset=dataset, precision=p, seed=seed, grid=g)
                         for g in grids for p in precisions]
    return runs


RUN_KEY = ("model", "dataset", "precision", "seed", "grid")
"""What names a run: a study holds at most one successful record per key."""


def run_key(record: dict) -> tuple:
    return tuple(record[name] for name in RUN_KEY)


def done_keys(records: list[dict]) -> set[tuple]:
    """The keys of the successful runs in ``records`` (a failed run may be run again)."""
    return {run_key(r) for r in records if r.get("status") == 0}


def merge(document: dict, other: dict) -> int:
    """Add ``other``'s successful records whose key ``document`` lacks, its commands and dates; return how many
    records were added. Both are accuracy.json documents; ``document`` is changed in place."""
    have = done_keys(document["records"])
    added = [r for r in other["records"] if r.get("status") == 0 and run_key(r) not in have]
    document["records"] += added
    document["commands"] += [c for c in other["commands"] if c not in document["commands"]]
    document["date"] += "".join(f"; {d}" for d in other["date"].split("; ") if d not in document["date"])
    return len(added)


# --- the report ----------------------------------------------------------------------------------------------

def _points(values: list[float]) -> list[float]:
    return [100.0 * v for v in values]


def paired_t(differences: list[float]) -> float | None:
    """The paired t statistic of per-seed differences (points): mean / (sample sd / √n); None under two
    differences; 0 when every difference is 0, ±inf when all are equal and not 0. A difference is significant
    at 5 % (two-sided) above |t| = 4.30 with 3 seeds (2 degrees of freedom), 2.26 with 10."""
    if len(differences) < 2:
        return None
    mean, spread = statistics.mean(differences), statistics.stdev(differences)
    if spread < 1e-9 * max(1.0, abs(mean)):  # equal differences, up to the rounding of 100 * accuracy
        return 0.0 if abs(mean) < 1e-9 else math.copysign(math.inf, mean)
    return mean / (spread / math.sqrt(len(differences)))


def summarize(records: list[dict]) -> list[dict]:
    """One row per (model, dataset, grid, precision) of the successful records: accuracy over seeds in
    points (mean, sample sd, min, max), ``delta``: the mean minus the same grid's fp32 mean, both over the seeds
    both ran (None for fp32 and local),
    ``flagged`` (more than `LIMITS` below), ``adaqp`` ('within' or 'above' the 0.30-point bound, for a
    lower precision), ``paired_t`` (`paired_t` of the per-seed differences to fp32; None under two seeds), and
    the byte ratios to the fp32 run of the same seed (median over seeds)."""
    ok = [r for r in records if r.get("status") == 0]
    cells: dict[tuple, list[dict]] = {}
    for r in ok:
        cells.setdefault((r["model"], r["dataset"], r["grid"], r["precision"]), []).append(r)
    rows = []
    for (model, dataset, grid, precision), group in cells.items():
        acc = _points([r["test_acc"] for r in group])
        row = {"model": model, "dataset": dataset, "grid": grid, "precision": precision, "seeds": len(group),
               "mean": statistics.mean(acc), "sd": statistics.stdev(acc) if len(acc) > 1 else 0.0,
               "min": min(acc), "max": max(acc), "delta": None, "paired_t": None, "flagged": False, "adaqp": None,
               "wire_ratio": None, "all_ratio": None, "wire_bytes": None, "all_bytes": None}
        if grid != "local":
            row["wire_bytes"] = int(statistics.median(r["wire_bytes"] for r in group))
            row["all_bytes"] = int(statistics.median(r["all_bytes"] for r in group))
            base = {r["seed"]: r for r in cells.get((model, dataset, grid, "fp32"), [])}
            pairs = [(r, base[r["seed"]]) for r in group if r["seed"] in base]
            if pairs:
                row["wire_ratio"] = statistics.median(r["wire_bytes"] / b["wire_bytes"] for r, b in pairs)
                row["all_ratio"] = statistics.median(r["all_bytes"] / b["all_bytes"] for r, b in pairs)
            if precision != "fp32" and pairs:  # fp32's mean over the same seeds
                row["delta"] = (statistics.mean(_points([r["test_acc"] for r, _ in pairs]))
                                - statistics.mean(_points([b["test_acc"] for _, b in pairs])))
                row["paired_t"] = paired_t([100.0 * (r["test_acc"] - b["test_acc"]) for r, b in pairs])
                row["flagged"] = row["delta"] < -LIMITS[precision]
                row["adaqp"] = "above" if row["delta"] < -ADAQP_POINTS else "within"
        rows.append(row)
    order = {name: i for i, name in enumerate(["local", *GRIDS])}
    rank = {name: i for i, name in enumerate(PRECISIONS)}
    known = {name: i for i, name in enumerate(DATASETS)}
    rows.sort(key=lambda r: (known.get(r["dataset"], len(known)), r["dataset"], MODELS.index(r["model"]),
                             order.get(r["grid"], 9), rank[r["precision"]]))
    return rows


def _fmt(value, spec: str, empty: str = "") -> str:
    return empty if value is None else format(value, spec)


def markdown(document: dict) -> str:
    """The report of an accuracy document ({"commands", "date", "records", ...})."""
    records, rows = document["records"], summarize(document["records"])
    lines = ["# `--comm-precision`: test accuracy and bytes against fp32", "",
             f"Produced {document['date']} on this machine ({document['machine']}) by:", ""]
    lines += [f"    {c}" for c in document["commands"]]
    lines += ["", "Each run is the `gridgnn train` command in `accuracy.json` (`records[].command`). Test accuracy "
              "(%) at the best validation-accuracy epoch (`final.test_acc_at_best_val` of the run's metrics); "
              "mean ± sample standard deviation over seeds, then min-max. Δ: the mean minus the same grid's fp32 "
              "mean over the same seeds, in points; t: the paired t statistic of the per-seed differences (mean over "
              "sample sd / √seeds; significant at 5 %, two-sided, above |t| = 4.30 with 3 seeds, 2.26 with 10); "
              "**flag**: bf16/fp16 more than "
              f"{LIMITS['bf16']} points below it, int8 more than {LIMITS['int8']}. AdaQP: 'within' when the loss "
              f"is at most its {ADAQP_POINTS:.2f}-point bound "
              "(a gain counts as within), 'above' when larger. Bytes: per rank per training step, max over ranks, "
              "median over epochs; wire = the SpMM and dense phases (the rows `--comm-precision` encodes), all = "
              "every phase (weight gradients and loss stay float32). Ratios: to the fp32 run of the same seed "
              "and grid.", "",
              "| model | dataset | grid | precision | seeds | mean ± sd | min-max | Δ vs fp32 | t | flag | AdaQP 0.30 "
              "| wire bytes | wire ratio | all bytes | all ratio |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['dataset']} | {r['grid']} | {r['precision']} | {r['seeds']} "
            f"| {r['mean']:.2f} ± {r['sd']:.2f} | {r['min']:.1f}-{r['max']:.1f} | {_fmt(r['delta'], '+.2f')} "
            f"| {_fmt(r['paired_t'], '+.2f')} | {'**flag**' if r['flagged'] else ''} | {r['adaqp'] or ''} "
            f"| {_fmt(r['wire_bytes'], 'd')} "
            f"| {_fmt(r['wire_ratio'], '.3f')} | {_fmt(r['all_bytes'], 'd')} | {_fmt(r['all_ratio'], '.3f')} |")
    lines += ["", *_headline(rows), *_equal_to_local(records), *_failures(records), *document.get("notes", [])]
    return "\n".join(lines) + "\n"


def _headline(rows: list[dict]) -> list[str]:
    lines = ["## Summary", "", "| precision | grid | cells | mean Δ (points) | worst Δ | lowest t | flagged "
             "| above AdaQP | wire ratio (median) | all ratio (median) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for precision in PRECISIONS[1:]:
        for grid in GRIDS:
            cell = [r for r in rows if r["precision"] == precision and r["grid"] == grid and r["delta"] is not None]
            if not cell:
                continue
            deltas = [r["delta"] for r in cell]
            ratio = [r["wire_ratio"] for r in cell if r["wire_ratio"] is not None]
            every = [r["all_ratio"] for r in cell if r["all_ratio"] is not None]
            ts = [r["paired_t"] for r in cell if r["paired_t"] is not None]  # the most negative: a loss
            lines.append(f"| {precision} | {grid} | {len(cell)} | {statistics.mean(deltas):+.2f} "
                         f"| {min(deltas):+.2f} | {_fmt(min(ts) if ts else None, '+.2f')} "
                         f"| {sum(r['flagged'] for r in cell)} "
                         f"| {sum(r['adaqp'] == 'above' for r in cell)} "
                         f"| {_fmt(statistics.median(ratio) if ratio else None, '.3f')} "
                         f"| {_fmt(statistics.median(every) if every else None, '.3f')} |")
    return lines + [""]


def _equal_to_local(records: list[dict]) -> list[str]:
    """Whether each fp32 grid run gave its seed's local test accuracy (distributed fp32 is exact)."""
    local = {(r["model"], r["dataset"], r["seed"]): r["test_acc"] for r in records
             if r.get("status") == 0 and r["grid"] == "local"}
    pairs = [(r, local[(r["model"], r["dataset"], r["seed"])]) for r in records if r.get("status") == 0
             and r["grid"] != "local" and r["precision"] == "fp32" and (r["model"], r["dataset"], r["seed"]) in local]
    if not pairs:
        return []
    same = sum(abs(r["test_acc"] - acc) < 1e-9 for r, acc in pairs)
    return [f"fp32 on a grid against one process (`--algo local`, same seed): {same} of {len(pairs)} runs gave "
            "the same test accuracy.", ""]


def _failures(records: list[dict]) -> list[str]:
    failed = [r for r in records if r.get("status") != 0]
    if not failed:
        return []
    lines = ["## Failed runs", ""]
    succeeded = done_keys(records)  # a failed run that --append ran again
    for r in failed:
        last = (r.get("stderr") or "").strip().splitlines()[-1:] or ["(no stderr)"]
        again = " (run again since: succeeded)" if run_key(r) in succeeded else ""
        lines.append(f"- status {r['status']}: `{r['command']}`: {last[0]}{again}")
    return lines + [""]


def plot(document: dict, path: Path) -> dict | None:
    """Bars of Δ vs fp32 (points) per model x dataset, one bar per lower precision x grid, the flag limits
    dashed; written to ``path``. Returns the drawn values {label: [Δ per cell]}, or None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    rows = [r for r in summarize(document["records"]) if r["delta"] is not None]
    cells = list(dict.fromkeys((r["model"], r["dataset"]) for r in rows))
    series = {f"{p} {g}": [next((r["delta"] for r in rows if (r["model"], r["dataset"]) == c
                                 and r["precision"] == p and r["grid"] == g), math.nan) for c in cells]
              for p in PRECISIONS[1:] for g in GRIDS}
    series = {k: v for k, v in series.items() if not all(math.isnan(x) for x in v)}
    figure, axes = plt.subplots(figsize=(max(6.0, 1.2 * len(cells) + 2), 4), dpi=120)
    width = 0.8 / max(1, len(series))
    for i, (label, values) in enumerate(series.items()):
        axes.bar([c + (i - (len(series) - 1) / 2) * width for c in range(len(cells))], values, width, label=label)
    for limit, style in ((LIMITS["bf16"], "--"), (LIMITS["int8"], ":")):
        axes.axhline(-limit, color="grey", linestyle=style, linewidth=1)
    axes.axhline(0, color="black", linewidth=0.8)
    axes.set_xticks(range(len(cells)), [f"{m}\n{d}" for m, d in cells], fontsize=8)
    axes.set_ylabel("test accuracy - fp32 (points)")
    axes.set_title("--comm-precision against fp32 (mean over seeds); limits -0.3 (--), -0.5 (:)", fontsize=9)
    axes.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    with atomic_write(path, "benchmark plot") as stream:
        figure.savefig(stream, format="png")
    plt.close(figure)
    return series


# --- timing --------------------------------------------------------------------------------------------------

def timing_markdown(document: dict) -> str:
    runs = [r for r in document["records"] if r.get("status") == 0]
    lines = ["# `--comm-precision`: step time on this machine", "",
             f"Produced {document['date']} ({document['machine']}) by:", "",
             *[f"    {c}" for c in document["commands"]], "",
             "Precisions run alternately (each grid's four, then the next grid's, round after round). Step time: "
             "the median over a run's epochs of its `time_s`; the table gives the median over rounds (ms), and "
             "the ratio to fp32 on the same grid.", "",
             "| dataset | model | grid | precision | rounds | step (ms) | vs fp32 | wire bytes |",
             "|---|---|---|---|---|---|---|---|"]
    keys = list(dict.fromkeys((r["dataset"], r["model"], r["grid"], r["precision"]) for r in runs))
    medians = {k: statistics.median(r["step_s"] for r in runs if (r["dataset"], r["model"], r["grid"],
                                                                     r["precision"]) == k) for k in keys}
    for key in keys:
        group = [r for r in runs if (r["dataset"], r["model"], r["grid"], r["precision"]) == key]
        base = medians.get((*key[:3], "fp32"))
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {len(group)} | {1e3 * medians[key]:.1f} "
                     f"| {_fmt(medians[key] / base if base else None, '.2f')} | {group[0]['wire_bytes']} |")
    return "\n".join(lines + ["", *_failures(document["records"]), *document.get("notes", [])]) + "\n"


# --- main ----------------------------------------------------------------------------------------------------

def _write(path: Path, text: str) -> None:
    with atomic_write(path, "benchmark output") as stream:
        stream.write(text.encode())


def write_accuracy(document: dict, out: Path, with_plot: bool = True) -> None:
    _write(out / "accuracy.json", json.dumps(document, indent=1) + "\n")
    _write(out / "accuracy.md", markdown(document))
    if with_plot:
        plot(document, out / "accuracy.png")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=DEFAULT_MODELS, choices=MODELS)
    parser.add_argument("--datasets", nargs="+", default=DATASETS, help="names or generator specs")
    parser.add_argument("--precisions", nargs="+", default=PRECISIONS, choices=PRECISIONS)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--grids", nargs="+", default=GRIDS, choices=GRIDS)
    parser.add_argument("--no-local", action="store_true", help="skip the one-process fp32 reference runs")
    parser.add_argument("--nprocs", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--data-root")
    parser.add_argument("--nice", type=int, default=0, help="run the trainings under nice -n NICE")
    parser.add_argument("--out", default="results/comm_precision")
    parser.add_argument("--append", action="store_true",
                        help="add to the out folder's accuracy.json (a later invocation: its command is listed)")
    parser.add_argument("--merge", nargs="+", metavar="FOLDER",
                        help="add the successful runs of other studies' FOLDER/accuracy.json (run with another "
                             "--out, e.g. beside this one) to --out's, skipping runs it has; then redraw")
    parser.add_argument("--timing", action="store_true", help="the step-time mode (timing.json, timing.md)")
    parser.add_argument("--rounds", type=int, default=3, help="--timing: rounds of the alternating runs")
    parser.add_argument("--report", action="store_true",
                        help="only redraw accuracy.md/.png from accuracy.json (with --timing: timing.md)")
    parser.add_argument("--note", action="append", default=[],
                        help="--report: a paragraph for the end of accuracy.md (kept in accuracy.json's notes)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    command = "python benchmarks/comm_precision.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    if args.report:  # with --timing: timing.md from timing.json
        document = json.loads((out / ("timing.json" if args.timing else "accuracy.json")).read_text())
        if args.note:
            document["notes"] = [line for note in args.note for line in (note, "")]
        if args.timing:
            _write(out / "timing.json", json.dumps(document, indent=1) + "\n")
            _write(out / "timing.md", timing_markdown(document))
        else:
            write_accuracy(document, out)
        return document
    if args.merge:
        return _merge(args, command, out)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    machine = f"{os.cpu_count()} CPU cores, torch gloo, {args.nprocs} workers of 1 thread"
    kw = dict(data_root=args.data_root, epochs=args.epochs, nprocs=args.nprocs, nice=args.nice)
    if args.timing:
        return _timing(args, command, date, machine, out, kw)
    document = {"commands": [command], "date": date, "machine": machine, "records": []}
    if args.append and (out / "accuracy.json").exists():
        document = json.loads((out / "accuracy.json").read_text())
        document["commands"].append(command)
        document["date"] += f"; {date}"
    runs = plan_runs(args.models, args.datasets, args.precisions, args.seeds, args.grids)
    if args.no_local:
        runs = [r for r in runs if r["grid"] != "local"]
    have = done_keys(document["records"])  # --append: a run already in the study is not run again
    held = [r for r in runs if run_key(r) in have]
    if held:
        print(f"{len(held)} of {len(runs)} runs are in {out / 'accuracy.json'} already: skipped", flush=True)
        runs = [r for r in runs if run_key(r) not in have]
    for index, run in enumerate(runs, 1):
        record = run_one(run, **kw)
        document["records"].append(record)
        shown = f"{100 * record['test_acc']:.1f}" if record["status"] == 0 else f"FAILED ({record['status']})"
        print(f"[{index}/{len(runs)}] {run['model']} {run['dataset']} {run['grid']} {run['precision']} "
              f"seed {run['seed']}: {shown} ({record['wall_s']:.0f} s)", flush=True)
        write_accuracy(document, out, with_plot=False)
    write_accuracy(document, out)
    return document


def _merge(args, command: str, out: Path) -> dict:
    path = out / "accuracy.json"
    if not path.exists():
        sys.exit(f"comm_precision.py: error: --merge needs {path} to merge into")
    document = json.loads(path.read_text())
    for folder in args.merge:
        other = json.loads((Path(folder) / "accuracy.json").read_text())
        print(f"{folder}: {merge(document, other)} of {len(other['records'])} records added", flush=True)
    document["commands"].append(command)
    write_accuracy(document, out)
    return document


def _timing(args, command: str, date: str, machine: str, out: Path, kw: dict) -> dict:
    document = {"commands": [command], "date": date, "machine": machine, "records": []}
    for round_ in range(args.rounds):
        for dataset in args.datasets:
            for model in args.models:
                for grid in args.grids:
                    for precision in args.precisions:
                        run = dict(model=model, dataset=dataset, precision=precision, seed=args.seeds[0], grid=grid)
                        record = {**run_one(run, **kw), "round": round_}
                        document["records"].append(record)
                        print(f"round {round_} {model} {dataset} {grid} {precision}: "
                              f"{1e3 * record.get('step_s', math.nan):.1f} ms", flush=True)
    _write(out / "timing.json", json.dumps(document, indent=1) + "\n")
    _write(out / "timing.md", timing_markdown(document))
    return document


if __name__ == "__main__":
    main()
