"""Tiny runs of the model-kind benchmark scripts (accuracy_models.py, pyg_models_compare.py, accuracy_gat.py,
pyg_gat_compare.py), only to keep them working; they measure nothing."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from model_helpers import shared_datasets

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
TINY = "csbm:nodes=240,classes=3,features=20"  # 20 + 30 per class leave 90 to test


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_accuracy_models_and_speed_scripts_tiny(tmp_path):
    pytest.importorskip("torch_geometric")
    accuracy = _load("accuracy_models")
    records = accuracy.main(["--dataset", TINY, "--seeds", "2", "--max-epochs", "2", "--json",
                             str(tmp_path / "a.json"), "--markdown", str(tmp_path / "a.md")])
    assert [r["model"] for r in records] == ["sage", "gat", "gin", "pyg-gin"]
    assert all(len(r["test_acc"]) == 2 and 0.0 <= r["mean"] <= 1.0 for r in records)
    assert json.loads((tmp_path / "a.json").read_text())["records"][0]["dataset"] == TINY
    assert "| sage |" in (tmp_path / "a.md").read_text()
    assert [accuracy._feature_norm("sage", f) for f in ("setting", "default", "raw")] == [False, None, False]
    assert accuracy._feature_norm("gin", "setting") is None
    speed = _load("pyg_models_compare")
    records = speed.main(["--dataset", TINY, "--epochs", "2", "--markdown", str(tmp_path / "s.md")])
    assert [r["model"] for r in records] == ["sage", "gin"]
    assert all(r["ratio"] > 0 and len(r["pyg"]["epoch_times_s"]) == 2 for r in records)


def test_gat_accuracy_and_speed_scripts_tiny(tmp_path):
    pytest.importorskip("torch_geometric")
    accuracy = _load("accuracy_gat")
    data_root = str(shared_datasets())
    records = accuracy.main(["--dataset", "cora", "--seeds", "1", "--max-epochs", "2", "--data-root", data_root,
                             "--json", str(tmp_path / "a.json"), "--markdown", str(tmp_path / "a.md")])
    assert records[0]["dataset"] == "cora" and 0.0 <= records[0]["mean"] <= 1.0
    assert json.loads((tmp_path / "a.json").read_text())["records"][0]["setting"]["heads"] == 8
    speed = _load("pyg_gat_compare")
    records = speed.main(["--dataset", TINY, "--epochs", "2", "--json", str(tmp_path / "s.json")])
    assert records[0]["ratio"] > 0 and len(records[0]["pyg"]["epoch_times_s"]) == 2
