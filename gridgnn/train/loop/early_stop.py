"""The one judge of validation quality: which evaluation improved, the best epoch, and when patience ran out.

Every decision of a run that reads the validation value goes through one `ValidationTracker`: the best epoch
(and the weights kept for it), early stopping (``--patience K``) and the ``plateau`` learning-rate schedule
(`gridgnn.train.loop.lr_schedule`, fed `ValidationTracker.improvements`). It knows only numbers and a direction
(``higher_is_better``: accuracy and ROC-AUC go up, an error goes down), not which metric they are.

Rules: an evaluation improves when its value is strictly better than the best so far (the first epoch
reaching the best value stays the best); NaN never improves. Patience counts *evaluations* (not epochs)
since the last improvement; with ``patience`` K > 0 the run stops once K evaluations in a row did not
improve. `state_dict` / `load_state_dict` carry everything a checkpoint needs (JSON-ready). Not collective:
every rank feeds it the same global value, so every rank decides alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gridgnn.errors import CheckpointError


@dataclass
class ValidationTracker:
    """Best value so far (None before the first evaluation), its epoch (0: none yet), evaluations since it
    (``stale``), improvements so far, and whether patience ran out (``stopped``)."""

    patience: int = 0
    higher_is_better: bool = True
    best: float | None = None
    best_epoch: int = 0
    stale: int = 0
    improvements: int = 0
    evaluations: int = 0

    def better(self, value: float) -> bool:
        """Whether ``value`` beats the best so far (strictly; NaN never does)."""
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return False
        if self.best is None:
            return True
        return value > self.best if self.higher_is_better else value < self.best

    def update(self, value: float, epoch: int) -> bool:
        """Record the evaluation of ``epoch`` with ``value``; returns True when it improved."""
        self.evaluations += 1
        if self.better(value):
            self.best, self.best_epoch, self.stale = float(value), epoch, 0
            self.improvements += 1
            return True
        self.stale += 1
        return False

    @property
    def stopped(self) -> bool:
        """True once ``patience`` > 0 evaluations in a row did not improve."""
        return self.patience > 0 and self.stale >= self.patience

    def state_dict(self) -> dict:
        """The JSON-ready state a checkpoint records (``patience`` is the run's setting, not state)."""
        return {"best": self.best, "best_epoch": self.best_epoch, "stale": self.stale,
                "improvements": self.improvements, "evaluations": self.evaluations,
                "higher_is_better": self.higher_is_better}

    def load_state_dict(self, state: object, where: str = "checkpoint") -> None:
        """Restore `state_dict`'s output (``patience`` stays this run's); `CheckpointError` when malformed."""
        counts = ("best_epoch", "stale", "improvements", "evaluations")
        if not isinstance(state, dict) or not all(
                isinstance(state.get(k), int) and not isinstance(state.get(k), bool) and state[k] >= 0
                for k in counts) or not (state.get("best") is None or _is_number(state["best"])):
            raise CheckpointError(f"{where}: malformed early-stopping state")
        if state.get("higher_is_better", True) != self.higher_is_better:
            raise CheckpointError(f"{where}: its validation metric runs the other way")
        self.best = None if state["best"] is None else float(state["best"])
        for key in counts:
            setattr(self, key, state[key])

    @classmethod
    def replay(cls, values: list[tuple[int, float | None]], patience: int = 0,
               higher_is_better: bool = True) -> ValidationTracker:
        """A tracker fed ``(epoch, value)`` in order, skipping epochs without an evaluation (None): how a
        checkpoint written before trackers were recorded is resumed."""
        tracker = cls(patience=patience, higher_is_better=higher_is_better)
        for epoch, value in values:
            if value is not None:
                tracker.update(value, epoch)
        return tracker


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
