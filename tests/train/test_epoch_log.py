"""A run whose stdout is not a terminal prints an epoch line now and then (issue 38, item 2): at least
`LOG_EVERY_S` seconds and at least 5 % of the epochs apart, whichever is rarer; ``--quiet`` silences it."""

from __future__ import annotations

import os
import subprocess
import sys

from model_helpers import REPO_ROOT

from gridgnn.cli.main import main
from gridgnn.train.outputs.progress import LOG_EVERY_S, EpochLog


def _logged(epochs: int, seconds_per_epoch: float, every_s: float = LOG_EVERY_S) -> list[int]:
    now = [0.0]
    log = EpochLog(epochs, every_s, clock=lambda: now[0])
    printed = []
    for epoch in range(1, epochs + 1):
        now[0] += seconds_per_epoch
        if log.due(epoch):
            printed.append(epoch)
    return printed


def test_the_rarer_of_five_seconds_and_five_percent_wins():
    assert _logged(200, 0.125) == list(range(40, 201, 40))  # fast: 5 s is 40 epochs, rarer than 10
    assert _logged(200, 1.0) == list(range(10, 201, 10))  # slow: 5 % (10 epochs) is 10 s, rarer than 5 s
    assert _logged(200, 0.001) == []  # a run shorter than 5 s prints no epoch line
    assert _logged(7, 10.0) == list(range(1, 8))  # 5 % of 7 epochs rounds up to one
    assert _logged(40, 0.0, every_s=0) == list(range(2, 41, 2))


def _train(*flags: str) -> subprocess.CompletedProcess:
    """``gridgnn train`` with stdout a pipe, as under Slurm or ``| tee``."""
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = str(REPO_ROOT)
    return subprocess.run([sys.executable, "-m", "gridgnn", "train", "--dataset", "csbm:nodes=300", *flags],
                          capture_output=True, text=True, env=env, timeout=600)  # pipes


def test_a_piped_run_logs_every_five_percent_and_quiet_silences_it():
    done = _train("--epochs", "40", "--log-every", "0")
    assert done.returncode == 0, done.stderr
    epochs = [line for line in done.stdout.splitlines() if line.startswith("epoch ")]
    assert [line.split()[1] for line in epochs] == [f"{e}/40" for e in range(2, 41, 2)], done.stdout
    assert all(" loss " in line and " val " in line and line.endswith(" ms") for line in epochs)
    assert "best val" in done.stdout  # the summary follows
    quiet = _train("--epochs", "40", "--log-every", "0", "--quiet")
    assert quiet.returncode == 0 and quiet.stdout == "" and quiet.stderr == ""


def test_a_bad_log_interval_is_one_line(capsys):
    assert main(["train", "--log-every", "-1"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == ["gridgnn: error: argument --log-every: must be a number of seconds, "
                                              "0 or more, got -1"]
