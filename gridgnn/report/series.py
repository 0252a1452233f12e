"""The series a report draws, read from a metrics file (`gridgnn.train.outputs.metrics`), with no plotting library.

`load_metrics` reads and checks the file (non-finite numbers restored from its ``nonfinite`` list);
`report_series` turns it into `ReportSeries`: per-epoch lists (loss, accuracies, step time; on a grid the
step's communication, exposed communication and computation time, each the max over ranks as the file
holds them) and, on a grid, per-rank figures averaged over the epochs that ran on the run's grid (a resumed
run's earlier epochs may come from another grid): bytes by phase, measured and predicted step bytes, and
each rank's exposed-communication and computation time. Not collective.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from gridgnn.errors import DataError
from gridgnn.limits import human_bytes
from gridgnn.train.loop.nonfinite import decode_nonfinite

RECORD_KEYS = ("epoch", "loss", "train_acc", "val_acc", "test_acc", "time_s")
METRIC_RECORD_KEYS = ("epoch", "loss", "train_metric", "val_metric", "test_metric", "time_s")
"""The keys of a record of a run scored by another metric than accuracy (no ``*_acc`` keys)."""
EPOCH_TIMES = ("comm_time_s", "exposed_comm_time_s", "compute_time_s")


@dataclass(frozen=True)
class GridSeries:
    """A grid run's figures. Per epoch (aligned with ``epochs``, the epochs that ran on this grid):
    ``comm_time_s``, ``exposed_comm_time_s``, ``compute_time_s``. Per rank (lists of ``world_size``, means
    over those epochs): ``phase_bytes`` (phase -> bytes received per epoch; phases that moved nothing on any
    rank left out), ``measured_bytes`` and ``predicted_bytes`` (the training step; None when the file has no
    prediction), ``rank_exposed_comm_s`` and ``rank_compute_s`` (None when the file has no ``rank_times_s``)."""

    label: str
    world_size: int
    epochs: list[int]
    comm_time_s: list[float]
    exposed_comm_time_s: list[float]
    compute_time_s: list[float]
    phase_bytes: dict[str, list[float]]
    measured_bytes: list[float]
    predicted_bytes: list[float] | None
    rank_exposed_comm_s: list[float] | None
    rank_compute_s: list[float] | None


@dataclass(frozen=True)
class ReportSeries:
    """What a report shows: per-epoch lists aligned with ``epochs`` (NaN where the file has a non-finite
    value), ``grid`` (None for a one-process run) and ``summary``: (label, text) rows of the key numbers."""

    title: str
    epochs: list[int]
    loss: list[float]
    train_acc: list[float]
    val_acc: list[float]
    test_acc: list[float]
    time_s: list[float]
    grid: GridSeries | None
    summary: list[tuple[str, str]] = field(default_factory=list)
    metric: str = "accuracy"
    """What ``train_acc``, ``val_acc``, ``test_acc`` hold: accuracies, or the values of this metric."""


def load_metrics(path: str | Path) -> dict:
    """The metrics document at ``path``, non-finite numbers restored; `DataError` (one line naming the file)
    when it is missing, not JSON, or not a metrics file with at least one epoch record."""
    where = f"metrics file '{path}'"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{where} does not exist") from None
    except IsADirectoryError:
        raise DataError(f"{where} is a directory") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read {where}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise DataError(f"{where} is not valid JSON: {' '.join(str(exc).split())}") from None
    if not isinstance(document, dict):
        raise DataError(f"{where} is not a gridgnn metrics file (written by --metrics-out): not a JSON object")
    try:
        document = decode_nonfinite(document)
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise DataError(f"{where}: its 'nonfinite' list is malformed: {' '.join(str(exc).split())}") from None
    problem = _problem(document)
    if problem is not None:
        raise DataError(f"{where} is not a gridgnn metrics file (written by --metrics-out): {problem}")
    return document


def _number(value: object) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def _problem(document: dict) -> str | None:
    epochs = document.get("epochs")
    if not isinstance(epochs, list) or not epochs:
        return "no 'epochs' list of records"
    for index, record in enumerate(epochs, start=1):
        keys = RECORD_KEYS if not isinstance(record, dict) or "train_metric" not in record or "train_acc" in record \
            else METRIC_RECORD_KEYS
        if not isinstance(record, dict) or not all(_number(record.get(key, False)) for key in keys):
            return f"epoch record {index} lacks one of {', '.join(keys)}"
    if not isinstance(document.get("config", {}), dict) or not isinstance(document.get("final", {}), dict):
        return "'config' and 'final' must be objects"
    return None


def _final_rows(final: dict) -> list[tuple[str, str]]:
    """The summary's final and best-validation rows: accuracies, or the run's metric by name."""
    if "train_acc" in final or "train_metric" not in final:
        return [("final accuracy", f"train {_acc(final.get('train_acc'))}, val {_acc(final.get('val_acc'))}, "
                                   f"test {_acc(final.get('test_acc'))}"),
                ("best validation", f"{_acc(final.get('best_val_acc'))} at epoch {final.get('best_epoch', '?')}, "
                                    f"test there {_acc(final.get('test_acc_at_best_val'))}")]
    metric = final.get("metric", "metric")

    def show(value: object) -> str:
        return "?" if not isinstance(value, (int, float)) else f"{value:.4f}"
    return [(f"final {metric}", f"train {show(final.get('train_metric'))}, val {show(final.get('val_metric'))}, "
                                f"test {show(final.get('test_metric'))}"),
            ("best validation", f"{show(final.get('best_val_metric'))} at epoch {final.get('best_epoch', '?')}, "
                                f"test there {show(final.get('test_metric_at_best_val'))}")]


def _float(value: object) -> float:
    return math.nan if value is None else float(value)


def _mean_per_rank(lists: list[list[float]], world: int) -> list[float]:
    """Elementwise mean of per-rank lists of ``world`` numbers (ValueError when one has another length)."""
    if any(not isinstance(values, list) or len(values) != world for values in lists):
        raise ValueError(f"a per-rank list does not hold {world} ranks")
    return [math.fsum(column) / len(lists) for column in zip(*lists, strict=True)]


def read_series(path: str | Path) -> ReportSeries:
    """`report_series` of the metrics file at ``path``; `DataError` (one line) when the file is not one, its
    per-epoch communication included (a per-rank list missing or of another length)."""
    metrics = load_metrics(path)
    try:
        return report_series(metrics)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, ZeroDivisionError) as exc:
        what = f"missing {exc}" if isinstance(exc, KeyError) else " ".join(str(exc).split())
        raise DataError(f"metrics file '{path}' is not a gridgnn metrics file (written by --metrics-out): its "
                        f"communication records do not read ({what})") from None


def report_series(metrics: dict) -> ReportSeries:
    """The series of ``metrics`` (a document from `load_metrics`)."""
    records = metrics["epochs"]
    config, dataset = metrics.get("config", {}), metrics.get("dataset", {})
    by_metric = "train_acc" not in records[0]
    keys = METRIC_RECORD_KEYS if by_metric else RECORD_KEYS
    column = {name: [_float(record[key]) for record in records] for name, key in zip(RECORD_KEYS[1:], keys[1:],
                                                                                        strict=True)}
    grid = grid_series(metrics)
    title = f"{dataset.get('name', '?')}: {config.get('model', 'gcn')}, " + (
        grid.label if grid is not None else f"algo {config.get('algo', 'local')}")
    return ReportSeries(title=title, epochs=[int(record["epoch"]) for record in records], grid=grid,
                        summary=summary_rows(metrics, grid), metric=metrics.get("final", {}).get(
                            "metric", "accuracy") if by_metric else "accuracy", **column)


def grid_series(metrics: dict) -> GridSeries | None:
    """The per-rank figures of a grid run, or None when no epoch recorded communication on the run's grid."""
    config = metrics.get("config", {})
    world = config.get("world_size")
    ran = [record for record in metrics["epochs"]
           if isinstance(record.get("comm"), dict) and len(record["comm"].get("bytes", [])) == world]
    if not ran:
        return None
    comm = [record["comm"] for record in ran]
    phases = {phase: _mean_per_rank([c["by_phase"][phase] for c in comm], world) for phase in comm[0]["by_phase"]}
    predicted = (_mean_per_rank([c["predicted_bytes"] for c in comm], world)
                 if all("predicted_bytes" in c for c in comm) else None)
    timed = all(isinstance(record.get("rank_times_s"), dict) for record in ran)
    return GridSeries(
        label=f"{config.get('algo')} grid {config.get('grid_shape', '?')}, {world} processes",
        world_size=world, epochs=[int(record["epoch"]) for record in ran],
        **{key: [_float(record.get(key)) for record in ran] for key in EPOCH_TIMES},
        phase_bytes={phase: values for phase, values in phases.items() if any(values)},
        measured_bytes=_mean_per_rank([c["bytes"] for c in comm], world), predicted_bytes=predicted,
        rank_exposed_comm_s=_mean_per_rank([r["rank_times_s"]["exposed_comm"] for r in ran], world) if timed else None,
        rank_compute_s=_mean_per_rank([r["rank_times_s"]["compute"] for r in ran], world) if timed else None)


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None or not math.isfinite(seconds) else f"{1000 * seconds:.2f} ms"


