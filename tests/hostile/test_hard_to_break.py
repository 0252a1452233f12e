"""Issue 15, "hard to break, round two": one class of fault per section, each through the real code path.

1. Workers never outlive their launcher, and a dead launcher's prepared-graph folder is removed.
2. A checkpoint folder belongs to one run at a time (a lock naming its holder).
3. A diverging run keeps its results: one line at the first non-finite loss, ``--stop-on-nonfinite``
   (exit 4), NaN written as null and listed under ``nonfinite`` in metrics and checkpoints alike.
4. Sizes beyond what the machine and libraries can represent: in `hostile_corpus.py` (flags, labels, classes),
   plus the readers that must not read what a format does not use.
5. Structured files validated before use: profiles, checkpoint histories, prepared manifests (and the native
   ``.npz`` and Planetoid cases of the corpus).
6. Output: a closed pipe in a distributed run, long names, non-regular metrics paths, full disks, names that
   are not UTF-8.

The launcher-kill and concurrent-run cases with real worker processes are behind ``-m slow``.
"""

from __future__ import annotations

import errno
import json
import math
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from gridgnn.cli.main import main
from gridgnn.config import TrainConfig
from gridgnn.data import save_graph
from gridgnn.data.generators import csbm
from gridgnn.data.prepared import open_prepared, prepare_graph
from gridgnn.data.registry import load_dataset
from gridgnn.errors import CheckpointError, ConfigError, DataError
from gridgnn.launch.orphans import MARKER, PREPARED_PREFIX, remove_orphaned_folders
from gridgnn.train.checkpoint.lock import hold_checkpoint_dir
from gridgnn.train.checkpoint.manifest import MANIFEST, read_manifest
from gridgnn.train.checkpoint.naming import latest_checkpoint
from gridgnn.train.loop.nonfinite import decode_nonfinite
from gridgnn.train.outputs.metrics import write_json_atomic

REPO_ROOT = Path(__file__).resolve().parents[2]
SMALL = "csbm:nodes=60,classes=2"


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO_ROOT), **extra}


def _gridgnn(*argv: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gridgnn", *argv], capture_output=True, text=True, env=_env(),
                          cwd=REPO_ROOT, timeout=300, **kwargs)


def _strict_json(path: Path) -> dict:
    """The JSON document at ``path``, refusing the NaN/Infinity extensions Python's json accepts."""
    def refuse(name: str) -> None:
        raise AssertionError(f"{path} holds {name}, which is not JSON")

    return json.loads(path.read_text(), parse_constant=refuse)


