"""Nothing accepted in silence (issue 38, item 5): grid flags on a one-process run are named in one warning,
and a checkpoint folder the system cannot create is one error line that names ``--checkpoint-dir``. (The
plan that nothing fits: tests/plan/test_plan.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from gridgnn.cli.ignored_flags import ignored_flags_line
from gridgnn.cli.main import main
from gridgnn.config import TrainConfig

DATA = ["--dataset", "csbm:nodes=300", "--epochs", "1", "--quiet"]


def test_grid_flags_on_one_process_are_named_in_one_warning(capsys):
    assert main(["train", *DATA, "--grid", "2x2", "--replication", "2", "--comm", "sparse"]) == 0
    assert capsys.readouterr().err.splitlines() == [
        "gridgnn: warning: --grid, --replication and --comm apply to a process grid; this run is one process "
        "(--algo local) and ignores them: add --nprocs P (P > 1) to run on a grid"]
    assert main(["train", *DATA, "--algo", "local", "--cache-panels"]) == 0
    assert "--cache-panels applies to a process grid" in capsys.readouterr().err
    assert main(["train", *DATA]) == 0
    assert capsys.readouterr().err == ""  # the defaults say nothing


def test_every_grid_field_is_named():
    line = ignored_flags_line(TrainConfig(grid="2", replication=2, comm="sparse", overlap=False, cache_panels=True,
                                          full_feature_rows=True, defer_weight_gather=True, reorder="rcm"))
    assert ("--grid, --replication, --comm, --no-overlap, --cache-panels, --full-feature-rows, "
            "--defer-weight-gather and --reorder apply") in line
    from gridgnn.plan.execution import UNSET

    assert ignored_flags_line(TrainConfig(**UNSET)) is None  # what gridgnn train passes when no flag is given
    assert ignored_flags_line(TrainConfig(**{**UNSET, "profile": "gpu-cluster"})).startswith(
        "gridgnn: warning: --profile applies to a process grid")


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc")
@pytest.mark.parametrize("grid", [[], ["--nprocs", "2", "--algo", "1d"]])
def test_a_checkpoint_folder_that_cannot_be_made_names_the_flag(capsys, grid):
    """``--checkpoint-dir /proc/x`` was a bare errno at the first save (after the workers had started)."""
    argv = ["train", "--dataset", "csbm:nodes=300", "--epochs", "1", "--checkpoint-dir", "/proc/gridgnn-x", *grid]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1, (out, err)  # no 'starting': refused before any worker
    assert err.startswith("gridgnn: error: --checkpoint-dir: cannot keep checkpoints in '/proc/gridgnn-x': ")
