"""Checkpoints: a resumed run ends exactly where an uninterrupted one does, on the same or another grid;
saving is atomic; checkpoints of another run or damaged ones are refused with one line; torchrun restarts
resume by themselves."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import train_workers as tw

from gridgnn.cli.main import main
from gridgnn.config import TrainConfig
from gridgnn.errors import CheckpointError
from gridgnn.launch.spawn import run_workers
from gridgnn.train.checkpoint import store as ckpt
from gridgnn.train.checkpoint.manifest import MANIFEST, read_manifest
from gridgnn.train.checkpoint.naming import latest_checkpoint, list_checkpoints
from gridgnn.train.checkpoint.safe_reader import MetadataUnpickler, VerifiedReader, WeightsOnlyLoadPlanner
from gridgnn.train.checkpoint.store import read_weights
from gridgnn.train.run.training import run_training

DATA_ROOT = "../shared/datasets"
CORA = {"dataset": "cora", "data_root": DATA_ROOT}


def _run(tmp: Path, epochs: int, **kwargs):
    config = TrainConfig(**CORA, epochs=epochs, checkpoint_dir=str(tmp), quiet=True, **kwargs)
    return run_training(config)


def _without_times(metrics: dict) -> tuple[list, dict]:
    epochs = [{k: v for k, v in e.items() if k != "time_s"} for e in metrics["epochs"]]
    final = {k: v for k, v in metrics["final"].items() if "time" not in k}
    return epochs, final


def _max_abs_difference(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def test_resumed_run_ends_with_the_weights_and_metrics_of_an_uninterrupted_one(tmp_path):
    whole = _run(tmp_path / "whole", 12, checkpoint_every=4)
    _run(tmp_path / "parts", 7, checkpoint_every=4)  # saves after epochs 4 and 7 (the last)
    assert [e for e, _ in list_checkpoints(tmp_path / "parts")] == [4, 7]
    resumed = _run(tmp_path / "parts", 12, checkpoint_every=4, resume=True)
    assert resumed.metrics["resumed_from"] == {"checkpoint": str(tmp_path / "parts" / "epoch-00000007"),
                                               "epoch": 7}
    assert _without_times(resumed.metrics) == _without_times(whole.metrics)
    difference = _max_abs_difference(read_weights(tmp_path / "whole" / "epoch-00000012"),
                                     read_weights(tmp_path / "parts" / "epoch-00000012"))
    assert difference <= 1e-6


def test_keeps_the_newest_checkpoints_and_records_the_run(tmp_path):
    _run(tmp_path, 9, checkpoint_every=2, keep_checkpoints=3)
    assert [e for e, _ in list_checkpoints(tmp_path)] == [6, 8, 9]
    manifest = read_manifest(latest_checkpoint(tmp_path))
    assert manifest["epoch"] == 9 and len(manifest["history"]["epochs"]) == 9
    assert manifest["config"]["hidden"] == 16 and manifest["fingerprint"]["dataset"]["num_nodes"] == 2708
    assert set(manifest["files"]) >= {".metadata"}


def test_a_crash_while_saving_leaves_the_previous_checkpoint_the_newest(tmp_path, monkeypatch):
    _run(tmp_path, 4, checkpoint_every=2)

    def crash(folder, epoch, entries):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ckpt, "write_manifest", crash)  # the save's last step before the rename
    with pytest.raises(CheckpointError, match="No space left"):
        _run(tmp_path, 6, checkpoint_every=2, resume=True)
    monkeypatch.undo()
    assert not (tmp_path / ".partial-epoch-00000006").exists()  # a failed save removes its partial folder
    (tmp_path / ".partial-epoch-00000006").mkdir()  # what a kill during the save leaves: never read
    (tmp_path / ".partial-epoch-00000006" / ".metadata").write_bytes(b"cut short")
    assert latest_checkpoint(tmp_path).name == "epoch-00000004"
    resumed = _run(tmp_path, 6, checkpoint_every=2, resume=True)
    assert resumed.metrics["resumed_from"]["epoch"] == 4
    assert not (tmp_path / ".partial-epoch-00000006").exists()


def test_resume_without_a_checkpoint_starts_from_epoch_one(tmp_path):
    run = _run(tmp_path / "new", 3, resume=True)
    assert "resumed_from" not in run.metrics and len(run.metrics["epochs"]) == 3


def _folder_bytes(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(("flags", "message"), [
    (["--hidden", "32"], "model hidden is 16 there and 32 here"),
    (["--layers", "3"], "model layers is 2 there and 3 here"),
    (["--model", "sage"], "model kind is 'gcn' there and 'sage' here"),
    (["--dropout", "0.2"], "model dropout is 0.5 there and 0.2 here"),  # --lr may change (test_init_from)
    (["--dataset", "citeseer"], "dataset name is 'cora' there and 'citeseer' here"),
    (["--no-normalize-features"], "feature_normalization"),
    (["--epochs", "3"], "past --epochs 3"),
])
def test_a_checkpoint_of_another_run_is_refused_with_one_line(tmp_path, capsys, flags, message):
    _run(tmp_path / "ck", 4)
    before = _folder_bytes(tmp_path / "ck")
    metrics = tmp_path / "m.json"
    metrics.write_text("{}\n")
    argv = ["train", "--dataset", "cora", "--data-root", DATA_ROOT, "--epochs", "8", "--quiet",
            "--checkpoint-dir", str(tmp_path / "ck"), "--resume", "--metrics-out", str(metrics), *flags]
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gridgnn: error: checkpoint") and message in err[0], err
    assert _folder_bytes(tmp_path / "ck") == before
    assert metrics.read_text() == "{}\n"


def _forbidden_metadata(folder: Path, marker: Path) -> None:
    """Replace .metadata by a pickle that would create ``marker`` if unpickled, and fix the manifest."""
    payload = (b"cos\nsystem\n(V" + f"touch {marker}".encode() + b"\ntR.")
    (folder / ".metadata").write_bytes(payload)
    _rehash(folder)


def _rehash(folder: Path) -> None:
    manifest = json.loads((folder / MANIFEST).read_text())
    for name in manifest["files"]:
        data = (folder / name).read_bytes()
        manifest["files"][name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (folder / MANIFEST).write_text(json.dumps(manifest))


def _truncate(folder: Path, name: str) -> None:
    path = folder / name
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _flip_byte(folder: Path, name: str) -> None:
    path = folder / name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _metadata_pointing_outside(folder: Path, marker: Path) -> None:
    """Rewrite .metadata so that a data file lies outside the folder (a valid pickle, rehashed manifest)."""
    import pickle

    metadata = MetadataUnpickler((folder / ".metadata").open("rb")).load()
    for info in metadata.storage_data.values():
        info.relative_path = "../" + info.relative_path
    (folder / ".metadata").write_bytes(pickle.dumps(metadata))
    _rehash(folder)


DAMAGE = {
    "metadata-outside-folder": (_metadata_pointing_outside, "points outside its folder"),
    "truncated-data": (lambda f, m: _truncate(f, "__0_0.distcp"), "truncated or altered"),
    "flipped-byte": (lambda f, m: _flip_byte(f, "__0_0.distcp"), "does not match its SHA-256"),
    "truncated-metadata": (lambda f, m: _truncate(f, ".metadata"), "truncated or altered"),
    "missing-data-file": (lambda f, m: (f / "__0_0.distcp").unlink(), "is missing"),
    "no-manifest": (lambda f, m: (f / MANIFEST).unlink(), "no gridgnn-checkpoint.json"),
    "manifest-not-json": (lambda f, m: (f / MANIFEST).write_text("{not json"), "not valid JSON"),
    "manifest-other-format": (lambda f, m: (f / MANIFEST).write_text('{"format": "x"}'),
                              "unknown checkpoint format"),
    "forbidden-pickle": (_forbidden_metadata, "forbidden global"),
    "rehashed-garbage": (lambda f, m: ((f / "__0_0.distcp").write_bytes(b"\0" * 64), _rehash(f)),
                         "loading checkpoint"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_checkpoint_is_refused_with_one_line_and_runs_no_code(tmp_path, capsys, damage):
    _run(tmp_path / "ck", 2)
    folder = latest_checkpoint(tmp_path / "ck")
    marker = tmp_path / "pwned"
    harm, message = DAMAGE[damage]
    harm(folder, marker)
    before = _folder_bytes(tmp_path / "ck")
    capsys.readouterr()
    argv = ["train", "--dataset", "cora", "--data-root", DATA_ROOT, "--epochs", "4", "--quiet",
            "--checkpoint-dir", str(tmp_path / "ck"), "--resume", "--metrics-out", str(tmp_path / "m.json")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and str(folder) in err[0], err
    assert not marker.exists(), "the checkpoint ran code"
    assert _folder_bytes(tmp_path / "ck") == before
    assert not (tmp_path / "m.json").exists()


def test_weights_only_planner_refuses_pickled_objects_in_the_state(tmp_path):
    """DCP stores non-tensor entries as pickles and loads them with weights_only=False; ours does not."""
    import torch.distributed.checkpoint as dcp

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {tmp_path / 'pwned'}",))

    with ckpt._quiet_single_process():
        dcp.save({"x": Evil()}, checkpoint_id=str(tmp_path / "raw"), no_dist=True)
        state = {"x": None}
        with pytest.raises(BaseException, match="Weights only load failed|Unsupported global"):
            dcp.load(state, storage_reader=VerifiedReader(tmp_path / "raw"),
                     planner=WeightsOnlyLoadPlanner(), no_dist=True)
    assert not (tmp_path / "pwned").exists()


def _grid_weights(config_kwargs: dict, world: int) -> dict:
    outs = run_workers(tw.train_worker, world, config_kwargs, timeout_s=180)
    for out in outs[1:]:  # replicated weights are identical on every rank
        for a, b in zip(outs[0]["weights"], out["weights"], strict=True):
            np.testing.assert_array_equal(a, b)
    return outs[0]


def test_checkpoint_of_a_2d_grid_resumes_on_a_1d_grid_and_on_its_own(tmp_path):
    common = {**CORA, "epochs": 10, "checkpoint_every": 5, "quiet": True}
    # Uninterrupted references on each grid.
    ref_2d = _grid_weights({**common, "algo": "2d", "checkpoint_dir": str(tmp_path / "ref2d")}, 4)
    ref_1d = _grid_weights({**common, "algo": "1d", "checkpoint_dir": str(tmp_path / "ref1d")}, 2)
    # 2D P=4 for 6 epochs, then 1D P=2 to epoch 10 (another P, algorithm and layout).
    _grid_weights({**common, "epochs": 6, "algo": "2d", "checkpoint_dir": str(tmp_path / "moved")}, 4)
    moved = _grid_weights({**common, "algo": "1d", "checkpoint_dir": str(tmp_path / "moved"), "resume": True}, 2)
    # 2D P=4 for 6 epochs, then 2D P=4 again: identical to the uninterrupted 2D run.
    _grid_weights({**common, "epochs": 6, "algo": "2d", "checkpoint_dir": str(tmp_path / "same")}, 4)
    same = _grid_weights({**common, "algo": "2d", "checkpoint_dir": str(tmp_path / "same"), "resume": True}, 4)

    for a, b in zip(same["weights"], ref_2d["weights"], strict=True):
        assert np.abs(a - b).max() <= 1e-6
    assert same["loss"] == ref_2d["loss"] and same["acc"] == ref_2d["acc"]
    # Across grids only the summation order differs (the first 6 epochs ran on 2D): float rounding.
    for a, b in zip(moved["weights"], ref_1d["weights"], strict=True):
        assert np.abs(a - b).max() <= 1e-5
    np.testing.assert_allclose(moved["loss"], ref_1d["loss"], rtol=1e-5)
    assert moved["loss"][:6] == ref_2d["loss"][:6]  # the history comes from the 2D run
    assert len(moved["comm"]) == 10
    assert [len(c["bytes"]) for c in moved["comm"]] == [4] * 6 + [2] * 4


def _descendants(pid: int) -> dict[int, dict[str, str]]:
    """pid -> environment of every live descendant of ``pid`` (from /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = {}, [pid]
    while frontier:
        parent = frontier.pop()
        for child, ppid in parents.items():
            if ppid == parent and child not in found:
                try:
                    raw = Path(f"/proc/{child}/environ").read_text().split("\0")
                except OSError:
                    continue
                found[child] = dict(item.split("=", 1) for item in raw if "=" in item)
                frontier.append(child)
    return found


@pytest.mark.skipif(shutil.which("torchrun") is None or not Path("/proc").is_dir(),
                    reason="needs torchrun and /proc")
@pytest.mark.slow  # torchrun restarts the job; resuming is tested in-process above, torchrun in test_cli_distributed
def test_torchrun_restart_resumes_from_the_last_checkpoint(tmp_path):
    epochs = 40
    flags = ["--dataset", "csbm:nodes=3000", "--epochs", str(epochs), "--algo", "1d", "--quiet",
             "--checkpoint-dir", str(tmp_path / "ck"), "--checkpoint-every", "1",
             "--metrics-out", str(tmp_path / "m.json"), "--timeout", "20"]
    proc = subprocess.Popen(["torchrun", "--nproc-per-node", "2", "--max-restarts", "1", "--monitor-interval",
                             "0.2", "-m", "gridgnn", "train", *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while latest_checkpoint(tmp_path / "ck") is None:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-3000:]
            time.sleep(0.05)
        victim = next(pid for pid, env in _descendants(proc.pid).items()
                      if env.get("RANK") == "1" and env.get("TORCHELASTIC_RESTART_COUNT") == "0")
        os.kill(victim, signal.SIGKILL)
        _, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]
    metrics = json.loads((tmp_path / "m.json").read_text())
    assert 1 <= metrics["resumed_from"]["epoch"] < epochs
    assert [e["epoch"] for e in metrics["epochs"]] == list(range(1, epochs + 1))
    local = run_training(TrainConfig(dataset="csbm:nodes=3000", epochs=epochs, quiet=True))
    np.testing.assert_allclose([e["loss"] for e in metrics["epochs"]], [r.loss for r in local.result.epochs],
                               rtol=1e-5)


def test_a_fresh_run_refuses_a_folder_holding_another_runs_checkpoints(tmp_path, capsys):
    _run(tmp_path, 2)
    before = _folder_bytes(tmp_path)
    capsys.readouterr()
    argv = ["train", "--dataset", "cora", "--data-root", DATA_ROOT, "--epochs", "3", "--quiet",
            "--checkpoint-dir", str(tmp_path)]
    assert main(argv) == 2
    assert "holds checkpoints of another run (newest: epoch 2)" in capsys.readouterr().err
    assert _folder_bytes(tmp_path) == before


def test_comm_summary_of_a_run_resumed_on_a_smaller_grid():
    from gridgnn.cli.train_cmd import format_comm_summary
    from gridgnn.grid.comm_records import PHASES

    def epoch(ranks: int) -> dict:
        by_phase = {phase: [8] * ranks for phase in PHASES}
        return {"comm": {"bytes": [8 * len(PHASES)] * ranks, "by_phase": by_phase}, "comm_time_s": 0.1,
                "exposed_comm_time_s": 0.05, "compute_time_s": 0.2}

    metrics = {"config": {"algo": "1d", "grid_shape": "2", "world_size": 2},
               "epochs": [epoch(4), epoch(4), epoch(2)]}
    text = format_comm_summary(metrics)
    assert "1d 2 (2 processes)" in text and f"{8 * len(PHASES)} B per rank" in text


def test_comm_summary_when_every_epoch_came_from_another_grid():
    # issue 40: resuming at the final epoch on another world size ran no epoch here (IndexError before)
    from gridgnn.cli.train_cmd import format_comm_summary
    from gridgnn.grid.comm_records import PHASES

    epoch = {"comm": {"bytes": [8] * 2, "by_phase": {phase: [1] * 2 for phase in PHASES}}, "comm_time_s": 0.1,
             "exposed_comm_time_s": 0.05, "compute_time_s": 0.2}
    metrics = {"config": {"algo": "1d", "grid_shape": "4", "world_size": 4}, "epochs": [epoch, epoch]}
    assert format_comm_summary(metrics).splitlines()[1] == "comm       no epoch ran on this grid"


def test_a_reordered_runs_checkpoint_resumes_on_another_p_and_without_the_reordering(tmp_path):
    """Issue 40: a ``--reorder metis`` checkpoint taken on P=2 resumes on P=4 (METIS cuts into 4 parts: another
    vertex order) and with ``--reorder none``, each ending as the uninterrupted run on its grid (≤ 1e-5)."""
    common = {"dataset": "csbm:nodes=300", "epochs": 6, "checkpoint_every": 3, "quiet": True, "algo": "1d",
              "reorder": "metis"}
    ref_4 = _grid_weights({**common, "checkpoint_dir": str(tmp_path / "ref4")}, 4)
    ref_none = _grid_weights({**common, "reorder": "none", "checkpoint_dir": str(tmp_path / "ref-none")}, 2)
    for folder in ("to4", "to-none"):
        _grid_weights({**common, "epochs": 3, "checkpoint_dir": str(tmp_path / folder)}, 2)
    moved = _grid_weights({**common, "checkpoint_dir": str(tmp_path / "to4"), "resume": True}, 4)
    plain = _grid_weights({**common, "reorder": "none", "checkpoint_dir": str(tmp_path / "to-none"),
                           "resume": True}, 2)
    for resumed, reference in ((moved, ref_4), (plain, ref_none)):
        for a, b in zip(resumed["weights"], reference["weights"], strict=True):
            assert np.abs(a - b).max() <= 1e-5
        np.testing.assert_allclose(resumed["loss"], reference["loss"], rtol=1e-5)
        assert len(resumed["loss"]) == 6