def _gone(pid: int) -> bool:
    """True when ``pid`` has exited (a zombie counts: it runs no more)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


# --- 1. orphans -------------------------------------------------------------------------------------------

_CHILD = ("import sys, time; from gridgnn.launch.orphans import die_with_launcher; "
          "die_with_launcher(int(sys.argv[1])); print('ready', flush=True); time.sleep(120)")
_PARENT = ("import os, subprocess, sys, time; "
           f"child = subprocess.Popen([sys.executable, '-c', {_CHILD!r}, str(os.getpid())], stdout=subprocess.PIPE, "
           "text=True); "
           "print(child.pid, child.stdout.readline().strip(), flush=True); time.sleep(120)")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_a_worker_dies_within_seconds_of_its_launcher_and_never_starts_without_it():
    launcher = subprocess.Popen([sys.executable, "-c", _PARENT], stdout=subprocess.PIPE, text=True, env=_env())
    try:
        child_pid, state = launcher.stdout.readline().split()
        assert state == "ready"
        launcher.kill()  # SIGKILL: no handler of the launcher runs
        launcher.wait()
        deadline = time.monotonic() + 10
        while not _gone(int(child_pid)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(int(child_pid)), "the worker outlived its launcher"
    finally:
        launcher.kill()
    # the race at start: the launcher died before the request; the worker's parent is someone else
    late = subprocess.run([sys.executable, "-c", _CHILD, "1"], capture_output=True, text=True, timeout=60,
                          env=_env())
    assert late.returncode == 3 and "ready" not in late.stdout


def _folder(root: Path, name: str, marker: dict | None) -> Path:
    folder = root / name
    folder.mkdir()
    (folder / "adj_data.npy").write_bytes(b"x" * 100)
    if marker is not None:
        (folder / MARKER).write_text(json.dumps(marker))
    return folder


def test_only_prepared_folders_of_dead_launchers_on_this_host_are_removed(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    host = socket.gethostname()
    orphan = _folder(tmp_path, f"{PREPARED_PREFIX}orphan", {"pid": dead.pid, "host": host, "start_time": None})
    reused = _folder(tmp_path, f"{PREPARED_PREFIX}reused", {"pid": os.getpid(), "host": host, "start_time": "1"})
    alive = _folder(tmp_path, f"{PREPARED_PREFIX}alive", {"pid": os.getpid(), "host": host, "start_time": None})
    elsewhere = _folder(tmp_path, f"{PREPARED_PREFIX}other-host", {"pid": dead.pid, "host": host + "-x"})
    unmarked = _folder(tmp_path, f"{PREPARED_PREFIX}unmarked", None)
    foreign = _folder(tmp_path, "someone-elses-folder", {"pid": dead.pid, "host": host})
    assert sorted(remove_orphaned_folders(tmp_path)) == sorted([orphan, reused])
    assert not orphan.exists() and not reused.exists()  # reused: the pid lives, but started at another time
    assert all(f.is_dir() for f in (alive, elsewhere, unmarked, foreign))


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _start_launcher(tmp: Path, *flags: str) -> tuple[subprocess.Popen, list[int]]:
    """A 2-worker run that would take hours, once both workers run; (launcher, worker pids)."""
    launcher = subprocess.Popen([sys.executable, "-m", "gridgnn", "train", "--dataset", SMALL, "--algo", "1d",
                                 "--nprocs", "2", "--threads", "1", "--epochs", "100000000", "--quiet", *flags],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT,
                                env=_env(TMPDIR=str(tmp)))
    deadline = time.monotonic() + 240
    while len(_children(launcher.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    workers = _children(launcher.pid)
    assert len(workers) == 2, "the workers did not start"
    time.sleep(1.0)
    return launcher, workers


def _wait_gone(pids: list[int], within_s: float) -> None:
    deadline = time.monotonic() + within_s
    while not all(_gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(_gone(p) for p in pids), "a worker outlived its launcher"


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGHUP], ids=["sigkill", "sighup"])
def test_a_killed_launcher_leaves_no_worker_and_no_prepared_folder(tmp_path, sig):
    launcher, workers = _start_launcher(tmp_path)
    try:
        assert len(list(tmp_path.glob(f"{PREPARED_PREFIX}*"))) == 1
        launcher.send_signal(sig)
        launcher.wait(timeout=60)
        _wait_gone(workers, within_s=10)
        if sig == signal.SIGHUP:  # handled like SIGTERM: the launcher cleans up itself
            assert launcher.returncode == 128 + signal.SIGHUP
            assert list(tmp_path.glob(f"{PREPARED_PREFIX}*")) == []
        else:  # nothing could run in the launcher: the next launch removes its folder
            assert len(remove_orphaned_folders(tmp_path)) == 1
            assert list(tmp_path.glob(f"{PREPARED_PREFIX}*")) == []
    finally:
        launcher.kill()
        for pid in workers:
            if not _gone(pid):
                os.kill(pid, signal.SIGKILL)


# --- 2. one run per checkpoint folder ---------------------------------------------------------------------


@pytest.mark.parametrize("flags", [[], ["--algo", "1d", "--nprocs", "2"]], ids=["local", "launcher"])
def test_a_second_run_on_a_held_checkpoint_folder_is_refused_with_the_holders_pid(tmp_path, capsys, flags):
    folder = tmp_path / "ck"
    holder = TrainConfig(dataset=SMALL, checkpoint_dir=str(folder))
    with hold_checkpoint_dir(holder):
        status = main(["train", "--dataset", SMALL, "--epochs", "2", "--checkpoint-dir", str(folder), *flags])
        out, err = capsys.readouterr()
        with pytest.raises(ConfigError, match="in use by another run"):  # the library says the same
            with hold_checkpoint_dir(holder):
                pass
        assert [p.name for p in folder.iterdir()] == [".gridgnn-lock"]  # nothing saved, nothing pruned
    assert status == 2 and out == "" and len(err.splitlines()) == 1
    assert f"in use by another run (pid {os.getpid()} on {socket.gethostname()})" in err
    assert not folder.exists()  # the holder made the folder and saved nothing in it: it leaves nothing behind
    # released with its holder: the run goes ahead now
    assert main(["train", "--dataset", SMALL, "--epochs", "2", "--checkpoint-dir", str(folder), "--quiet"]) == 0
    assert latest_checkpoint(folder).name == "epoch-00000002"


@pytest.mark.slow
def test_two_runs_started_together_on_one_empty_folder(tmp_path):
    folder = tmp_path / "ck"
    argv = [sys.executable, "-m", "gridgnn", "train", "--dataset", "csbm:nodes=400,classes=2", "--epochs", "30",
            "--checkpoint-every", "1", "--checkpoint-dir", str(folder), "--quiet"]
    runs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT,
                             env=_env()) for _ in range(2)]
    results = [(run.wait(timeout=300), *run.communicate()) for run in runs]
    assert sorted(code for code, _, _ in results) == [0, 2], results
    refused = next(err for code, _, err in results if code == 2)
    assert len(refused.splitlines()) == 1 and "in use by another run (pid " in refused
    assert latest_checkpoint(folder).name == "epoch-00000030"
    assert not list(folder.glob(".partial-*"))


# --- 3. diverging training --------------------------------------------------------------------------------


def _nan_losses(metrics: dict) -> list[int]:
    return [e["epoch"] for e in decode_nonfinite(metrics)["epochs"] if math.isnan(e["loss"])]


def test_a_diverging_run_writes_metrics_and_checkpoints_that_resume_alike(tmp_path, capsys):
    out, folder = tmp_path / "m.json", tmp_path / "ck"
    base = ["train", "--dataset", SMALL, "--lr", "1e30", "--checkpoint-dir", str(folder), "--checkpoint-every",
            "2", "--metrics-out", str(out), "--quiet"]
    assert main([*base, "--epochs", "4"]) == 0
    err = capsys.readouterr().err
    metrics = _strict_json(out)
    first = metrics["final"]["first_nonfinite_epoch"]
    assert err.splitlines() == [f"gridgnn: warning: the training loss is nan at epoch {first}: training diverged "
                                "(try a smaller --lr); training goes on (--stop-on-nonfinite stops there)"]
    assert _nan_losses(metrics) == list(range(first, 5)) and metrics["epochs"][first - 1]["loss"] is None
    assert metrics["nonfinite"][f"/epochs/{first - 1}/loss"] == "NaN"
    assert metrics["final"]["stopped_on_nonfinite"] is False
    # the checkpoint records the same history, in the same encoding, and reads back with the NaN
    manifest_file = latest_checkpoint(folder) / MANIFEST
    assert _strict_json(manifest_file)["nonfinite"][f"/history/epochs/{first - 1}/loss"] == "NaN"
    assert math.isnan(read_manifest(latest_checkpoint(folder))["history"]["epochs"][first - 1]["loss"])
    assert not list(folder.glob(".partial-*"))
    # resumed with --stop-on-nonfinite: the history already diverged, so it stops at once (exit 4)
    assert main([*base, "--epochs", "6", "--resume", "--stop-on-nonfinite"]) == 4
    line = capsys.readouterr().err.strip()
    assert line.startswith(f"gridgnn: error: the training loss is nan at epoch {first}") and "\n" not in line
    resumed = _strict_json(out)
    assert len(resumed["epochs"]) == 4 and resumed["final"]["stopped_on_nonfinite"] is True
    assert _nan_losses(resumed) == _nan_losses(metrics)


@pytest.mark.slow  # the one-process stop is in the default tier
def test_stop_on_nonfinite_ends_every_worker_alike_at_the_local_runs_epoch(tmp_path):
    flags = ["--dataset", SMALL, "--lr", "1e30", "--epochs", "20", "--stop-on-nonfinite", "--quiet"]
    local_out, grid_out = tmp_path / "local.json", tmp_path / "grid.json"
    assert main(["train", *flags, "--metrics-out", str(local_out)]) == 4
    run = _gridgnn("train", *flags, "--algo", "1d", "--nprocs", "2", "--threads", "1", "--metrics-out",
                   str(grid_out))
    assert run.returncode == 4, run.stderr
    assert len(run.stderr.splitlines()) == 1 and "stopped there by --stop-on-nonfinite" in run.stderr
    local, grid = _strict_json(local_out), _strict_json(grid_out)
    assert grid["final"]["first_nonfinite_epoch"] == local["final"]["first_nonfinite_epoch"]
    assert len(grid["epochs"]) == len(local["epochs"]) == local["final"]["first_nonfinite_epoch"] < 20
    assert grid["nonfinite"] == local["nonfinite"]
    for mine, theirs in zip(grid["epochs"], local["epochs"], strict=True):
        assert (mine["loss"] is None) == (theirs["loss"] is None)
        if mine["loss"] is not None:
            assert mine["loss"] == pytest.approx(theirs["loss"], rel=1e-4)
        assert [mine[k] for k in ("train_acc", "val_acc")] == [theirs[k] for k in ("train_acc", "val_acc")]


# --- 4. amplification: a small file cannot make the loader read or allocate much ---------------------------


def _add_member_declaring(path: Path, name: str, shape: tuple[int, ...]) -> None:
    """Append a member ``name`` whose .npy header declares ``shape`` (int8) but holds 16 bytes: reading it
    would try to allocate the declared size (or fail)."""
    header = np.lib.format.header_data_from_array_1_0(np.zeros(1, np.int8))
    header["shape"] = shape
    with zipfile.ZipFile(path, "a") as archive, archive.open(name, "w") as member:
        np.lib.format.write_array_header_1_0(member, header)
        member.write(b"\0" * 16)


@pytest.mark.parametrize("kind", ["native", "gnn-benchmark"])
def test_members_a_format_does_not_use_are_never_read(tmp_path, kind):
    if kind == "native":
        path = save_graph(csbm(nodes=20, classes=2, features=3), tmp_path / "graph.npz")
    else:
        from data_error_helpers import benchmark_arrays

        path = tmp_path / "g.npz"
        np.savez(path, **benchmark_arrays())
    _add_member_declaring(path, "unused_blob.npy", (2**41,))  # 2 TiB declared in a file of a few KB
    assert path.stat().st_size < 10_000
    graph = load_dataset(str(path))
    assert graph.num_nodes in (20, 3)


def test_a_hidden_width_no_machine_holds_is_refused_with_the_config_and_the_guard_never_overflows(monkeypatch):
    """The hidden width alone is checked with the configuration (before the dataset is read); issue 16's memory
    guard refuses sizes whose products leave the cost model's int64 with its line, never an OverflowError."""
    from gridgnn.cost.graph_stats import GraphStats
    from gridgnn.train.run import auto
    from gridgnn.train.run.memory_guard import memory_refusal

    with pytest.raises(ConfigError, match="not enough memory for the model: the 1 x 4611686018427387904 hidden"):
        TrainConfig(dataset="no-such-dataset", hidden=2**62)
    with pytest.raises(ConfigError, match="the 1073741824 x 1073741824 hidden weight matrix"):
        TrainConfig(hidden=2**30, layers=3, dataset="no-such-dataset")  # 2^60 elements: the middle layer's
    stats = GraphStats("huge", num_nodes=2**40, nnz=2**41, num_features=4, num_classes=2)
    monkeypatch.setattr(auto, "graph_stats", lambda graph: stats)
    line = memory_refusal(TrainConfig(hidden=2**20, memory_per_proc=2**40), None, 1)
    assert line.startswith("not enough memory: 1099511627776 vertices x --hidden 1048576 is more than 2^58")


