"""A run in this process, watched as it goes: how ``gridgnn train`` trains alone, or as one worker of a grid
(of the run spec its launcher resolved), and hands what happens to its printing.

Rank 0 prints the per-epoch lines (`gridgnn.train.outputs.progress.EpochPrinter`); every other rank runs
quiet. The planner's line (``say``), the grid's ready line (``on_ready``) and the first epoch whose training
loss is NaN or infinite (``on_nonfinite``, once: at that epoch, or after the run when only the history of a
resumed checkpoint holds it) go to the caller, which words and prints them. Collective on the world when the
run is a grid's (as `gridgnn.train.run.training.run_training`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

from gridgnn.config import TrainConfig
from gridgnn.run_spec import ProcessOptions, RunSpec
from gridgnn.train.loop.trainer import EpochRecord
from gridgnn.train.outputs.progress import EpochPrinter
from gridgnn.train.run.base import Run
from gridgnn.train.run.process_group import in_launched_worker
from gridgnn.train.run.training import run_training


@dataclass(frozen=True)
class Watched:
    """A finished run and the configuration it trained: ``--algo auto`` settled for a run alone, and
    ``quiet`` on every rank but 0."""

    config: TrainConfig
    run: Run


def run_watched(config: TrainConfig, process: ProcessOptions, rank0: bool, *,
                on_nonfinite: Callable[[int, float], None], spec: RunSpec | None = None,
                on_ready: Callable[[str, float], None] | None = None,
                say: Callable[[str], None] | None = None) -> Watched:
    """Train ``config`` in this process (``spec``: the run the local launcher resolved for this worker).

    ``on_nonfinite(epoch, loss)``: called once, at the first non-finite training loss. ``on_ready(label,
    seconds)``: called on rank 0 once every rank of a grid has built its blocks (the per-epoch log's first
    interval starts there). ``say(line)``: the planner's reason for a run alone that ``--algo auto`` (or
    another free option) left to it. Neither ``on_ready`` nor ``say`` is called when the run is quiet.
    """
    if spec is None and not in_launched_worker():  # one process: nothing to distribute (a spec is resolved)
        from gridgnn.train.run.resolve import resolve_auto

        config = resolve_auto(config, None, 1, say=None if config.quiet else say)
    if not rank0:
        config = dataclasses.replace(config, quiet=True, progress=False)
        spec = spec and dataclasses.replace(spec, config=config)
    announced: list[int] = []
    printer = EpochPrinter(config, process.log_every_s)

    def on_epoch(record: EpochRecord) -> None:
        printer(record)
        if not math.isfinite(record.loss) and not announced:
            announced.append(record.epoch)
            on_nonfinite(record.epoch, record.loss)

    def ready(label: str, seconds: float) -> None:
        on_ready(label, seconds)
        printer.restart()  # the log's first interval starts at the grid's ready line

    run = run_training(config, on_epoch=on_epoch, timeout_s=process.timeout_s,
                       on_ready=None if config.quiet or on_ready is None else ready, spec=spec, process=process)
    first = run.result.first_nonfinite_epoch
    if rank0 and first is not None and not announced:  # found in the history of a resumed checkpoint
        on_nonfinite(first, run.result.epochs[first - 1].loss)
    return Watched(config, run)
