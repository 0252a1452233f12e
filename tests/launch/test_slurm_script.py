"""scripts/slurm_train.sbatch and scripts/netns_hosts.sh: shell syntax, and the Slurm script's commands
(run with stand-in ``srun`` and ``scontrol`` that record what they are asked to do)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time

import pytest

from gridgnn.cli.main import build_parser
from gridgnn.config import TrainConfig
from gridgnn.launch.spawn import free_port
from gridgnn.train.loop.trainer import Trainer
from gridgnn.train.run.training import build_aggregation, load_graph
from tests.helpers.netns_cluster import REPO
from tests.helpers.slurm_local import LocalSlurm, slurm_unavailable

SBATCH = REPO / "scripts" / "slurm_train.sbatch"


@pytest.mark.parametrize("script", ["slurm_train.sbatch", "netns_hosts.sh"])
def test_scripts_are_valid_bash(script):
    assert subprocess.run(["bash", "-n", str(REPO / "scripts" / script)], capture_output=True).returncode == 0


def _fake_slurm(tmp_path, failing: str = "") -> dict:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text("#!/bin/sh\nprintf 'node-a\\nnode-b\\n'\n")
    (bin_dir / "srun").write_text(
        "#!/bin/sh\necho \"$@\" >> \"$SRUN_LOG\"\n"
        f"case \"$*\" in *'{failing or 'never-matches'}'*) echo 'gridgnn: error: x' >&2; exit 2;; esac\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", SRUN_LOG=str(tmp_path / "srun.log"),
                SLURM_JOB_NUM_NODES="2", SLURM_JOB_NODELIST="node-[a-b]", SLURM_JOB_ID="77")


def test_the_slurm_script_prepares_once_checks_every_node_then_starts_one_torchrun_per_node(tmp_path):
    env = _fake_slurm(tmp_path)
    env.update(GRIDGNN_INTERFACE="ib0", GRIDGNN_NPROC_PER_NODE="4", GRIDGNN_PORT="29555",
               GRIDGNN_PREPARE_TO=str(tmp_path / "prepared"))
    proc = subprocess.run(["bash", str(SBATCH), "cora", "--algo", "2d", "--epochs", "5"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    prepare, check, train = [shlex.split(line) for line in (tmp_path / "srun.log").read_text().splitlines()]
    assert prepare[:4] == ["--nodes", "1", "--ntasks", "1"] and prepare[5:] == [
        "-m", "gridgnn", "prepare", "cora", "--out", str(tmp_path / "prepared")]
    assert check[:2] == ["--ntasks-per-node", "1"] and check[3:6] == ["-m", "gridgnn", "netcheck"]
    assert check[6:] == ["--rdzv-endpoint", "node-a:29555", "--interface", "ib0"]
    assert train[3:5] == ["-m", "torch.distributed.run"]
    torchrun = train[5:train.index("-m", 5)]
    assert torchrun == ["--nnodes", "2", "--nproc-per-node", "4", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                        "node-a:29555", "--rdzv-id", "77"]
    gridgnn = train[train.index("gridgnn", 5) + 1:]
    args = build_parser().parse_args(gridgnn)  # the flags the script passes are gridgnn's
    assert (args.command, args.dataset, args.interface, args.algo, args.epochs) == (
        "train", str(tmp_path / "prepared"), "ib0", "2d", 5)
    assert build_parser().parse_args(check[5:]).rdzv_endpoint == "node-a:29555"


def test_a_failed_network_check_stops_the_job_before_torchrun(tmp_path):
    env = _fake_slurm(tmp_path, failing="netcheck")
    proc = subprocess.run(["bash", str(SBATCH), "cora"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "gridgnn: error: x" in proc.stderr
    assert [line.split()[5] for line in (tmp_path / "srun.log").read_text().splitlines()] == ["netcheck"]


def test_outside_slurm_the_script_says_how_to_run_it(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    proc = subprocess.run(["bash", str(SBATCH), "cora"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "run this through sbatch" in proc.stderr


@pytest.mark.slow
@pytest.mark.skipif(slurm_unavailable() is not None, reason=f"{slurm_unavailable()}")
def test_sbatch_runs_the_script_on_a_one_machine_cluster(tmp_path):
    metrics = tmp_path / "m.json"
    with LocalSlurm(tmp_path / "slurm") as slurm:
        env = slurm.env(GRIDGNN_PYTHON=sys.executable, GRIDGNN_NPROC_PER_NODE="2", GRIDGNN_PORT=str(free_port()),
                        GRIDGNN_PREPARE_TO=str(tmp_path / "prepared"), PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
        submitted = subprocess.run(["sbatch", "--parsable", "--nodes", "1", "--chdir", str(tmp_path), "--output",
                                    str(tmp_path / "job.out"), str(SBATCH), "csbm:nodes=300", "--algo", "1d",
                                    "--epochs", "3", "--quiet", "--metrics-out", str(metrics)],
                                   env=env, capture_output=True, text=True, timeout=60)
        assert submitted.returncode == 0, submitted.stderr
        job = submitted.stdout.strip().split(";")[0]
        deadline = time.monotonic() + 300
        while slurm.job_state(job) in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "UNKNOWN"):
            assert time.monotonic() < deadline, "the Slurm job did not finish"
            time.sleep(1)
        state = slurm.job_state(job)
    output = (tmp_path / "job.out").read_text()
    assert state == "COMPLETED", output[-3000:]
    assert "prepared   csbm" in output and "netcheck   " in output and "rendezvous host" in output
    document = json.loads(metrics.read_text())
    assert document["config"]["world_size"] == 2 and document["setup"]["prepared_graph"] is False
    config = TrainConfig(dataset="csbm:nodes=300", epochs=3)
    graph = load_graph(config)
    reference = Trainer(config, graph, build_aggregation(config, graph)).fit().epochs
    assert [e["loss"] for e in document["epochs"]] == pytest.approx([r.loss for r in reference], abs=1e-4)