# --- 5. structured files validated before use -------------------------------------------------------------

_PROFILE = {"name": "p", "description": "d", "intra_node": {"broadcast": {"alpha_s": 1e-5, "beta_s_per_byte": 1e-9}}}


@pytest.mark.parametrize(("change", "keyword"), [
    ({"intra_node": {"reduce": {"alpha_s": 1e-5, "beta_s_per_byte": 1e-9}}}, "at least a 'broadcast' entry"),
    ({"intra_node": {"broadcast": {"alpha_s": 1e-5, "beta_s_per_byte": "fast"}}}, "alpha_s and beta_s_per_byte"),
    ({"intra_node": {"broadcast": {"alpha_s": -1, "beta_s_per_byte": 1e-9}}}, "alpha_s and beta_s_per_byte"),
    ({"intra_node": []}, "'intra_node' must be an object"),
    ({"sparse_flops": 0}, "'sparse_flops' must be a finite positive number"),
    ({"dense_flops": "1e9"}, "'dense_flops' must be a finite positive number"),
    ({"procs_per_node": 2.5}, "'procs_per_node' must be a positive integer"),
    ({"name": 7}, "'name' and 'description' must be strings"),
], ids=["no-broadcast", "string-bandwidth", "negative-latency", "table-is-a-list", "zero-rate", "string-rate",
        "fractional-procs-per-node", "name-not-a-string"])
