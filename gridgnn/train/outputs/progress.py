"""What a run prints per epoch on rank 0: one line per epoch on a terminal (or with ``--progress``), and when
stdout is not a terminal (Slurm, nohup, ``| tee``) or ``CI`` is set, a log line now and then, so that a log
shows the run alive; ``--quiet`` prints neither.

The log's rule (`EpochLog`): a line once at least `LOG_EVERY_S` seconds *and* at least `LOG_EVERY_FRACTION`
of the epochs have passed since the previous line (or the start), whichever is rarer: a slow run prints
every 5 % of its epochs, a fast one every 5 s, and no run prints more than 20 lines for its epochs.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from gridgnn.config import OutputOptions, TrainConfig
from gridgnn.limits import human_bytes
from gridgnn.run_spec import ProcessOptions

if TYPE_CHECKING:
    from gridgnn.train.loop.trainer import EpochRecord

LOG_EVERY_S = ProcessOptions.log_every_s
"""The fewest seconds between two log lines by default (``gridgnn train --log-every``): 5."""
LOG_EVERY_FRACTION = 0.05
"""The smallest share of the epochs between two log lines."""


def show_progress(outputs: OutputOptions) -> bool:
    """Per-epoch lines (``outputs``: a run's output section, or its whole `TrainConfig`): forced by
    ``progress``, off when quiet, else only on a terminal outside CI."""
    if outputs.progress is not None:
        return outputs.progress
    return not outputs.quiet and sys.stdout.isatty() and not os.environ.get("CI")


def show_log(outputs: OutputOptions) -> bool:
    """The occasional log lines of `EpochLog`: when neither ``quiet`` nor per-epoch lines are on."""
    return not outputs.quiet and not show_progress(outputs)


def format_epoch(record: EpochRecord, epochs: int) -> str:
    """``epoch  E/N  loss  train  val  test  ms`` (the per-epoch line; the splits' values of the run's metric,
    accuracy for a multiclass task; an epoch ``--eval-every`` did not evaluate shows ``-``); a record of a grid
    epoch that carries rank 0's bytes (``comm_bytes``) names them too."""
    width = len(str(epochs))
    line = (f"epoch {record.epoch:>{width}}/{epochs}  loss {record.loss:.4f}  train {_value(record.train_metric)}"
            f"  val {_value(record.val_metric)}  test {_value(record.test_metric)}  {1000 * record.time_s:.1f} ms")
    if record.comm_bytes is not None:
        line += f"  comm {human_bytes(record.comm_bytes)} (rank 0)"
    return line


def _value(metric: float | None) -> str:
    """A split's metric on the epoch line (``-`` for an epoch that was not evaluated)."""
    return "-" if metric is None else f"{metric:.4f}"


class EpochLog:
    """Decides which epochs a log prints (see the module docstring): ``due(epoch)`` is True once at least
    ``every_s`` seconds of ``clock`` and at least ``ceil(fraction * epochs)`` epochs (at least 1) have passed
    since the last printed epoch (at first: since this object was made, epoch 0)."""

    def __init__(self, epochs: int, every_s: float = LOG_EVERY_S, fraction: float = LOG_EVERY_FRACTION,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.every_epochs = max(1, math.ceil(fraction * epochs))
        self.every_s = every_s
        self.clock = clock
        self.last_epoch = 0
        self.last_time = clock()

    def due(self, epoch: int) -> bool:
        """Whether ``epoch`` gets a line; when it does, the next one is counted from it."""
        now = self.clock()
        if epoch - self.last_epoch < self.every_epochs or now - self.last_time < self.every_s:
            return False
        self.last_epoch, self.last_time = epoch, now
        return True


class EpochPrinter:
    """The per-epoch callback that prints what ``config`` asks on stdout (rank 0): every epoch with
    `show_progress`, the `EpochLog`'s epochs with `show_log`, nothing when quiet. `restart` counts the log's
    interval from now (after another line, e.g. the grid's ``ready``)."""

    def __init__(self, config: TrainConfig, log_every_s: float = LOG_EVERY_S) -> None:
        self.epochs = config.epochs
        self.every = show_progress(config)
        self.log_every_s = log_every_s
        self.log = EpochLog(config.epochs, log_every_s) if show_log(config) else None

    def restart(self) -> None:
        if self.log is not None:
            self.log = EpochLog(self.epochs, self.log_every_s)

    def __call__(self, record: EpochRecord) -> None:
        if self.every or (self.log is not None and self.log.due(record.epoch)):
            print(format_epoch(record, self.epochs), flush=True)
