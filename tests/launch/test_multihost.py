"""Many hosts for real: torchrun across network namespaces joined by a bridge (`tests/helpers/netns_cluster.py`).

Every rank of these runs reaches the others over a veth interface (10.200.0.0/24, only inside the
namespaces), through torchrun's c10d rendezvous on host 0, and reads one prepared graph from a folder every
host sees. The results must equal the single-process run's. Needs root (CI runs as root); skips otherwise.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gridgnn.config import TrainConfig
from gridgnn.data.prepared import prepare_graph
from gridgnn.launch.spawn import free_port, run_workers
from gridgnn.train.loop.trainer import Trainer
from gridgnn.train.run.training import build_aggregation, load_graph
from gridgnn.train.run.worker import run_worker
from tests.helpers.netns_cluster import SCRIPT, NetnsCluster, namespaces_unavailable

_WHY = namespaces_unavailable()
pytestmark = pytest.mark.skipif(_WHY is not None, reason=f"multi-host tests: {_WHY}")

CORA = TrainConfig(dataset="cora", data_root=str(Path(__file__).resolve().parents[3] / "shared"
                                                 / "datasets"), epochs=3)


@pytest.fixture(scope="module")
def cora_prepared(tmp_path_factory) -> Path:
    if not Path(CORA.data_root, "cora").exists() and not Path(CORA.data_root).exists():
        pytest.skip("../shared/datasets is absent")
    folder = tmp_path_factory.mktemp("shared") / "cora"
    prepare_graph(load_graph(CORA), folder)
    return folder


@pytest.fixture(scope="module")
def cora_reference() -> list:
    graph = load_graph(CORA)
    return Trainer(CORA, graph, build_aggregation(CORA, graph)).fit().epochs


def _finish(procs, timeout_s: float) -> list[tuple[int, str, str]]:
    deadline = time.monotonic() + timeout_s
    out = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        out.append((proc.returncode, stdout, stderr))
    return out


def _check_exact(metrics: dict, reference: list, world: int) -> None:
    epochs = metrics["epochs"]
    assert [e["loss"] for e in epochs] == pytest.approx([r.loss for r in reference], abs=1e-4)
    for mine, ref in zip(epochs, reference, strict=True):
        assert (mine["train_acc"], mine["val_acc"], mine["test_acc"]) == (ref.train_acc, ref.val_acc, ref.test_acc)
        comm = mine["comm"]
        assert len(comm["bytes"]) == world and min(comm["bytes"]) > 0
        assert comm["bytes"] == comm["predicted_bytes"] and comm["by_phase"] == comm["predicted_by_phase"]


def _train_across(hosts: int, per_host: int, flags: list[str], prepared: Path, out: Path) -> dict:
    """One torchrun per namespaced host; returns rank 0's metrics."""
    args = ["--dataset", str(prepared), "--epochs", "3", "--quiet", "--timeout", "60", "--metrics-out", str(out),
            "--comm", "dense", "--no-cache-panels", "--no-full-feature-rows", "--no-defer-weight-gather",
            *flags]  # the plain run: the axis the placement keeps within a host is the dense step's heaviest
    with NetnsCluster(hosts) as cluster:
        port = free_port()
        procs = [cluster.torchrun(host, per_host, port, args) for host in range(hosts)]
        results = _finish(procs, 300)
    for code, _, stderr in results:
        assert code == 0, stderr[-3000:]
    return json.loads(out.read_text())


def _check_hosts(document: dict, per_host: int) -> None:
    """Ranks placed so that the heaviest axis stays within a host; bytes split within / across hosts."""
    hosts, world = document["hosts"], document["config"]["world_size"]
    assert [label.split(" ")[-1] for label in hosts["labels"]] == ["(10.200.0.1)", "(10.200.0.2)"]
    assert sorted(hosts["host_of_rank"]) == [h for h in (0, 1) for _ in range(per_host)]
    heaviest = hosts["axis_order"][-1]
    for epoch in document["epochs"]:
        comm = epoch["comm"]
        by_axis, within, across = comm["by_axis"], comm["by_axis_within_host"], comm["by_axis_across_hosts"]
        assert max(by_axis[heaviest]) == max(max(v) for v in by_axis.values())  # it is the heaviest
        assert across[heaviest] == [0] * world and within[heaviest] == by_axis[heaviest] != [0] * world
        assert any(v != [0] * world for v in across.values())  # something crossed hosts
        for axis in by_axis:
            assert [w + a for w, a in zip(within[axis], across[axis], strict=True)] == by_axis[axis]
        assert [sum(v[r] for v in by_axis.values()) for r in range(world)] == comm["bytes"]