def test_a_malformed_machine_profile_is_one_line(tmp_path, capsys, change, keyword):
    path = tmp_path / "profile.json"
    path.write_text(json.dumps({**_PROFILE, **change}))
    status = main(["plan", "--num-nodes", "1000", "--num-edges", "5000", "--num-features", "8", "--num-classes",
                   "2", "--profile", str(path)])
    out, err = capsys.readouterr()
    assert status == 2 and out == "" and len(err.splitlines()) == 1
    assert "is not a gridgnn profile" in err and keyword in err


def test_the_valid_profile_plans(tmp_path, capsys):
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(_PROFILE))
    assert main(["plan", "--num-nodes", "1000", "--num-edges", "5000", "--num-features", "8", "--num-classes",
                 "2", "--profile", str(path), "--nprocs", "4"]) == 0
    assert "P = 4: best" in capsys.readouterr().out


_WORLD = 2
_COMM = {"bytes": [8, 8], "calls": [1, 1], "by_phase": None, "calls_by_phase": None, "eval_bytes": [0, 0],
         "comm_time_s": 0.1, "exposed_comm_time_s": 0.05, "compute_time_s": 0.2, "peak_memory_bytes": [9, 9]}


def _comm_entry(**change) -> dict:
    from gridgnn.grid.comm_records import PHASES

    entry = {**_COMM, "by_phase": {p: [1, 1] for p in PHASES}, "calls_by_phase": {p: [0, 0] for p in PHASES}}
    entry.update(change)
    return entry


