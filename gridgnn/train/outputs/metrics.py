"""The ``--metrics-out`` JSON file: configuration, dataset, per-epoch records and final metrics.

Layout (accuracies are fractions in [0, 1], times in seconds; ``metric`` is the run's ``--metric``,
`gridgnn.train.loop.task_metrics`; the ``*_acc`` keys exist for a multiclass task only, and equal the ``*_metric``
ones there)::

    {"config":  {...TrainConfig.to_dict()...},
     "dataset": {"name", "num_nodes", "num_edges", "num_features", "num_classes", "task", "directed",
                 "split": {"train", "val", "test"}, "meta"},
     "epochs":  [{"epoch", "loss", "train_metric", "val_metric", "test_metric",
                  "train_acc", "val_acc", "test_acc", "time_s", "lr"}, ...],
     "final":   {"metric", "train_metric", "val_metric", "test_metric", "best_val_metric",
                 "test_metric_at_best_val", "train_acc", "val_acc", "test_acc", "best_val_acc",
                 "test_acc_at_best_val", "best_epoch" (best: highest, lowest for mse and mae),
                 "mean_epoch_time_s", "timed_epochs", "first_nonfinite_epoch",
                 "stopped_on_nonfinite", "stopped_early", "stopped_at_epoch", "final_lr",
                 "history_mean_epoch_time_s" (resumed runs)},   (times: this invocation's epochs)
     "resumed_from": {"checkpoint", "epoch"[, "changed": {"lr": [there, here], ...}]}}
                                                   (only in a run resumed from a checkpoint)

A resumed run's ``epochs`` include the epochs before the checkpoint, as recorded there. An epoch that
``--eval-every`` did not evaluate has null accuracies; ``lr`` is the learning rate its step used (null in
epochs of checkpoints written before it was recorded). ``stopped_early`` is true when ``--patience`` ended
the run, after epoch ``stopped_at_epoch``.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from gridgnn.config import TrainConfig
from gridgnn.data.graph import Graph
from gridgnn.errors import ConfigError
from gridgnn.files import publish_mode
from gridgnn.train.loop.nonfinite import encode_nonfinite
from gridgnn.train.loop.trainer import TrainResult


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
        "task": graph.task,
        "directed": graph.directed,
        "split": {name: int(getattr(graph, f"{name}_mask").sum()) for name in ("train", "val", "test")},
        "meta": meta,
    }


def build_metrics(config: TrainConfig, graph: Graph, result: TrainResult, resumed_from=None,
                  device: str = "cpu") -> dict:
    """The whole metrics document as a JSON-ready dict; ``device``: the device type rank 0 computed on
    (``"cpu"``, ``"cuda"``); ``resumed_from`` (a `ResumePoint`) adds ``resumed_from: {"checkpoint", "epoch"}``."""
    metrics = {
        "config": config.to_dict(),
        "device": device,
        "dataset": dataset_summary(graph),
        "epochs": [record.to_dict() for record in result.epochs],
        "final": result.final(since=resumed_from.epoch if resumed_from is not None else 0),
    }
    if resumed_from is not None:
        metrics["resumed_from"] = {"checkpoint": str(resumed_from.path), "epoch": resumed_from.epoch}
        if getattr(resumed_from, "changed", None):
            metrics["resumed_from"]["changed"] = resumed_from.changed
    return metrics


def check_writable(path: str | os.PathLike, what: str = "metrics file") -> Path:
    """Fail early (`ConfigError`, one line) when ``path`` cannot be written: no parent folder, a folder, a
    read-only file system. Probes by creating and removing a short-named temporary file beside it
    (`os.access` says yes to root even on read-only and pseudo file systems). ``what`` names the file in
    the message. An existing path that is not
    a regular file (a character device such as /dev/null, a FIFO, a symbolic link) is written through, so
    only its permission is checked (opening a FIFO here would wait for a reader)."""
    target = Path(path)
    where = f"cannot write {what} '{path}'"
    if target.is_dir():
        raise ConfigError(f"{where}: it is a directory")
    if target.parent.exists() and not target.parent.is_dir():
        raise ConfigError(f"{where}: '{target.parent}' is not a folder")
    if not target.parent.is_dir():
        raise ConfigError(f"{where}: folder '{target.parent}' does not exist")
    if _is_special(target):
        if not os.access(target, os.W_OK):
            raise ConfigError(f"{where}: it is not writable")
        return target
    try:
        handle, probe = tempfile.mkstemp(prefix=_TEMP_PREFIX, suffix=".probe", dir=target.parent)
    except OSError as exc:
        raise ConfigError(f"{where}: folder '{target.parent}' is not writable ({exc.strerror})") from None
    os.close(handle)
    Path(probe).unlink(missing_ok=True)
    return target


_TEMP_PREFIX = ".gridgnn-"
"""Temporary files beside an output get a short fixed prefix, so that any legal output name (up to the
file system's 255 bytes) still leaves room for them."""


def _is_special(target: Path) -> bool:
    """True when ``target`` exists and is not a regular file that may be replaced: a device, a FIFO, a
    socket, or a symbolic link (to anything: /dev/stdout is one)."""
    return target.is_symlink() or (target.exists() and not target.is_file() and not target.is_dir())


def write_json_atomic(path: str | os.PathLike, payload: dict) -> None:
    """Write ``payload`` as JSON to ``path`` via a temporary file in the same folder and `os.replace`,
    so readers see either the old file or the complete new one, never a partial write. The file gets the
    mode the user's umask gives new files (not the temporary file's private 0600). A ``path`` that
    exists and is not a regular file (/dev/null, a FIFO, a symbolic link such as /dev/stdout) is written
    through instead: it is never replaced. A failed write (say "No space left on device") raises
    `ConfigError` naming ``path``; non-finite numbers raise ValueError (see `write_metrics`)."""
    text = json.dumps(payload, indent=1, allow_nan=False) + "\n"
    target = Path(path)
    try:
        if _is_special(target):
            with open(target, "w", encoding="utf-8") as stream:
                stream.write(text)
            return
        _replace_with(target, text)
    except OSError as exc:
        raise ConfigError(f"cannot write '{path}': {exc.strerror or exc}") from None


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` as `write_json_atomic` writes JSON: a temporary file and a rename (or
    written through a path that is not a regular file); a failed write raises `ConfigError` naming it."""
    target = Path(path)
    try:
        if _is_special(target):
            with open(target, "wb") as stream:
                stream.write(data)
            return
        _replace_with(target, data)
    except OSError as exc:
        raise ConfigError(f"cannot write '{path}': {exc.strerror or exc}") from None


def _replace_with(target: Path, content: str | bytes) -> None:
    handle, temp_name = tempfile.mkstemp(prefix=_TEMP_PREFIX, suffix=".tmp", dir=target.parent)
    try:
        binary = isinstance(content, bytes)
        with os.fdopen(handle, "wb" if binary else "w", encoding=None if binary else "utf-8") as stream:
            stream.write(content)
        publish_mode(temp_name)
        os.replace(temp_name, target)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise


def write_metrics(path: str | os.PathLike, metrics: dict) -> None:
    """`write_json_atomic` of the metrics document with non-finite numbers encoded as
    `gridgnn.train.loop.nonfinite` documents (null, listed under ``nonfinite``)."""
    write_json_atomic(path, encode_nonfinite(metrics))