@pytest.mark.slow  # network namespaces and a 1.5d job; the namespaced hosts answer in test_multihost_network
def test_15d_across_two_hosts_equals_one_process(tmp_path, cora_prepared, cora_reference):
    document = _train_across(2, 2, ["--algo", "1.5d", "--replication", "2"], cora_prepared, tmp_path / "m.json")
    assert document["config"]["grid_shape"] == "2x2" and document["config"]["world_size"] == 4
    _check_exact(document, cora_reference, 4)
    _check_hosts(document, 2)
    assert document["hosts"]["axis_order"] == ["rep", "row"]  # row (the block-row broadcasts) within a host


@pytest.mark.slow
@pytest.mark.parametrize(("flags", "shape"), [
    (["--algo", "1d"], "8"), (["--algo", "1.5d", "--replication", "2"], "4x2"), (["--algo", "2d"], "2x4"),
    (["--algo", "3d"], "2x2x2")])
def test_every_algorithm_across_two_hosts_of_four(tmp_path, cora_prepared, cora_reference, flags, shape):
    document = _train_across(2, 4, flags, cora_prepared, tmp_path / "m.json")
    assert document["config"]["grid_shape"] == shape
    _check_exact(document, cora_reference, 8)
    if flags[1] != "1d":
        _check_hosts(document, 4)


def _wait_for_checkpoint(folder: Path, procs, timeout_s: float) -> int:
    from gridgnn.train.checkpoint.naming import latest_checkpoint

    deadline = time.monotonic() + timeout_s
    while latest_checkpoint(folder) is None:
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            for proc in procs:
                proc.kill()
            raise AssertionError("no checkpoint: " + " | ".join(p.communicate()[1][-2000:] for p in procs))
        time.sleep(0.1)
    return int(latest_checkpoint(folder).name.split("-")[1])


def _worker_stderr(log_dir: Path) -> list[str]:
    return [path.read_text() for path in sorted(log_dir.glob("**/stderr.log"))]


def _lose_host_then_resume(tmp_path: Path, prepared: Path, lose, timeout_s: int,
                           resume_with_cli: bool = False) -> tuple[str, float, int]:
    """Train 1d on two hosts (one worker each, a checkpoint every epoch), ``lose(cluster)`` host 1 mid-run,
    then resume on host 0 from the checkpoint folder both hosts saw (`_resume_on_host_zero`); returns host
    0's worker stderr, the seconds host 0 took to end, its torchrun's status."""
    ckpt, logs = tmp_path / "shared-ckpt", tmp_path / "logs"
    args = ["--dataset", str(prepared), "--epochs", "100000", "--algo", "1d", "--quiet", "--timeout", str(timeout_s),
            "--checkpoint-dir", str(ckpt), "--checkpoint-every", "1"]
    with NetnsCluster(2) as cluster:
        port = free_port()
        procs = [cluster.torchrun(host, 1, port, args, log_dir=logs) for host in (0, 1)]
        _wait_for_checkpoint(ckpt, procs, 180)
        lose(cluster)
        start = time.monotonic()
        procs[0].communicate(timeout=timeout_s + 60)
        elapsed = time.monotonic() - start
        left = cluster.pids(0)
        assert not left, f"processes left running on the surviving host: {left}"
        _resume_on_host_zero(cluster if resume_with_cli else None, prepared, ckpt, tmp_path / "resumed.json")
    (stderr,) = _worker_stderr(logs / "h0")
    return stderr, elapsed, procs[0].returncode


def _resume_worker(rank: int, world: int, config: TrainConfig) -> None:
    run_worker(config)  # what `gridgnn train` runs in each worker


def _resume_on_host_zero(cluster: NetnsCluster | None, prepared: Path, ckpt: Path, out: Path) -> None:
    """Resume on host 0 alone, on another grid (2d 1x2, two workers), two epochs past the newest checkpoint:
    every epoch equals an uninterrupted single-process run's. With ``cluster``: ``gridgnn train --nprocs 2``
    inside host 0's namespace; without: the same workers started by `run_workers` (no launcher process)."""
    from gridgnn.train.checkpoint.naming import latest_checkpoint

    saved = int(latest_checkpoint(ckpt).name.split("-")[1])
    if cluster is None:
        config = TrainConfig(dataset=str(prepared), algo="2d", grid="1x2", nprocs=2, epochs=saved + 2,
                             checkpoint_dir=str(ckpt), resume=True, quiet=True, metrics_out=str(out))
        # spawned, not forked: this process has trained already, and a forked child can hang in its OpenMP pool
        run_workers(_resume_worker, 2, config, timeout_s=300, start_method="spawn")
    else:
        proc = cluster.run(0, [sys.executable, "-m", "gridgnn", "train", "--dataset", str(prepared), "--algo",
                               "2d", "--grid", "1x2", "--nprocs", "2", "--epochs", str(saved + 2),
                               "--checkpoint-dir", str(ckpt), "--resume", "--quiet", "--metrics-out", str(out)])
        _, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr[-3000:]
    document = json.loads(out.read_text())
    assert document["resumed_from"]["epoch"] == saved
    config = dataclasses.replace(CORA, epochs=saved + 2)
    graph = load_graph(config)
    reference = Trainer(config, graph, build_aggregation(config, graph)).fit().epochs
    epochs = document["epochs"]
    assert [e["loss"] for e in epochs] == pytest.approx([r.loss for r in reference], abs=1e-4)
    assert [(e["train_acc"], e["val_acc"], e["test_acc"]) for e in epochs] == \
        [(r.train_acc, r.val_acc, r.test_acc) for r in reference]