@pytest.mark.parametrize(("comm", "keyword"), [
    (lambda: [_comm_entry()], "expected a list of 2 entries"),
    (lambda: {"epochs": 2}, "expected a list of 2 entries"),
    (lambda: [_comm_entry(), _comm_entry(bytes=[8])], "communication history of epoch 2"),
    (lambda: [_comm_entry(), _comm_entry(calls=["1", "1"])], "communication history of epoch 2"),
    (lambda: [None, _comm_entry(by_phase={"spmm_forward": [1, 1]})], "communication history of epoch 2"),
    (lambda: [_comm_entry(comm_time_s="slow"), None], "communication history of epoch 1"),
], ids=["too-short", "not-a-list", "ragged-ranks", "string-counts", "missing-phases", "string-time"])
def test_a_checkpoint_with_a_malformed_comm_history_is_refused_before_training(tmp_path, capsys, comm, keyword):
    folder, out = tmp_path / "ck", tmp_path / "m.json"
    base = ["train", "--dataset", SMALL, "--checkpoint-dir", str(folder), "--quiet", "--metrics-out", str(out)]
    assert main([*base, "--epochs", "2"]) == 0
    manifest_file = latest_checkpoint(folder) / MANIFEST
    manifest = json.loads(manifest_file.read_text())
    manifest["history"]["comm"] = comm()
    manifest_file.write_text(json.dumps(manifest))
    before = {p.name: p.stat().st_mtime_ns for p in folder.iterdir() if p.name != ".gridgnn-lock"}
    status = main([*base, "--epochs", "4", "--resume"])
    err = capsys.readouterr().err
    assert status == 2 and len(err.splitlines()) == 1 and keyword in err and "is malformed" in err
    after = {p.name: p.stat().st_mtime_ns for p in folder.iterdir() if p.name != ".gridgnn-lock"}
    assert after == before  # nothing written or pruned


