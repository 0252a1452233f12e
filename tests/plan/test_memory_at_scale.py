"""Memory per rank against the planner on a graph large enough for graph data to dominate (issues 5 and 7).

Runs benchmarks/scale_rmat.py (prepare once; the workers memory-map the graph) on R-MAT 2^21 with edge
factor 16 (about 64 M stored non-zeros): 1D, 1.5D and 2D at P = 4, and compares every rank's training peak
(the resident set's high-water mark, reset when set-up ends) with the model plus the interpreter's own
resident set measured in the same run. Slow (minutes): ``python -m pytest -m slow tests/plan/test_memory_at_scale.py``.
The 2^22 run is in results/scale/.

Every rank within 25 % (2^22 with this model: 1D 0.98-1.04, 1.5D 0.91-0.93, 2D 0.80-0.84, 3D 0.79-0.86;
see results/scale/). Before workers released the memory-mapped graph's file pages and the
peak was reset after set-up, those pages (0.6-0.9 GiB per rank) hid an activation term that counted twice
what autograd keeps; both were fixed together.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest


@pytest.mark.slow
def test_peak_memory_per_rank_is_within_25_percent_of_the_model(tmp_path):
    spec = importlib.util.spec_from_file_location("scale_rmat", Path("benchmarks/scale_rmat.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    report = module.main(["--scale", "21", "--epochs", "2", "--nprocs", "4", "--algos", "1d", "1.5d", "2d",
                          "--work", str(tmp_path / "work"), "--out", str(tmp_path / "out")])
    _check(report)


def _check(report: dict) -> None:
    baseline = report["baseline_bytes"]
    for run in report["runs"]:
        for rank, (measured, model) in enumerate(zip(run["peak_bytes"], run["predicted_memory_bytes"],
                                                     strict=True)):
            assert model > baseline, "the graph data should dominate at this size"
            ratio = measured / (model + baseline)
            assert 0.75 <= ratio <= 1.25, (run["algo"], rank, ratio)
