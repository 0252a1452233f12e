"""The ``--metrics-out`` JSON file: configuration, dataset, per-epoch records and final accuracies.

Layout (all accuracies are fractions in [0, 1], times in seconds)::

    {"config":  {...TrainConfig.to_dict()...},
     "dataset": {"name", "num_nodes", "num_edges", "num_features", "num_classes", "directed",
                 "split": {"train", "val", "test"}, "meta"},
     "epochs":  [{"epoch", "loss", "train_acc", "val_acc", "test_acc", "time_s"}, ...],
     "final":   {"train_acc", "val_acc", "test_acc", "best_val_acc", "test_acc_at_best_val",
                 "best_epoch", "mean_epoch_time_s"},
     "resumed_from": {"checkpoint", "epoch"}}      (only in a run resumed from a checkpoint)

A resumed run's ``epochs`` include the epochs before the checkpoint, as recorded there.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from gridgnn.config import TrainConfig
from gridgnn.data.graph import Graph
from gridgnn.errors import ConfigError
from gridgnn.train.trainer import TrainResult


def dataset_summary(graph: Graph) -> dict:
    """The ``dataset`` object: name and sizes (``num_edges`` counts stored adjacency non-zeros), ``split``: the
    vertex count of each mask (an empty mask's accuracy reads 0), and ``meta``: the JSON-ready entries of
    ``graph.meta`` (source, format, split, preprocessing)."""
    meta = {key: value for key, value in graph.meta.items() if isinstance(value, (str, int, float, bool))}
    return {
        "name": graph.name,
        "num_nodes": graph.num_nodes,
        "num_edges": graph.num_edges,
        "num_features": graph.num_features,
        "num_classes": graph.num_classes,
        "directed": graph.directed,
        "split": {name: int(getattr(graph, f"{name}_mask").sum()) for name in ("train", "val", "test")},
        "meta": meta,
    }


def build_metrics(config: TrainConfig, graph: Graph, result: TrainResult, resumed_from=None) -> dict:
    """The whole metrics document as a JSON-ready dict; ``resumed_from`` (a `ResumePoint`) adds
    ``resumed_from: {"checkpoint", "epoch"}``."""
    metrics = {
        "config": config.to_dict(),
        "dataset": dataset_summary(graph),
        "epochs": [record.to_dict() for record in result.epochs],
        "final": result.final(),
    }
    if resumed_from is not None:
        metrics["resumed_from"] = {"checkpoint": str(resumed_from.path), "epoch": resumed_from.epoch}
    return metrics


def check_writable(path: str | os.PathLike, what: str = "metrics file") -> Path:
    """Fail early (`ConfigError`, one line) when ``path`` cannot be written: no parent folder, a folder, a
    read-only file system. Probes by creating and removing a temporary file beside it (`os.access` says
    yes to root even on read-only and pseudo file systems). ``what`` names the file in the message."""
    target = Path(path)
    where = f"cannot write {what} '{target}'"
    if target.is_dir():
        raise ConfigError(f"{where}: it is a directory")
    if target.parent.exists() and not target.parent.is_dir():
        raise ConfigError(f"{where}: '{target.parent}' is not a folder")
    if not target.parent.is_dir():
        raise ConfigError(f"{where}: folder '{target.parent}' does not exist")
    try:
        handle, probe = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".probe", dir=target.parent)
    except OSError as exc:
        raise ConfigError(f"{where}: folder '{target.parent}' is not writable ({exc.strerror})") from None
    os.close(handle)
    Path(probe).unlink(missing_ok=True)
    return target


def write_json_atomic(path: str | os.PathLike, payload: dict) -> None:
    """Write ``payload`` as JSON to ``path`` via a temporary file in the same folder and `os.replace`,
    so readers see either the old file or the complete new one, never a partial write."""
    target = Path(path)
    handle, temp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            json.dump(payload, stream, indent=1, allow_nan=False)
            stream.write("\n")
        os.replace(temp_name, target)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
