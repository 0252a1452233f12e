"""``gridgnn prepare --nprocs P`` end to end: progress and summary, training on the shards exactly as on the
one-process folder, and the failures that must leave nothing that looks like a finished folder."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prepare_workers import failing_worker, job_args, prepare_worker, prepared_train_worker

from gridgnn.data.prepared import open_prepared, prepare_graph
from gridgnn.data.registry import load_dataset
from gridgnn.errors import DataError
from gridgnn.launch.spawn import run_workers
from gridgnn.prepare.launch import _publish, plan_job

SPEC = "rmat:scale=10,edge_factor=8,features=6,classes=3"
EDGES = str(Path(__file__).resolve().parents[3] / "shared" / "datasets" / "networkrepository-edgelists" /
            "ca-HepPh.txt")


def gridgnn(*args: str, timeout: int = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gridgnn", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_prepare_reports_progress_and_a_summary_and_training_reads_the_shards_exactly(tmp_path):
    one, many = tmp_path / "one", tmp_path / "many"
    prepare_graph(load_dataset(SPEC), one, operator="mean")  # the one-process folder, for --model sage
    done = gridgnn("prepare", SPEC, "--out", str(many), "--model", "sage", "--nprocs", "2", "--shards", "3",
                   "--summary", str(tmp_path / "summary.json"))
    assert done.returncode == 0, done.stderr
    for phase in ("read", "exchange", "operator", "write", "done"):
        assert f"prepare    {phase}" in done.stdout
    assert "peak memory per process" in done.stdout and "in 3 shards by 2 processes" in done.stdout
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["nprocs"] == 2 and summary["shards"] == 3 and len(summary["peak_rss_bytes"]) == 2
    assert set(summary["seconds"]) >= {"read", "exchange", "operator", "nodes", "write", "manifest"}
    assert min(summary["peak_rss_bytes"]) > 2**20 and sum(summary["entries_sent"]) > 2 * 8 * 1024 * 0.9
    folder_bytes = sum(p.stat().st_size for p in many.iterdir() if p.name != "prepared.json")
    assert summary["folder_bytes"] == folder_bytes
    assert open_prepared(many).digest == open_prepared(one).digest
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("many") and p != many]  # no partial left
    assert prepare_runs_alike(one, many)


GRIDS = ((dict(algo="1d"), 2),)
"""The grids the default tier trains on from shards; the slow tier adds 1.5d, 2d (sparse) and 3d."""


@pytest.mark.slow
def test_every_other_grid_trains_on_the_shards_exactly(tmp_path, monkeypatch):
    one, many = tmp_path / "one", tmp_path / "many"
    assert gridgnn("prepare", SPEC, "--out", str(one), "--model", "sage").returncode == 0
    assert gridgnn("prepare", SPEC, "--out", str(many), "--model", "sage", "--nprocs", "3").returncode == 0
    monkeypatch.setattr(sys.modules[__name__], "GRIDS", ((dict(algo="1.5d", replication=2), 4),
                                                         (dict(algo="2d", comm="sparse"), 4), (dict(algo="3d"), 8)))
    assert prepare_runs_alike(one, many)


def prepare_runs_alike(one: Path, many: Path, **flags) -> bool:
    """Training on the sharded folder is the run on the one-process folder, to the bit, on every grid, with the
    same bytes per rank and phase (which the tests of prepared folders hold equal to the cost model's)."""
    for grid, world in GRIDS:
        runs = [run_workers(prepared_train_worker, world, dict(dataset=str(folder), model="sage", epochs=2,
                                                                 **grid, **flags), timeout_s=240)
                for folder in (one, many)]
        assert runs[0][0]["loss"] == runs[1][0]["loss"] and runs[0][0]["acc"] == runs[1][0]["acc"], grid
        for a, b in zip(runs[0], runs[1], strict=True):
            assert all((x == y).all() for x, y in zip(a["weights"], b["weights"], strict=True))
        moved = [[epoch["by_phase"] for epoch in run[0]["comm"]] for run in runs]
        assert moved[0] == moved[1] and moved[0][0]["spmm_forward"][0] > 0, grid  # bytes per rank and phase
    return True


def test_a_random_order_prepared_by_two_processes_trains_as_the_one_process_order_and_as_none(tmp_path):
    one, many, plain = tmp_path / "one", tmp_path / "many", tmp_path / "plain"
    for folder, flags in ((one, []), (many, ["--nprocs", "2"])):
        done = gridgnn("prepare", SPEC, "--out", str(folder), "--model", "sage", "--reorder", "random", "--parts", "2",
                       *flags)
        assert done.returncode == 0, done.stderr
    assert "prepare    reorder" in done.stdout
    assert prepare_runs_alike(one, many, reorder="random")  # the same folder: the same run, to the bit
    prepare_graph(load_dataset(SPEC), plain, operator="mean")
    runs = [run_workers(prepared_train_worker, 2, dict(dataset=str(folder), model="sage", epochs=2, algo="1d",
                                                       reorder=order), timeout_s=240)[0]
            for folder, order in ((plain, "none"), (many, "random"))]
    # dropout by each row's original id (the shards' reorder_order): the reordered run trains the plain one
    assert runs[0]["acc"] == runs[1]["acc"] and runs[0]["loss"] == pytest.approx(runs[1]["loss"], rel=1e-5)


def test_a_missing_a_cut_short_and_a_foreign_shard_are_one_line_each(tmp_path):
    folder, other = tmp_path / "g", tmp_path / "other"
    for target, seed in ((folder, 0), (other, 1)):
        target.mkdir()
        job = plan_job(job_args(SPEC, seed=seed), "gcn", 2, str(target))
        run_workers(prepare_worker, 2, vars(job), timeout_s=120)
    indices = sorted(folder.glob("shard-00001-*.adj_indices.npy"))[0]
    saved = indices.read_bytes()
    damaged = []
    indices.write_bytes(saved[: len(saved) // 2])  # cut short
    damaged.append("cannot memory-map")
    with pytest.raises(DataError, match=damaged[-1]):
        open_prepared(folder)
    indices.unlink()  # missing
    with pytest.raises(DataError, match="adj_indices.npy"):
        open_prepared(folder)
    for foreign in sorted(other.glob("shard-00001-*")):  # another preparation's shard put in its place
        shutil.copy(foreign, folder / foreign.name)
    with pytest.raises(DataError, match="shard-00001-.*adj_indices.npy"):
        open_prepared(folder)
    run = gridgnn("train", "--dataset", str(folder), "--nprocs", "2", "--algo", "1d", "--epochs", "1")
    assert run.returncode == 2 and "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1


def test_sources_and_flags_a_distributed_preparation_refuses(tmp_path, capsys):
    from gridgnn.cli.main import main

    for args, says in [(["cora", "--data-root", "../shared/datasets", "--nprocs", "2"], "reads text edge lists"),
                       ([SPEC, "--nprocs", "3", "--shards", "2"], "--shards 2 is below --nprocs 3"),
                       ([SPEC, "--shards", "2"], "give --nprocs P too"),
                       ([SPEC, "--nprocs", "2", "--reorder", "rcm"], "--reorder rcm with --nprocs"),
                       ([SPEC, "--nprocs", "0"], "--nprocs must be at least 1"),
                       ([SPEC, "--nprocs", "2", "--labels", str(tmp_path / "l.npy")], "with a generator"),
                       ([EDGES, "--nprocs", "2", "--features", str(tmp_path / "f.npz")], "by rows from a .npy"),
                       ([SPEC, "--nprocs", "2", "--edge-features", str(tmp_path / "e.npy")], "with a generator"),
                       ([EDGES, "--nprocs", "2", "--edge-features", str(tmp_path / "e.npy")],
                        "edge features file not found")]:
        assert main(["prepare", *args, "--out", str(tmp_path / "x")]) == 2
        err = capsys.readouterr().err
        assert says in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert not list(tmp_path.iterdir())


def test_an_input_that_changes_while_it_is_read_stops_every_process_alike(tmp_path):
    path = tmp_path / "g.txt"
    path.write_text("0 1\n1 2\n2 3\n3 0\n")
    folder = tmp_path / "out"
    folder.mkdir()
    job = plan_job(job_args(str(path)), "gcn", 2, str(folder))
    time.sleep(0.01)
    path.write_text("0 1\n1 2\n2 3\n3 0\n4 5\n")  # changed after the preparation started
    errors = run_workers(failing_worker, 2, vars(job), timeout_s=60)
    assert errors[0] == errors[1] and "changed after the preparation started" in errors[0]
    assert not (folder / "prepared.json").exists()


def test_a_second_preparation_never_replaces_a_finished_folder(tmp_path):
    target, partial = tmp_path / "out", tmp_path / "out.partial"
    target.mkdir()
    (target / "prepared.json").write_text("{}")
    partial.mkdir()
    with pytest.raises(Exception, match="appeared while preparing"):
        _publish(partial, target)
    assert (target / "prepared.json").read_text() == "{}" and not partial.exists()


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
def test_a_worker_killed_during_preparation_leaves_no_folder_and_no_process(tmp_path):
    target = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "gridgnn", "prepare", "rmat:scale=18,edge_factor=16",
                             "--out", str(target), "--nprocs", "2"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while len(workers := _children(proc.pid)) < 2:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1]
            time.sleep(0.02)
        time.sleep(1.0)
        os.kill(max(workers), signal.SIGKILL)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0 and "was killed by SIGKILL" in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []  # neither the folder nor its partial sibling
    time.sleep(0.2)
    assert not [pid for pid in workers if Path(f"/proc/{pid}").exists()
                and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]]


@pytest.mark.skipif(shutil.which("torchrun") is None, reason="torchrun not on PATH")
def test_torchrun_processes_prepare_the_same_folder_as_local_workers(tmp_path):
    """Under torchrun each process is a preparation worker (no --nprocs): rank 0 makes the partial folder
    beside --out, every process writes its shards, rank 0 publishes; the folder equals the local workers'."""
    local, elastic = tmp_path / "local", tmp_path / "elastic"
    source = "rmat:scale=9,edge_factor=4"
    assert gridgnn("prepare", source, "--out", str(local), "--nprocs", "2", "--shards", "4").returncode == 0
    run = subprocess.run(["torchrun", "--nproc-per-node", "2", "-m", "gridgnn", "prepare", source, "--out",
                          str(elastic), "--shards", "4"], capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-2000:]
    assert (local / "prepared.json").read_bytes() == (elastic / "prepared.json").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elastic", "local"]


def test_prepare_attaches_node_files_by_rows_and_training_reads_them(tmp_path):
    """``prepare EDGES --nprocs 2 --features F.npy --labels L.npy``, then training on the folder: the task and
    classes of the labels, and the same losses as training on the edge list with the files attached."""
    import numpy as np

    rng = np.random.default_rng(0)
    edges = tmp_path / "g.txt"  # 300 vertices, every one on an edge
    pairs = np.concatenate([np.stack([np.arange(300), (np.arange(300) + 1) % 300], axis=1),
                            rng.integers(0, 300, (900, 2))])
    edges.write_text("".join(f"{u} {v}\n" for u, v in pairs))
    n = load_dataset(str(edges)).num_nodes
    np.save(tmp_path / "f.npy", rng.normal(size=(n, 4)).astype(np.float32))
    np.save(tmp_path / "l.npy", rng.integers(0, 3, n))
    files = ["--features", str(tmp_path / "f.npy"), "--labels", str(tmp_path / "l.npy")]
    done = gridgnn("prepare", str(edges), "--out", str(tmp_path / "out"), "--nprocs", "2", *files)
    assert done.returncode == 0, done.stderr
    metrics = {}
    for name, source in (("folder", [str(tmp_path / "out")]), ("files", [str(edges), *files])):
        out = tmp_path / f"{name}.json"
        run = gridgnn("train", "--dataset", *source, "--nprocs", "2", "--algo", "1d", "--epochs", "2", "--quiet",
                      "--comm", "dense", "--reorder", "none", "--metrics-out", str(out))
        assert run.returncode == 0, run.stderr
        metrics[name] = json.loads(out.read_text())
    assert metrics["folder"]["config"]["task"] == "multiclass"
    assert [e["loss"] for e in metrics["folder"]["epochs"]] == pytest.approx(
        [e["loss"] for e in metrics["files"]["epochs"]], rel=1e-5)
