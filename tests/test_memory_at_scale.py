"""Memory per rank against the planner on a graph large enough for graph data to dominate (issues 5 and 7).

Runs benchmarks/scale_rmat.py (prepare once; the workers memory-map the graph) on R-MAT 2^21 with edge
factor 16 (about 64 M stored non-zeros): 1D, 1.5D and 2D at P = 4, and compares every rank's training peak
(the resident set's high-water mark, reset when set-up ends) with the model plus the interpreter's own
resident set measured in the same run. Slow (minutes): ``python -m pytest -m slow tests/test_memory_at_scale.py``.
The 2^22 run is in results/scale/.

What holds (measured: 1D 0.81-0.83, 1.5D 0.70-0.72, 2D 0.74-0.78): the model never under-predicts (the
planner's ``fits`` errs on the safe side), and it over-predicts by less than 40 %. Issue 7's goal, within 25 %
both ways, is not met on 1.5D and 2D: the activation term over-counts what autograd keeps at 64 features.
(Before workers released the memory-mapped graph's file pages and the peak was reset after set-up, those pages
filled the gap and every rank read within 10 %.)
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest


@pytest.mark.slow
def test_peak_memory_per_rank_is_at_most_the_model_and_above_60_percent_of_it(tmp_path):
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
            assert 0.6 <= ratio <= 1.05, (run["algo"], rank, ratio)
