"""A rank that reports a lost peer holds back SIGTERM (`gridgnn.grid.liveness.hold_sigterm`): under torchrun a
host's agent stops the other workers as soon as one exits, and the rank that prints the run's one line must
finish its survey first (tests/launch/test_multihost.py runs the whole story on namespaced hosts)."""

from __future__ import annotations

import subprocess
import sys

import pytest

SURVEY = """
import os, signal, sys, time
from gridgnn.errors import CollectiveError
from gridgnn.grid import liveness

class Survey:  # a liveness whose survey takes a while, as the real one (2.5 s) does
    def describe_lost(self):
        os.kill(os.getpid(), signal.SIGTERM)  # the agent stops this worker mid-survey
        time.sleep(0.2)
        return "lost rank 2 on host c (10.0.0.3)"

hold = len(sys.argv) > 1
error = liveness.with_lost_peers(CollectiveError("broadcast failed"), Survey() if hold else None)
os.kill(os.getpid(), signal.SIGTERM) if not hold else None
print("gridgnn: error:", error, flush=True)
"""


@pytest.mark.parametrize("surveyed", [True, False])
def test_a_survey_is_not_cut_short_by_sigterm(surveyed):
    done = subprocess.run([sys.executable, "-c", SURVEY, *(["survey"] if surveyed else [])], capture_output=True,
                          text=True, timeout=60)
    if surveyed:  # the line is printed, with the lost host, and the process ends on its own
        assert done.returncode == 0 and "lost rank 2 on host c (10.0.0.3)" in done.stdout, done
    else:  # without a survey nothing is held back: SIGTERM stops the process as before
        assert done.returncode == -15 and done.stdout == "", done