def _kill_host_one(cluster: NetnsCluster) -> None:
    import os
    import signal

    for pid in cluster.pids(1):
        os.kill(pid, signal.SIGKILL)


@pytest.mark.slow  # benchmarks/lost_host_trials.py runs it 20 times; a lost worker: tests/launch/test_lost_worker.py
def test_a_killed_host_is_named_and_the_job_resumes_on_the_other(tmp_path, cora_prepared):
    timeout_s = 20
    stderr, elapsed, status = _lose_host_then_resume(tmp_path, cora_prepared, _kill_host_one, timeout_s)
    assert status != 0
    assert elapsed < timeout_s + 15
    errors = [line for line in stderr.splitlines() if line.startswith("gridgnn: error:")]
    assert len(errors) == 1 and "Traceback" not in stderr, stderr[-3000:]
    assert "lost rank " in errors[0] and "(10.200.0.2)" in errors[0] and "(10.200.0.1)" not in errors[0], errors
    print(errors[0], f"({elapsed:.1f} s)")


def _cut_host_one(cluster: NetnsCluster) -> None:
    subprocess.run([str(SCRIPT), "cut", cluster.prefix, "1"], check=True, capture_output=True)


@pytest.mark.slow
def test_a_host_whose_network_goes_down_is_named_after_the_timeout_and_the_job_resumes(tmp_path, cora_prepared):
    timeout_s = 10
    stderr, elapsed, status = _lose_host_then_resume(tmp_path, cora_prepared, _cut_host_one, timeout_s,
                                                     resume_with_cli=True)
    assert status != 0
    assert timeout_s - 1 < elapsed < timeout_s + 15
    errors = [line for line in stderr.splitlines() if line.startswith("gridgnn: error:")]
    assert len(errors) == 1 and "Traceback" not in stderr, stderr[-3000:]
    assert "did not answer in time" in errors[0]
    assert "lost rank " in errors[0] and "(10.200.0.2)" in errors[0] and "(10.200.0.1)" not in errors[0], errors
    print(errors[0], f"({elapsed:.1f} s)")


@pytest.mark.slow
def test_three_hosts_lose_one_the_others_name_it_and_nothing_is_left(tmp_path, cora_prepared):
    """Three hosts of two workers (1.5D 3x2); every process of host 2 is killed mid-run: the survivors on
    hosts 0 and 1 end within the timeout + 15 s, every line printed names host 2's ranks and no other."""
    import os
    import signal

    timeout_s, ckpt, logs = 20, tmp_path / "ckpt", tmp_path / "logs"
    args = ["--dataset", str(cora_prepared), "--epochs", "100000", "--algo", "1.5d", "--replication", "2",
            "--quiet", "--timeout", str(timeout_s), "--checkpoint-dir", str(ckpt), "--checkpoint-every", "1"]
    with NetnsCluster(3) as cluster:
        port = free_port()
        procs = [cluster.torchrun(host, 2, port, args, log_dir=logs) for host in range(3)]
        _wait_for_checkpoint(ckpt, procs, 240)
        for pid in cluster.pids(2):
            os.kill(pid, signal.SIGKILL)
        start = time.monotonic()
        for proc in procs[:2]:
            proc.communicate(timeout=timeout_s + 60)
        elapsed = time.monotonic() - start
        assert not cluster.pids(0) and not cluster.pids(1), "processes left on the surviving hosts"
    assert all(proc.returncode != 0 for proc in procs[:2]) and elapsed < timeout_s + 15
    lines = [line for host in (0, 1) for text in _worker_stderr(logs / f"h{host}") for line in text.splitlines()
             if line.startswith("gridgnn: error:")]
    assert lines, "no survivor said what was lost"
    for line in lines:
        assert "lost ranks " in line and "(10.200.0.3)" in line, line
        assert "(10.200.0.1)" not in line.split("lost")[-1] and "(10.200.0.2)" not in line.split("lost")[-1], line
    print(len(lines), "lines, e.g.", lines[0], f"({elapsed:.1f} s)")