@pytest.mark.parametrize(("change", "keyword"), [
    ({"num_nodes": "60"}, "field 'num_nodes' must be an integer"),
    ({"num_classes": 2**62}, "field 'num_classes' must be an integer [1, 16777216]"),
    ({"num_features": True}, "field 'num_features' must be an integer"),
    ({"name": ["x"]}, "field 'name' must be a str"),
    ({"meta": []}, "graph meta must be a JSON object"),
    ({"meta": {"format": {"a": 1}}}, "graph meta entry 'format'"),
], ids=["count-is-a-string", "classes-2-to-the-62", "count-is-a-bool", "name-is-a-list", "meta-is-a-list",
        "meta-format-is-an-object"])
def test_a_prepared_manifest_that_breaks_its_schema_is_refused(tmp_path, change, keyword):
    folder = prepare_graph(csbm(nodes=60, classes=2, features=4), tmp_path / "prepared")
    manifest_file = folder / "prepared.json"
    manifest_file.write_text(json.dumps({**json.loads(manifest_file.read_text()), **change}))
    with pytest.raises(DataError, match="^prepared graph .*" + keyword.replace("[", r"\[").replace("]", r"\]")):
        open_prepared(folder)


def test_a_manifest_whose_nonfinite_list_points_nowhere_is_malformed(tmp_path):
    folder = tmp_path / "ck"
    assert main(["train", "--dataset", SMALL, "--epochs", "2", "--checkpoint-dir", str(folder), "--quiet"]) == 0
    manifest_file = latest_checkpoint(folder) / MANIFEST
    manifest = json.loads(manifest_file.read_text())
    for listed in ({"/history/epochs/9/loss": "NaN"}, {"/history/epochs/0/loss": "NaN"}, ["NaN"]):
        manifest_file.write_text(json.dumps({**manifest, "nonfinite": listed}))
        with pytest.raises(CheckpointError, match="is malformed"):
            read_manifest(latest_checkpoint(folder))


# --- 6. output and names ----------------------------------------------------------------------------------


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL a process group started with ``start_new_session`` (a launcher and any worker left)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def test_a_closed_pipe_ends_a_distributed_run_quietly_with_141(tmp_path):
    run = subprocess.Popen([sys.executable, "-m", "gridgnn", "train", "--dataset", SMALL, "--algo", "1d",
                            "--nprocs", "2", "--threads", "1", "--epochs", "100000", "--progress"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO_ROOT,
                           env=_env(TMPDIR=str(tmp_path)), start_new_session=True)
    watchdog = threading.Timer(150, _kill_group, [run])  # no read below can block past it
    watchdog.start()
    try:
        first = run.stdout.readline()
        run.stdout.close()  # as `| head -n 1` does
        _, err = run.communicate(timeout=120)
        group_left = _group_alive(run.pid)
    finally:
        watchdog.cancel()
        _kill_group(run)
        run.wait()
    assert first.startswith(b"task       multiclass") and err == b""  # the launcher's first line; then quiet
    assert run.returncode == 141
    assert not group_left, "workers outlived the launcher"
    assert not any(tmp_path.glob(f"{PREPARED_PREFIX}*")), "the prepared graph was left behind"


def _group_alive(pgid: int, within_s: float = 5.0) -> bool:
    """True when some process of group ``pgid`` still runs after ``within_s`` seconds."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        time.sleep(0.05)
    return True


def test_the_launcher_sees_a_closed_stdout_and_prefers_it_to_the_lost_peers_it_causes(tmp_path):
    """The launcher ends a run whose stdout reader is gone (141) without waiting for rank 0 to write; and a
    peer that lost rank 0 (status 3) reaped before rank 0's own 141 is not blamed."""
    from gridgnn.launch.local import _wait, stdout_closed

    read_end, write_end = os.pipe()
    try:
        assert not stdout_closed(write_end)
        os.close(read_end)
        assert stdout_closed(write_end)
    finally:
        os.close(write_end)
    with open(tmp_path / "f", "w") as regular:
        assert not stdout_closed(regular.fileno())
    rank0 = subprocess.Popen(["sh", "-c", "sleep 0.3; exit 141"])
    peer = subprocess.Popen(["sh", "-c", "exit 3"])
    peer.wait()
    logs = [open(tmp_path / f"log{r}", "w+") for r in range(2)]
    try:
        assert _wait([rank0, peer], logs) == 141
    finally:
        rank0.kill()
        for log in logs:
            log.close()


def test_a_250_byte_metrics_name_is_written(tmp_path):
    out = tmp_path / ("m" * 245 + ".json")
    assert len(out.name.encode()) == 250
    assert main(["train", "--dataset", SMALL, "--epochs", "1", "--quiet", "--metrics-out", str(out)]) == 0
    assert _strict_json(out)["epochs"][0]["epoch"] == 1 and [p.name for p in tmp_path.iterdir()] == [out.name]


def _device(tmp: Path, name: str, minor: int) -> Path:
    """A character device like /dev/null (minor 3) or /dev/full (minor 7) in ``tmp`` (root only), so that a
    regression replaces a test file, never the machine's device."""
    path = tmp / name
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, minor))
        with open(path, "w"):
            pass
    except OSError:
        pytest.skip("cannot make or open a character device here (not root, or a nodev file system)")
    return path


