"""`--algo auto` outside a grid, and its flag conflicts (the grid case is in test_cli_distributed.py)."""

from __future__ import annotations

import json

import pytest

from gridgnn.cli.main import main
from gridgnn.config import TrainConfig
from gridgnn.run_spec import RunSpec
from gridgnn.train.run.auto import choose_configuration
from gridgnn.train.run.resolve import grid_shape_for
from gridgnn.train.run.training import load_graph


def test_one_process_auto_is_local_and_recorded(tmp_path, capsys):
    out = tmp_path / "m.json"
    assert main(["train", "--algo", "auto", "--epochs", "2", "--metrics-out", str(out)]) == 0
    assert capsys.readouterr().out.startswith("--algo auto: one process, so local")
    config = json.loads(out.read_text())["config"]
    assert config["algo"] == "local" and config["auto_reason"].startswith("--algo auto: one process")


def test_auto_refuses_a_grid_or_replication_of_its_own(capsys):
    assert main(["train", "--algo", "auto", "--nprocs", "4", "--grid", "2x2"]) == 2
    assert "drop --grid and --replication" in capsys.readouterr().err


def test_the_choice_reaches_the_workers_in_the_run_spec():
    config = TrainConfig(dataset="csbm:nodes=400", algo="auto", nprocs=6)
    chosen, reason = choose_configuration(config, load_graph(config), 6)
    assert chosen.algo in ("1d", "1.5d", "2d", "3d") and reason.startswith(f"--algo auto chose {chosen.algo}")
    again = RunSpec.from_json(json.loads(json.dumps(RunSpec(chosen, grid_shape_for(chosen, 6)).to_json()))).config
    assert again.algo == chosen.algo and again.replication == chosen.replication
    assert again.grid == chosen.grid and again.comm == chosen.comm


@pytest.mark.slow  # an edge of the launcher: the planner choice in test_cli_distributed
def test_a_single_launched_worker_runs_auto_as_a_one_process_grid(tmp_path):
    """torchrun --nproc-per-node 1: the worker's process group exists, so auto means a 1-process 1d grid."""
    import os
    import subprocess
    import sys

    from gridgnn.launch.spawn import free_port

    out = tmp_path / "m.json"
    env = dict(os.environ, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    done = subprocess.run([sys.executable, "-m", "gridgnn", "train", "--dataset", "csbm:nodes=200", "--epochs",
                           "2", "--algo", "auto", "--quiet", "--metrics-out", str(out)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    config = json.loads(out.read_text())["config"]
    assert config["algo"] == "1d" and config["world_size"] == 1 and "1-process grid" in config["auto_reason"]
