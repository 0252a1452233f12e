"""scripts/gpu_check.py, the GPU check, on a machine without a GPU: it says which sections it skipped, and its
dry run on the CPU runs every section it is asked for and writes what it found as JSON. Also: the
single-process trainer keeps its labels and masks on its layout's device (what a CUDA run needs)."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest
import torch
from model_helpers import REPO_ROOT, random_graph

from gridgnn.config import TrainConfig
from gridgnn.nn.layout import LocalLayout
from gridgnn.train.loop.trainer import Trainer

SECTIONS = ("models_cuda_vs_cpu", "grid_gloo_cuda", "cli_train", "nccl", "pyg_timing")


def _script():
    spec = importlib.util.spec_from_file_location("gpu_check", REPO_ROOT / "scripts" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: nothing is skipped")
def test_without_cuda_each_gpu_section_says_skipped_and_the_document_is_complete(tmp_path, capsys):
    out = tmp_path / "gpu.json"
    assert _script().main(["--tiny", "--out", str(out)]) == 0
    found = json.loads(out.read_text())
    assert {"format", "version", "device", "tolerance", "environment", "seconds", "passed", *SECTIONS} <= set(found)
    assert found["device"] == "none" and found["passed"] is True
    assert all(found[key]["status"] == "skipped: no cuda" for key in SECTIONS)
    assert found["environment"]["torch"] == torch.__version__ and found["environment"]["cuda_available"] is False
    assert found["tolerance"] == {"loss_rtol": 1e-3, "acc_atol": 0.02}
    assert capsys.readouterr().out.splitlines()[-1].startswith("gpu check: passed (none)")


def test_a_dry_run_on_the_cpu_runs_the_models_grid_and_timing_sections(tmp_path, capsys):
    pytest.importorskip("torch_geometric")
    out = tmp_path / "gpu.json"
    assert _script().main(["--tiny", "--device", "cpu", "--models", "gcn,gat", "--algos", "1d,2d",
                           "--sections", "models,grid,timing", "--out", str(out)]) == 0
    found = json.loads(out.read_text())
    assert found["device"] == "cpu" and found["passed"] is True
    models = found["models_cuda_vs_cpu"]
    assert set(models) == {"gcn", "gat", "seconds"}
    for model in ("gcn", "gat"):
        assert models[model]["pass"] and len(models[model]["cpu"]["loss"]) == 3
        assert models[model]["max_loss_rel_diff"] == 0.0  # the same device twice: the same numbers
    grid = found["grid_gloo_cuda"]
    low = "2d 2x2 --comm-precision bf16"
    assert set(grid) == {"reference", "1d 4", "2d 2x2", low, "seconds"}
    for name, shape in (("1d 4", "4"), ("2d 2x2", "2x2")):
        assert grid[name]["pass"] and grid[name]["grid"] == shape and grid[name]["devices"] == ["cpu"] * 4
        assert grid[name]["max_loss_rel_diff"] < 1e-5
        assert grid[name]["loss"] == pytest.approx(grid["reference"]["loss"], rel=1e-5)
    assert grid[low]["pass"] and 0 < grid[low]["max_loss_rel_diff"] < 3e-2  # rounded, and close
    timing = found["pyg_timing"]
    assert set(timing) == {"gcn", "gat", "note", "seconds"}
    for model in ("gcn", "gat"):
        row = timing[model]
        assert row["ratio_gridgnn_over_pyg"] == pytest.approx(row["gridgnn_median_step_s"] / row["pyg_median_step_s"])
    assert found["nccl"]["status"] == "not asked for (--sections)"
    capsys.readouterr()


def test_the_cli_section_trains_through_gridgnn_train_and_reads_the_model_file_back(tmp_path, capsys):
    """The dry run of ``cli_train``: ``gridgnn train`` as is and with CUDA hidden (both the CPU here), the
    metrics file's ``device`` checked, and the model file's predictions equal to the predictions file's."""
    out = tmp_path / "gpu.json"
    assert _script().main(["--tiny", "--device", "cpu", "--models", "gcn", "--sections", "cli",
                           "--out", str(out)]) == 0
    row = json.loads(out.read_text())["cli_train"]["gcn"]
    assert row["pass"] and row["model_file_predicts"] is True
    assert row["devices"] == {"cpu_run": "cpu", "run": "cpu", "expected": "cpu"}
    assert row["max_loss_rel_diff"] == 0.0 and len(row["loss"]) == 3
    capsys.readouterr()


def test_a_run_whose_device_is_not_the_expected_one_fails(tmp_path, monkeypatch):
    script = _script()
    run = {"device": "cpu", "loss": [1.0], "accuracy": {"train": 1.0, "val": 1.0, "test": 1.0}}
    monkeypatch.setattr(script, "cli_run", lambda *args: dict(run))
    monkeypatch.setattr(script, "file_predictions_agree", lambda *args: True)
    found = script.cli_section("cuda", script.sizes(True), ("gcn",))
    assert found["gcn"]["devices"]["run"] == "cpu" and found["gcn"]["pass"] is False
    assert script.cli_section("cpu", script.sizes(True), ("gcn",))["gcn"]["pass"] is True


def test_sections_past_the_time_budget_are_named_and_fail_the_check(tmp_path, capsys):
    out = tmp_path / "gpu.json"
    assert _script().main(["--tiny", "--device", "cpu", "--budget-s", "0", "--out", str(out)]) == 1
    found = json.loads(out.read_text())
    assert found["models_cuda_vs_cpu"]["status"] == "skipped: out of time (--budget-s 0)"
    assert found["passed"] is False
    assert capsys.readouterr().out.splitlines()[-1].startswith("gpu check: FAILED (cpu)")


def test_a_failing_comparison_fails_the_check():
    script = _script()
    reference = {"loss": [1.0, 0.9], "accuracy": {"train": 0.5, "val": 0.5, "test": 0.5}}
    near = {"loss": [1.0005, 0.9], "accuracy": {"train": 0.51, "val": 0.5, "test": 0.5}}
    far = {"loss": [1.0, 0.95], "accuracy": {"train": 0.5, "val": 0.5, "test": 0.5}}
    assert script.agreement(reference, near)["pass"] and not script.agreement(reference, far)["pass"]
    assert not script.agreement(reference, {**near, "loss": [float("nan"), 0.9]})["pass"]
    document = {"models_cuda_vs_cpu": {"gcn": {"pass": True}, "gat": {"error": "x", "pass": False}},
                "grid_gloo_cuda": {"status": "skipped: no cuda"}, "nccl": {"status": "skipped: no cuda"}}
    assert not script._passed(document)
    document["models_cuda_vs_cpu"]["gat"]["pass"] = True
    assert script._passed(document)


def test_the_single_process_trainer_puts_labels_and_masks_on_its_layouts_device(monkeypatch):
    """A `LocalSpMM` on CUDA trains there: the labels and masks must follow (else the loss mixes devices).
    The ``meta`` device stands in for CUDA here."""
    monkeypatch.setattr(LocalLayout, "device", property(lambda self: torch.device("meta")))
    trainer = Trainer(TrainConfig(), random_graph(), lambda x: x)
    assert trainer.labels.device.type == "meta"
    assert all(mask.device.type == "meta" for mask in trainer.masks)
    assert next(trainer.model.parameters()).device.type == "meta"
