"""What a rank's collectives moved: one `CommRecord` per collective and their `CommTotals` (pure data, no
torch: the cost model uses the same `PHASES`). Not collective.

Time: each record has ``seconds`` (from issue to completion) and ``exposed_seconds`` (how long the caller was
blocked by it). They are equal for a blocking collective; for one issued asynchronously and overlapped with
computation (`gridgnn.grid.overlap`), the difference is the hidden part. Bytes follow the convention of
`gridgnn.grid.comm`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PHASES = ("spmm_forward", "spmm_backward", "dense", "weight_grad", "loss", "other")
"""The phase tags of a training step, in report order (`gridgnn.grid.comm.Communicator.phase`)."""

WIRE_PHASES = ("spmm_forward", "spmm_backward", "dense")
"""The phases whose float32 payloads (activations, activation gradients, attention scores) travel in the run's
``--comm-precision`` (`gridgnn.grid.wire`); ``weight_grad``, ``loss`` and ``other`` (set-up, index sets, Â
panels) always travel as they are."""


@dataclass(frozen=True)
class CommRecord:
    """One collective as seen by this rank."""

    op: str
    axis: str
    group_size: int
    bytes: int
    seconds: float
    phase: str
    exposed_seconds: float | None = None

    @property
    def blocked_seconds(self) -> float:
        """Seconds the caller waited for this collective (all of it unless it was overlapped)."""
        return self.seconds if self.exposed_seconds is None else self.exposed_seconds


@dataclass
class CommTotals:
    """Sums over a list of records: bytes and calls overall and per phase."""

    bytes: int = 0
    calls: int = 0
    seconds: float = 0.0
    exposed_seconds: float = 0.0
    bytes_by_phase: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PHASES, 0))
    calls_by_phase: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PHASES, 0))

    @classmethod
    def of(cls, records: list[CommRecord]) -> CommTotals:
        totals = cls()
        for rec in records:
            totals.bytes += rec.bytes
            totals.calls += 1
            totals.seconds += rec.seconds
            totals.exposed_seconds += rec.blocked_seconds
            totals.bytes_by_phase[rec.phase] += rec.bytes
            totals.calls_by_phase[rec.phase] += 1
        return totals