def test_a_character_device_is_written_through_never_replaced(tmp_path):
    null = _device(tmp_path, "null", 3)
    assert main(["train", "--dataset", SMALL, "--epochs", "1", "--quiet", "--metrics-out", str(null)]) == 0
    assert stat.S_ISCHR(null.stat().st_mode) and sorted(p.name for p in tmp_path.iterdir()) == ["null"]


def test_a_full_device_names_the_file(tmp_path, capsys):
    full = _device(tmp_path, "full", 7)
    assert main(["train", "--dataset", SMALL, "--epochs", "1", "--quiet", "--metrics-out", str(full)]) == 2
    assert capsys.readouterr().err == f"gridgnn: error: cannot write '{full}': No space left on device\n"
    assert stat.S_ISCHR(full.stat().st_mode)


def test_no_space_while_replacing_names_the_file_and_keeps_the_old_one(tmp_path, monkeypatch):
    out = tmp_path / "m.json"
    write_json_atomic(out, {"old": 1})

    def full(*args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("gridgnn.train.outputs.metrics.os.replace", full)
    with pytest.raises(ConfigError, match=f"cannot write '{out}': No space left on device"):
        write_json_atomic(out, {"new": 2})
    assert json.loads(out.read_text()) == {"old": 1} and [p.name for p in tmp_path.iterdir()] == ["m.json"]


def test_a_fifo_and_a_symlink_are_written_through(tmp_path):
    fifo, target = tmp_path / "pipe", tmp_path / "real.json"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    assert main(["train", "--dataset", SMALL, "--epochs", "1", "--quiet", "--metrics-out", str(fifo)]) == 0
    reader.join(timeout=60)
    assert json.loads(received[0])["epochs"][0]["epoch"] == 1 and stat.S_ISFIFO(fifo.stat().st_mode)
    target.write_text("{}")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert main(["train", "--dataset", SMALL, "--epochs", "1", "--quiet", "--metrics-out", str(link)]) == 0
    assert link.is_symlink() and json.loads(target.read_text())["epochs"][0]["epoch"] == 1


def test_a_dataset_name_that_is_not_utf8_prints_escaped(tmp_path, capsys):
    folder = Path(os.fsdecode(bytes(tmp_path) + b"/caf\xe9"))
    folder.mkdir()
    (folder / "g.txt").write_text("0 1\n1 2\n2 3\n3 0\n")
    out = folder / "m.json"
    assert main(["train", "--dataset", str(folder / "g.txt"), "--epochs", "1", "--metrics-out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "caf\\udce9" in printed and "dataset    g:" in printed
    assert _strict_json(out)["dataset"]["meta"]["source"].endswith("caf\udce9/g.txt")
