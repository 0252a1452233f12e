"""``--tensorboard DIR``: a run's scalars per epoch as TensorBoard event files (rank 0 writes them).

Tags (step = the epoch): ``loss``, ``accuracy/train``, ``accuracy/val``, ``accuracy/test`` (epochs that were
evaluated), ``lr``, ``time/step_s``,
written as each epoch ends (flushed at most every `FLUSH_S` seconds, so TensorBoard follows a running job);
on a grid, when the run ends, each epoch's ``time/comm_s``, ``time/exposed_comm_s``, ``time/compute_s`` (max
over ranks), ``bytes/step_max_rank`` (bytes the busiest rank received in the training step),
``bytes/step_mean_rank``, ``bytes/predicted_max_rank`` (the planner's figure for it), ``bytes/eval_max_rank``
and ``bytes/<phase>`` (max over ranks): the numbers of the metrics file's epochs. A resumed run logs the
epochs it runs. Needs the ``tensorboard`` package (the extra of the same name); without it `check_tensorboard`
says so in one line. Not collective.
"""

from __future__ import annotations

import importlib.util
import math
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from gridgnn.errors import ConfigError

TENSORBOARD_EXTRA = "pip install 'gridgnn[tensorboard]'"
FLUSH_S = 2.0
_RECORD_TAGS = (("loss", "loss"), ("train_acc", "accuracy/train"), ("val_acc", "accuracy/val"),
                ("test_acc", "accuracy/test"), ("time_s", "time/step_s"))
_TIME_TAGS = (("comm_time_s", "time/comm_s"), ("exposed_comm_time_s", "time/exposed_comm_s"),
              ("compute_time_s", "time/compute_s"))


def check_tensorboard(folder: str) -> None:
    """Raise `ConfigError` (one line naming ``--tensorboard``) when the tensorboard package is missing or
    ``folder`` cannot be created or written; creates ``folder`` when missing."""
    if importlib.util.find_spec("tensorboard") is None:
        raise ConfigError(f"--tensorboard needs the tensorboard package, which is not installed: {TENSORBOARD_EXTRA}")
    path = Path(folder)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"--tensorboard '{folder}' is not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        handle, probe = tempfile.mkstemp(prefix=".gridgnn-", suffix=".probe", dir=path)
    except OSError as exc:
        raise ConfigError(f"--tensorboard: cannot write into folder '{folder}' ({exc.strerror or exc})") from None
    os.close(handle)
    Path(probe).unlink(missing_ok=True)


def record_scalars(record: dict) -> dict[str, float]:
    """Tag -> value of one epoch record (`EpochRecord.to_dict` or a metrics file's epoch): loss, accuracies
    (``metric/train`` ... for a task scored by another metric) and step time (None, a non-finite value in a
    file or an epoch not evaluated, reads NaN)."""
    scalars = {tag: math.nan if record.get(key) is None else float(record[key]) for key, tag in _RECORD_TAGS
               if key in record}
    if "train_acc" not in record and "train_metric" in record:  # another task's metric: metric/<split>
        scalars.update({f"metric/{split}": math.nan if record[f"{split}_metric"] is None
                        else float(record[f"{split}_metric"]) for split in ("train", "val", "test")})
    return scalars


def comm_scalars(epoch: dict) -> dict[str, float]:
    """Tag -> value of a metrics file epoch's communication (empty for an epoch of a one-process run)."""
    comm = epoch.get("comm")
    if not isinstance(comm, dict):
        return {}
    scalars = {tag: float(epoch[key]) for key, tag in _TIME_TAGS if epoch.get(key) is not None}
    scalars["bytes/step_max_rank"] = float(max(comm["bytes"]))
    scalars["bytes/step_mean_rank"] = math.fsum(comm["bytes"]) / len(comm["bytes"])
    if "predicted_bytes" in comm:
        scalars["bytes/predicted_max_rank"] = float(max(comm["predicted_bytes"]))
    if "eval_bytes" in comm:
        scalars["bytes/eval_max_rank"] = float(max(comm["eval_bytes"]))
    scalars.update({f"bytes/{phase}": float(max(values)) for phase, values in comm["by_phase"].items()})
    return scalars


class TensorBoardLog:
    """Rank 0's event writer for ``folder`` (other ranks make none), opened before training: importing
    tensorboard takes a second or two, which between two epochs would hold the other ranks in their next
    collective and swell that epoch's communication time."""

    def __init__(self, folder: str):
        from torch.utils.tensorboard import SummaryWriter

        self.folder = folder
        self._writer = SummaryWriter(log_dir=folder, flush_secs=3600)
        self._flushed = time.monotonic()
        self.epochs: list[int] = []

    def epoch(self, record: dict) -> None:
        """Log one epoch's record (as `record_scalars` reads it) at step ``record["epoch"]``: no accuracies for
        an epoch ``--eval-every`` did not evaluate; its learning rate as ``lr`` when the record has one."""
        scalars = record_scalars(record)
        if record.get("val_acc") is None:
            scalars = {tag: value for tag, value in scalars.items() if not tag.startswith("accuracy/")}
        if record.get("lr") is not None:
            scalars["lr"] = float(record["lr"])
        self._add(record["epoch"], scalars)
        self.epochs.append(record["epoch"])
        if time.monotonic() - self._flushed >= FLUSH_S:
            self._writer.flush()
            self._flushed = time.monotonic()

    def finish(self, metrics: dict | None) -> None:
        """Log the communication of the epochs logged here from the run's metrics document, then close."""
        if self._writer is None:  # closed already
            return
        if metrics is not None:
            logged = set(self.epochs)
            for epoch in metrics["epochs"]:
                if epoch["epoch"] in logged:
                    self._add(epoch["epoch"], comm_scalars(epoch))
        self._writer.close()
        self._writer = None

    def _add(self, step: int, scalars: dict[str, float]) -> None:
        for tag, value in scalars.items():
            self._writer.add_scalar(tag, value, global_step=step)

    def wrap(self, on_epoch: Callable | None) -> Callable:
        """An epoch callback that logs each `EpochRecord` and then calls ``on_epoch`` (when given)."""
        def logged(record) -> None:
            self.epoch(record.to_dict())
            if on_epoch is not None:
                on_epoch(record)
        return logged
