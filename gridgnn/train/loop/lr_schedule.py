"""``--lr-schedule``: the learning rate of each epoch, by `torch.optim.lr_scheduler`, stepped once per epoch.

===========  ================================================================================================
``none``     ``--lr`` throughout
``cosine``   `CosineAnnealingLR` from ``--lr`` down to ``--lr-min`` (default 0) over ``--epochs`` epochs
``step``     `StepLR`: ``--lr`` times ``--lr-gamma`` (default 0.1) after every ``--lr-step-size`` epochs
             (default 30)
``plateau``  `ReduceLROnPlateau`: ``--lr`` times ``--lr-gamma`` (default 0.1) once more than
             ``--lr-plateau-patience`` evaluations (default 10) in a row did not improve the validation
             value, never below ``--lr-min`` (default 0); stepped only after an evaluation
===========  ================================================================================================

An epoch trains with the rate the schedule gives it (the one its record's ``lr`` holds), then the schedule
steps. The plateau schedule does not judge the validation value itself: it is fed the number of improvements
`gridgnn.train.loop.early_stop.ValidationTracker` has counted (compared exactly, ``mode="max"``, threshold 0), so
"improved" means the same thing for the best epoch, ``--patience`` and the learning rate, whatever the
metric's direction. Every rank steps the same schedule with the same global values, so a grid trains exactly
the run of one process. A checkpoint records `LRSchedule.state_dict`; `LRSchedule.load_state_dict` restores it and the
rate reached (the resumed run keeps the schedule it started with, its cosine period included). Not collective.
"""

from __future__ import annotations

from torch.optim import Optimizer, lr_scheduler

from gridgnn.config import LR_DEFAULTS, TrainConfig
from gridgnn.errors import CheckpointError
from gridgnn.train.loop.early_stop import ValidationTracker


class LRSchedule:
    """The schedule of ``config.lr_schedule`` on ``optimizer`` (one parameter group); ``scheduler`` is None
    for ``none``."""

    def __init__(self, config: TrainConfig, optimizer: Optimizer):
        self.kind, self.optimizer = config.lr_schedule, optimizer
        gamma, lr_min, step, patience = (LR_DEFAULTS[name] if getattr(config, name) is None else getattr(config, name)
                                         for name in ("lr_gamma", "lr_min", "lr_step_size", "lr_plateau_patience"))
        self.scheduler = None
        if self.kind == "cosine":
            self.scheduler = lr_scheduler.CosineAnnealingLR(optimizer, T_max=config.epochs, eta_min=lr_min)
        elif self.kind == "step":
            self.scheduler = lr_scheduler.StepLR(optimizer, step_size=step, gamma=gamma)
        elif self.kind == "plateau":
            self.scheduler = lr_scheduler.ReduceLROnPlateau(optimizer, mode="max", factor=gamma, patience=patience,
                                                            threshold=0.0, threshold_mode="abs", min_lr=lr_min)

    @property
    def lr(self) -> float:
        """The learning rate the next step uses."""
        return float(self.optimizer.param_groups[0]["lr"])

    def step(self, evaluated: bool, tracker: ValidationTracker) -> None:
        """Step after an epoch: every epoch for ``cosine`` and ``step``; for ``plateau`` only after an
        evaluation, fed ``tracker.improvements``."""
        if self.scheduler is None:
            return
        if self.kind == "plateau":
            if evaluated:
                self.scheduler.step(tracker.improvements)
            return
        self.scheduler.step()

    def state_dict(self) -> dict | None:
        """The scheduler's JSON-ready state (None for ``none``)."""
        return None if self.scheduler is None else dict(self.scheduler.state_dict())

    def load_state_dict(self, state: object, where: str = "checkpoint") -> None:
        """Restore `state_dict`'s output and set the optimizer's rate to the one it had then; `CheckpointError`
        when the state is missing, is another schedule's, or holds an entry this schedule does not have or of
        another kind (it is data from disk: `gridgnn.train.checkpoint.manifest`). Entries a newer torch added
        keep their fresh values."""
        if self.scheduler is None:
            return
        fresh = self.scheduler.state_dict()
        last = state.get("_last_lr") if isinstance(state, dict) else None
        if not isinstance(last, list) or len(last) != 1 or not _same_kind(last[0], 0.0) \
                or not isinstance(state.get("last_epoch"), int) \
                or not all(key in fresh and _same_kind(value, fresh[key]) for key, value in state.items()):
            raise CheckpointError(f"{where}: no valid state of the {self.kind} learning-rate schedule")
        self.scheduler.load_state_dict(state)
        for group in self.optimizer.param_groups:
            group["lr"] = float(last[0])


def _same_kind(value: object, like: object) -> bool:
    """Whether ``value`` (from a manifest) may stand where a scheduler holds ``like``: a bool for a bool, a
    number for a number, a string for a string, a list of such for a list."""
    if isinstance(like, bool) or isinstance(value, bool):
        return isinstance(like, bool) and isinstance(value, bool)
    if isinstance(like, (int, float)):
        return isinstance(value, (int, float))
    if isinstance(like, list):
        return isinstance(value, list) and all(_same_kind(v, like[0] if like else 0.0) for v in value)
    return type(value) is type(like)
