"""The checkpoint policy of a run: where to resume from, when to save, and what each checkpoint records.

A run with ``checkpoint_dir`` saves after every ``checkpoint_every``-th epoch, after the last one and after
the one where ``--patience`` stopped it. It
resumes from the newest checkpoint there when asked (``resume``) or, by itself, when torchrun restarted the
job (``TORCHELASTIC_RESTART_COUNT`` > 0, i.e. ``torchrun --max-restarts N``). Resuming restores the weights,
Adam's state, the RNG state, the history of earlier epochs, the validation tracker (best epoch, patience
counter) and the learning-rate schedule's state, so the finished run has the same weights and
metrics as one that was never interrupted. Storage and atomicity are `gridgnn.train.checkpoint.store`, verification
`gridgnn.train.checkpoint.manifest`, what a checkpoint belongs to `gridgnn.train.checkpoint.fingerprint`.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from gridgnn.config import CheckpointOptions, TrainConfig
from gridgnn.data.graph import Graph
from gridgnn.errors import CheckpointError, ConfigError
from gridgnn.grid.peer_failures import peer_failures_explained
from gridgnn.limits import zip_inflation_problem
from gridgnn.safe_files import atomic_write
from gridgnn.train.checkpoint.fingerprint import changed_on_resume, check_compatible, run_fingerprint
from gridgnn.train.checkpoint.manifest import file_sha256, read_manifest
from gridgnn.train.checkpoint.naming import latest_checkpoint, list_checkpoints
from gridgnn.train.loop.early_stop import ValidationTracker
from gridgnn.train.loop.trainer import EpochRecord, Trainer, TrainResult


def _store():
    """`gridgnn.train.checkpoint.store` (saving and loading), imported on first use: it loads
    ``torch.distributed.checkpoint`` (about a second per process), which a run without ``checkpoint_dir``
    never needs."""
    from gridgnn.train.checkpoint import store

    return store


@dataclass
class ResumePoint:
    """What a run continues from: the checkpoint, the epoch it was taken after, the epochs trained until
    then (``result``, which `Trainer.fit` goes on extending) and their communication."""

    path: Path
    epoch: int
    result: TrainResult
    rng_state: torch.Tensor
    comm: list[dict] | None
    changed: dict[str, list] | None = None
    """``{"lr": [there, here], "weight_decay": [...]}``: what this run changed on resuming (None: nothing)."""


def restarted_by_torchrun() -> bool:
    """True in a worker that torchrun started again after a failure (``--max-restarts``)."""
    return int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") or 0) > 0


def check_checkpoint_dir(checkpoints: CheckpointOptions) -> None:
    """Fail early (`ConfigError`, one line naming ``--checkpoint-dir``) when the ``checkpoint_dir`` of
    ``checkpoints`` (a run's checkpoint section, or its whole `TrainConfig`) cannot hold checkpoints: a file, no
    writable folder to create it in, or a folder the system refuses to create (as under /proc); so a bad path
    fails in a second, not at the first save. Creates the folder."""
    if checkpoints.checkpoint_dir is None:
        return
    target = Path(checkpoints.checkpoint_dir)
    where = f"--checkpoint-dir: cannot keep checkpoints in '{target}'"
    if target.exists() and not target.is_dir():
        raise ConfigError(f"{where}: it is not a folder")
    existing = target
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"{where}: '{existing}' is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{where}: '{existing}' is not writable")
    try:  # what the first save would do (the lock made it already where it could): its failure, named now
        target.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConfigError(f"{where}: {error.strerror or error}") from None
    found = list_checkpoints(target)
    if found and not (checkpoints.resume or restarted_by_torchrun()):
        raise ConfigError(f"{where}: it holds checkpoints of another run (newest: epoch {found[-1][0]}); pass "
                          "--resume to continue that run, or choose an empty folder")


def checkpoint_to_resume(checkpoints: CheckpointOptions) -> Path | None:
    """The checkpoint a run with these checkpoint options (its section, or its whole `TrainConfig`) continues
    from: the newest in ``checkpoint_dir`` when resuming is asked for (or torchrun restarted the job), after
    verifying its files; None to start from epoch 1.

    Raises `CheckpointError` when that checkpoint is damaged: resuming from an older one silently would
    repeat epochs the user believes were saved, so the damaged folder has to be removed by hand.
    """
    if checkpoints.checkpoint_dir is None or not (checkpoints.resume or restarted_by_torchrun()):
        return None
    path = latest_checkpoint(checkpoints.checkpoint_dir)
    if path is not None:
        read_manifest(path)
    return path


def restore(trainer: Trainer, config: TrainConfig, graph: Graph, path: Path) -> ResumePoint:
    """Check that checkpoint ``path`` belongs to this run and load it into ``trainer``.

    Collective on the world when a process group exists (every rank loads the replicated state).
    """
    manifest = read_manifest(path)
    current = run_fingerprint(config, graph)
    check_compatible(manifest, current, path)
    if manifest["epoch"] > config.epochs:
        raise CheckpointError(f"checkpoint '{path}' is at epoch {manifest['epoch']}, past --epochs "
                              f"{config.epochs}; ask for at least {manifest['epoch']} epochs")
    history = manifest["history"]
    try:
        records = [EpochRecord.from_dict(record) for record in history["epochs"]]
    except TypeError as exc:
        raise CheckpointError(f"checkpoint '{path}': malformed epoch history ({exc})") from None
    changed = changed_on_resume(manifest, current)
    if config.lr_schedule != "none" and "lr" in changed:
        raise CheckpointError(f"checkpoint '{path}': --lr cannot change on resuming a run with --lr-schedule "
                              f"{config.lr_schedule} (the schedule goes on from its saved rate); keep --lr "
                              f"{changed['lr'][0]:g}")
    _, rng_state = _store().load_checkpoint(path, trainer.model, trainer.optimizer, manifest)
    for group in trainer.optimizer.param_groups:  # the saved state carries the old values: this run's win
        group["lr"], group["weight_decay"] = config.lr, config.weight_decay
    comm = history.get("comm")
    result = TrainResult(records, history["best_epoch"])
    restore_loop_state(trainer, history, records, f"checkpoint '{path}'")
    result.best_state = read_best_weights(config.checkpoint_dir, result.best_epoch, manifest.get("best_weights"),
                                          path)
    return ResumePoint(path, manifest["epoch"], result, rng_state, comm if isinstance(comm, list) else None,
                       {**changed, **precision_change(manifest, config)} or None)


def precision_change(manifest: dict, config: TrainConfig) -> dict[str, list]:
    """``{"comm_precision": [there, here]}`` when the checkpoint's run moved activations in another
    ``--comm-precision`` than this one (allowed: it changes rounding, not the model; a checkpoint written
    before the option existed ran fp32); else empty."""
    there = manifest.get("config", {}).get("comm_precision", "fp32")
    return {} if there == config.comm_precision else {"comm_precision": [there, config.comm_precision]}


def loop_state(trainer: Trainer) -> dict:
    """What a checkpoint's ``history`` records of the loop besides the epochs: ``early_stop`` (the
    validation tracker: best value and epoch, evaluations since) and ``lr_schedule`` (the scheduler's state,
    null without a schedule)."""
    return {"early_stop": trainer.tracker.state_dict(), "lr_schedule": trainer.schedule.state_dict()}


def restore_loop_state(trainer: Trainer, history: dict, records: list[EpochRecord], where: str) -> None:
    """Load `loop_state`'s entries of ``history`` into ``trainer`` (after the optimizer: the schedule sets the
    rate it had reached). A checkpoint written before they were recorded had no schedule and evaluated every
    epoch: its tracker is replayed from the records."""
    if "early_stop" in history:
        trainer.tracker.load_state_dict(history["early_stop"], where)
    else:
        trainer.tracker = ValidationTracker.replay([(r.epoch, r.val_acc) for r in records],
                                                   trainer.tracker.patience, trainer.tracker.higher_is_better)
    if trainer.schedule.scheduler is not None:
        trainer.schedule.load_state_dict(history.get("lr_schedule"), where)


BEST_WEIGHTS = "best-weights.pt"
"""``DIR/best-weights.pt``: the best-validation weights as of the newest checkpoint (a model-state file read
with ``weights_only=True``), so that ``--weights best`` survives a resume."""


def save_best_weights(directory: str, result: TrainResult) -> None:
    """Write ``result.best_state`` with its epoch atomically into ``directory`` (rank 0). Not collective."""
    if result.best_state is None or (dist.is_initialized() and dist.get_rank() != 0):
        return
    target = Path(directory) / BEST_WEIGHTS
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(target, "best-validation weights") as stream:  # never through a planted link
        torch.save({"epoch": result.best_epoch, "state": result.best_state}, stream)


def best_weights_record(directory: str, epoch: int | None) -> dict | None:
    """What a checkpoint's manifest records of ``DIR/best-weights.pt`` as just written (rank 0): its best epoch,
    size and SHA-256; None without such a file. Not collective."""
    path = Path(directory) / BEST_WEIGHTS
    if epoch is None or not path.is_file():
        return None
    return {"epoch": epoch, "bytes": path.stat().st_size, "sha256": file_sha256(path)}


def read_best_weights(directory: str | None, epoch: int, record: object = None,
                      checkpoint: Path | None = None) -> dict | None:
    """The best-validation weights saved for ``epoch``, or None (no file; a file a later save wrote for another
    best epoch, when a crash kept that save from completing; unreadable without a record).

    ``record`` (the checkpoint manifest's ``best_weights``, `best_weights_record`): a file for that epoch
    whose size or SHA-256 differs was altered, and is refused (`CheckpointError`) as any file of a checkpoint.
    """
    path = Path(directory) / BEST_WEIGHTS if directory is not None else None
    if path is None or not path.is_file():
        return None
    if record is None:  # a checkpoint written before best weights were recorded
        return _best_state(path, epoch)
    if not isinstance(record, dict) or record.get("epoch") != epoch:
        return None
    if path.stat().st_size == record.get("bytes") and file_sha256(path) == record.get("sha256"):
        return _best_state(path, epoch)
    if _best_state(path, epoch) is not None:  # weights_only: nothing runs; another epoch's file is a later save's
        raise CheckpointError(f"checkpoint '{checkpoint}' is damaged: {path} does not match the size and SHA-256 "
                              f"its manifest records (altered); remove it to resume without the best weights")
    return None


def _best_state(path: Path, epoch: int) -> dict | None:
    """The state of best-weights file ``path`` when it holds ``epoch``'s weights, else None."""
    try:
        with zipfile.ZipFile(path) as archive:
            if zip_inflation_problem(archive) is not None:
                return None
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # noqa: BLE001 - a damaged copy only costs the best weights, which the error then names
        return None
    if not isinstance(saved, dict) or saved.get("epoch") != epoch or not isinstance(saved.get("state"), dict):
        return None
    return saved["state"]


class EpochSaver:
    """``after_epoch`` hook of `Trainer.fit`: saves a checkpoint on schedule (collective on the world).

    ``comm_so_far()`` returns the per-epoch communication of every epoch so far in the metrics layout (on
    rank 0; None elsewhere or for a local run); it is recorded so that a resumed run reports it too.
    """

    def __init__(self, config: TrainConfig, graph: Graph, trainer: Trainer, grid: dict,
                 comm_so_far: Callable[[], list[dict] | None] = lambda: None):
        self.config, self.trainer, self.grid, self.comm_so_far = config, trainer, grid, comm_so_far
        self.fingerprint = run_fingerprint(config, graph)

    def __call__(self, epoch: int, result: TrainResult) -> None:
        if epoch % self.config.checkpoint_every and epoch != self.config.epochs and not result.stopped_early:
            return
        self.trainer.gather_parameters(optimizer_state=True)  # a checkpoint holds whole weights and moments
        self.trainer.gather_best_state(result)  # and whole best weights
        history = {"epochs": [record.to_dict() for record in result.epochs], "best_epoch": result.best_epoch,
                   "comm": self.comm_so_far(), **loop_state(self.trainer)}
        manifest = {"fingerprint": self.fingerprint, "config": self.config.to_dict(), "grid": self.grid,
                    "history": history}
        save_best_weights(self.config.checkpoint_dir, result)  # first: a checkpoint never outruns it
        if not dist.is_initialized() or dist.get_rank() == 0:
            manifest["best_weights"] = best_weights_record(self.config.checkpoint_dir,
                                                           result.best_epoch if result.best_state else None)
        _store().save_checkpoint(self.config.checkpoint_dir, epoch, self.trainer.model, self.trainer.optimizer,
                                 manifest, self.config.keep_checkpoints)


def _agreed(choose: Callable[[TrainConfig], Path | None], config: TrainConfig) -> Path | None:
    """``choose(config)`` decided on rank 0 and shared with every rank (collective on the world when a
    process group exists), so that all ranks load the same checkpoint or none, even when their views of a
    shared file system differ for a moment; a `CheckpointError` there is raised on every rank."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return choose(config)
    answer: list = [None, None]
    if dist.get_rank() == 0:
        try:
            answer = [choose(config), None]
        except CheckpointError as error:
            answer = [None, str(error)]
    with peer_failures_explained("agreeing on the checkpoint to resume from"):
        dist.broadcast_object_list(answer, src=0)
    if answer[1] is not None:
        raise CheckpointError(answer[1])
    return None if answer[0] is None else Path(answer[0])


def fit_resumable(trainer: Trainer, config: TrainConfig, graph: Graph,
                  on_epoch: Callable[[EpochRecord], None] | None, *, grid: dict,
                  comm_so_far: Callable[[ResumePoint | None], list[dict] | None] | None = None,
                  on_start: Callable[[], None] | None = None) -> tuple[TrainResult, ResumePoint | None]:
    """`Trainer.fit` with the checkpoint policy of ``config``: resume when asked, save on schedule.

    ``grid`` (algorithm, shape, P) is recorded in each checkpoint; ``comm_so_far(point)`` gives the
    communication history to record (see `EpochSaver`); ``on_start()`` runs once the checkpoint and initial
    weights are loaded, just before the first epoch. Collective on the world in a distributed run.
    Returns the result (earlier epochs included) and the resume point, if any.
    """
    path = _agreed(checkpoint_to_resume, config)
    point = restore(trainer, config, graph, path) if path is not None else None
    if point is None and config.init_from is not None:
        from gridgnn.train.checkpoint.init_from import load_initial_weights

        load_initial_weights(trainer.model, config, graph.num_features, graph.num_classes)
    saver = None
    if config.checkpoint_dir is not None:
        history = (lambda: comm_so_far(point)) if comm_so_far is not None else (lambda: None)
        saver = EpochSaver(config, graph, trainer, grid, history)
    if on_start is not None:
        on_start()
    result = trainer.fit(on_epoch, start=point.result if point else None,
                         rng_state=point.rng_state if point else None, after_epoch=saver)
    return result, point