def _acc(value: object) -> str:
    return f"{value:.4f}" if isinstance(value, (int, float)) and math.isfinite(value) else "-"


def summary_rows(metrics: dict, grid: GridSeries | None) -> list[tuple[str, str]]:
    """The key numbers of the run: dataset, model, final and best accuracies, times and, on a grid, bytes."""
    config, dataset, final = metrics.get("config", {}), metrics.get("dataset", {}), metrics.get("final", {})
    rows = [
        ("dataset", f"{dataset.get('name', '?')}: {dataset.get('num_nodes', '?')} nodes, "
                    f"{dataset.get('num_edges', '?')} stored edges, {dataset.get('num_classes', '?')} classes"),
        ("model", f"{config.get('model', 'gcn')}, {config.get('layers', '?')} layers, hidden "
                  f"{config.get('hidden', '?')}, lr {config.get('lr', '?')}, seed {config.get('seed', '?')}"),
        ("run", grid.label if grid is not None else f"algo {config.get('algo', 'local')}, one process"),
        ("epochs", str(len(metrics["epochs"]))),
        *_final_rows(final),
        ("mean step time", _ms(final.get("mean_epoch_time_s"))),
    ]
    if grid is None:
        return rows
    mean = {key: math.fsum(getattr(grid, key)) / len(grid.epochs) for key in EPOCH_TIMES}
    rows += [
        ("time split (max over ranks)", f"communication {_ms(mean['comm_time_s'])}, not hidden "
                                        f"{_ms(mean['exposed_comm_time_s'])}, compute {_ms(mean['compute_time_s'])}"),
        ("step bytes per rank per epoch", f"max {human_bytes(max(grid.measured_bytes))}, mean "
                                          f"{human_bytes(math.fsum(grid.measured_bytes) / grid.world_size)}"),
    ]
    if grid.predicted_bytes is not None:
        worst = max(abs(p - m) for p, m in zip(grid.predicted_bytes, grid.measured_bytes, strict=True))
        rows.append(("predicted step bytes", "equal to measured on every rank" if worst == 0 else
                     f"max {human_bytes(max(grid.predicted_bytes))}; differs from measured by up to "
                     f"{human_bytes(worst)} on a rank"))
    return rows
