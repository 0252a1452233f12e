"""CI keeps benchmarks/scale_rmat.py working on a tiny graph (the real run is in results/scale/)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest


@pytest.mark.slow  # the benchmark script end to end (minutes on a loaded machine)
def test_scale_benchmark_tiny(tmp_path):
    spec = importlib.util.spec_from_file_location("scale_rmat", Path("benchmarks/scale_rmat.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    report = module.main(["--scale", "9", "--nprocs", "2", "--epochs", "2", "--algos", "2d",
                          "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work")])
    assert [run["algo"] for run in report["runs"]] == ["2d"]
    for run in report["runs"]:
        assert run["bytes_per_rank_all"] == run["predicted_bytes_per_rank"]  # planner = measurement
        assert len(run["predicted_memory_bytes"]) == len(run["peak_bytes"]) == 2
        assert min(run["peak_bytes"]) > 0 and run["median_epoch_s"] > 0
    assert json.loads((tmp_path / "out" / "scale.json").read_text())["num_nodes"] == 512
    assert "| 2d | 1x2 |" in (tmp_path / "out" / "scale.md").read_text()
