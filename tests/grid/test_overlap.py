"""The overlap scheduler on its own (`gridgnn.grid.overlap`, no process group): with overlap the next stage is
issued before the current one is handed over and one collective stays in flight; without, each waits at once.
The same collectives run in the same order either way."""

from __future__ import annotations

from gridgnn.grid.overlap import InFlight, pipeline


class _Done:
    """A stand-in for a `Pending`: records when it is waited for."""

    def __init__(self, log: list, name: str):
        self.log, self.name = log, name

    def wait(self) -> str:
        self.log.append(f"wait {self.name}")
        return self.name


def _run(overlap: bool) -> tuple[list, list]:
    log, seen = [], []

    def issue(stage):
        log.append(f"issue {stage}")
        return (_Done(log, f"{stage}a"), None) if stage == 1 else _Done(log, str(stage))

    for stage, results in pipeline(range(3), issue, overlap):
        log.append(f"compute {stage}")
        seen.append(results)
    with InFlight(overlap) as flight:
        for name in ("r0", "r1", "r2"):
            flight.add(_Done(log, name))
            log.append(f"after add {name}")
    return log, seen


def test_pipeline_issues_one_stage_ahead_only_with_overlap():
    log, seen = _run(overlap=True)
    assert seen == ["0", ("1a", None), "2"]
    assert log[:9] == ["issue 0", "wait 0", "issue 1", "compute 0", "wait 1a", "issue 2", "compute 1", "wait 2",
                       "compute 2"]
    assert log[9:] == ["after add r0", "wait r0", "after add r1", "wait r1", "after add r2", "wait r2"]
    plain, plain_seen = _run(overlap=False)
    assert plain_seen == seen
    assert plain[:9] == ["issue 0", "wait 0", "compute 0", "issue 1", "wait 1a", "compute 1", "issue 2", "wait 2",
                         "compute 2"]
    assert plain[9:] == ["wait r0", "after add r0", "wait r1", "after add r1", "wait r2", "after add r2"]
    assert [e for e in log if e.startswith("issue")] == [e for e in plain if e.startswith("issue")]
