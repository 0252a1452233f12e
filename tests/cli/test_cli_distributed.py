"""End to end: `gridgnn train --nprocs P` and torchrun, their metrics, and grid errors from the CLI."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from gridgnn.config import TrainConfig
from gridgnn.grid.comm_records import PHASES
from gridgnn.train.loop.trainer import Trainer
from gridgnn.train.run.training import build_aggregation, load_graph

DATA = ["--dataset", "cora", "--data-root", "../shared/datasets", "--epochs", "3"]


def _local_losses() -> list[float]:
    config = TrainConfig(dataset="cora", data_root="../shared/datasets", epochs=3)
    graph = load_graph(config)
    return [r.loss for r in Trainer(config, graph, build_aggregation(config, graph)).fit().epochs]


def _check_metrics(path, world_size: int, grid_shape: str, prepared: bool) -> None:
    metrics = json.loads(path.read_text())
    assert metrics["config"]["grid_shape"] == grid_shape and metrics["config"]["world_size"] == world_size
    setup = metrics["setup"]
    assert setup["prepared_graph"] is prepared and len(setup["peak_memory_bytes"]) == world_size
    assert (setup["launcher_peak_memory_bytes"] is not None) is prepared
    for epoch in metrics["epochs"]:
        comm = epoch["comm"]
        assert len(comm["bytes"]) == len(comm["calls"]) == world_size
        assert set(comm["by_phase"]) == set(PHASES)
        # the planner's prediction, recorded beside the measurement, is exact per rank and phase
        assert comm["predicted_by_phase"] == comm["by_phase"]
        assert comm["predicted_calls_by_phase"] == comm["calls_by_phase"]
        assert comm["predicted_bytes"] == comm["bytes"] and comm["predicted_calls"] == comm["calls"]
        for rank in range(world_size):
            assert comm["bytes"][rank] == sum(comm["by_phase"][phase][rank] for phase in PHASES)
        assert all(b > 0 for b in comm["bytes"]) and comm["by_phase"]["spmm_forward"][0] > 0
        assert epoch["comm_time_s"] > 0 and epoch["compute_time_s"] > 0
        assert 0 <= epoch["exposed_comm_time_s"] <= epoch["comm_time_s"] + 1e-3
        for key in ("comm", "exposed_comm", "compute"):
            per_rank = epoch["rank_times_s"][key]
            assert len(per_rank) == world_size and max(per_rank) == epoch[f"{key}_time_s"]
        assert len(epoch["peak_memory_bytes"]) == world_size and min(epoch["peak_memory_bytes"]) > 2**20
    assert [e["loss"] for e in metrics["epochs"]] == pytest.approx(_local_losses(), rel=1e-4)


@pytest.mark.slow  # the launcher trains and reports in test_first_contact (quick start) and the auto test here
def test_nprocs_launcher_trains_and_reports_comm(tmp_path):
    out = tmp_path / "m.json"
    proc = subprocess.run([sys.executable, "-m", "gridgnn", "train", *DATA, "--algo", "1.5d", "--nprocs", "4",
                           "--replication", "2", "--metrics-out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "grid       1.5d 2x2 (4 processes)" in proc.stdout and "spmm_forward" in proc.stdout
    _check_metrics(out, 4, "2x2", prepared=True)


@pytest.mark.skipif(shutil.which("torchrun") is None, reason="torchrun not on PATH")
@pytest.mark.slow  # torchrun in the default tier: test_first_contact (no --algo, auto on torchrun)
def test_torchrun_2d(tmp_path):
    out = tmp_path / "m.json"
    proc = subprocess.run(["torchrun", "--nproc-per-node", "4", "-m", "gridgnn", "train", *DATA, "--algo", "2d",
                           "--metrics-out", str(out), "--quiet"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _check_metrics(out, 4, "2x2", prepared=False)


@pytest.mark.parametrize(("flags", "message"), [
    (["--algo", "2d", "--nprocs", "4", "--grid", "2x3"], "2d grid 2x3 needs 6 processes, got 4"),
    # the other refusals are the grid checks' unit tests (test_grid_and_partition); through the CLI: slow
    pytest.param(["--algo", "1.5d", "--nprocs", "4", "--replication", "3"], "replication 3 does not divide 4 processes",
                 marks=pytest.mark.slow),
    pytest.param(["--algo", "3d", "--nprocs", "6"], "3d needs a cube number of processes", marks=pytest.mark.slow),
    (["--algo", "1d", "--nprocs", "4000", "--epochs", "1"], "more than 64 workers on one machine"),
])
def test_bad_grid_is_one_line_and_exit_2(tmp_path, flags, message):
    out = tmp_path / "m.json"
    proc = subprocess.run([sys.executable, "-m", "gridgnn", "train", "--dataset", "csbm:nodes=100", *flags,
                           "--metrics-out", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()


@pytest.mark.slow  # the quick start (test_first_contact) runs --algo auto on a grid and checks its line
def test_algo_auto_runs_the_planners_choice_and_says_why(tmp_path):
    """``gridgnn train --nprocs 4`` with no execution flag runs what ``gridgnn plan`` ranks first for the same
    command (algorithm, grid, comm, order and every switch), says so on its first line, and its every step
    moves the bytes the plan priced."""
    out = tmp_path / "m.json"
    proc = subprocess.run([sys.executable, "-m", "gridgnn", "train", *DATA, "--nprocs", "4",
                           "--metrics-out", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    planned = subprocess.run([sys.executable, "-m", "gridgnn", "plan", "--dataset", "cora", "--data-root",
                              "../shared/datasets", "--nprocs", "4", "--json"], capture_output=True, text=True,
                             timeout=300, check=True)
    best = json.loads(planned.stdout)[0]
    config = json.loads(out.read_text())["config"]
    task, rest = proc.stdout.split("\n", 1)  # the first line: what the run trains; the next: the planner's choice
    assert task.startswith("task       multiclass") and rest.startswith(f"--algo auto chose {best['algo']} grid "
                                                                        f"{best['grid']} ")
    for key in ("algo", "comm", "reorder", "cache_panels", "full_feature_rows", "defer_weight_gather"):
        assert config[key] == best[key], key
    assert config["grid_shape"] == best["grid"] and config["auto_reason"] == proc.stdout.splitlines()[1]
    epochs = json.loads(out.read_text())["epochs"]
    assert all(max(epoch["comm"]["bytes"]) == best["bytes_per_rank"] for epoch in epochs)
    _check_metrics(out, 4, best["grid"], prepared=True)
