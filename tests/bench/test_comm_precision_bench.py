"""benchmarks/comm_precision.py: its report says what its records hold (deltas, flags, byte ratios), and a tiny
real study (two `gridgnn train` runs on 2 workers, 2 epochs) writes records and a table that agree."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "comm_precision.py"
TINY = "csbm:nodes=120,classes=3,features=20"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_comm_precision", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _record(precision: str, seed: int, acc: float, wire: int, every: int, grid: str = "1d") -> dict:
    return dict(model="gcn", dataset="cora", precision=precision, seed=seed, grid=grid, status=0, command="c",
                test_acc=acc, wire_bytes=wire, all_bytes=every, step_s=0.01)


def _table_rows(text: str) -> dict[tuple[str, str], list[str]]:
    """The accuracy table's cells by (grid, precision)."""
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 15 and cells[0] in {"gcn", "sage", "gin", "gat"}:
            rows[(cells[2], cells[3])] = cells
    return rows


def test_report_deltas_flags_and_ratios(bench, tmp_path):
    records = [_record("fp32", 0, 0.800, 1000, 1400), _record("fp32", 1, 0.810, 1000, 1400),
               _record("fp32", 2, 0.900, 1000, 1400),  # a seed the others lack: not in their Δ
               _record("bf16", 0, 0.798, 500, 900), _record("bf16", 1, 0.808, 500, 900),  # -0.2 points
               _record("int8", 0, 0.790, 270, 670), _record("int8", 1, 0.806, 280, 680),  # -0.7 points
               _record("fp32", 0, 0.800, 0, 0, grid="local"), _record("fp32", 1, 0.811, 0, 0, grid="local"),
               {**_record("fp16", 0, 0.0, 0, 0), "status": 1, "stderr": "Traceback\nRuntimeError: boom\n"}]
    rows = {(r["grid"], r["precision"]): r for r in bench.summarize(records)}
    assert rows[("1d", "bf16")]["delta"] == pytest.approx(-0.2)
    assert not rows[("1d", "bf16")]["flagged"] and rows[("1d", "bf16")]["adaqp"] == "within"
    assert rows[("1d", "int8")]["delta"] == pytest.approx(-0.7)
    assert rows[("1d", "int8")]["flagged"] and rows[("1d", "int8")]["adaqp"] == "above"
    assert rows[("1d", "int8")]["wire_ratio"] == pytest.approx(0.275)  # median of 0.27 and 0.28
    assert rows[("1d", "bf16")]["all_ratio"] == pytest.approx(900 / 1400)
    assert rows[("1d", "int8")]["paired_t"] == pytest.approx(-0.7 / 0.3)  # Δs -1.0, -0.4: sd 0.6/√2, t = Δ/(sd/√2)
    assert rows[("1d", "fp32")]["delta"] is None and ("1d", "fp16") not in rows  # the failure is no cell
    document = {"commands": ["python benchmarks/comm_precision.py x"], "date": "d", "machine": "m",
                "records": records}
    text = bench.markdown(document)
    table = _table_rows(text)
    assert table[("1d", "int8")][7:11] == ["-0.70", "-2.33", "**flag**", "above"]  # t: -0.7 / (0.42 / √2)
    assert table[("1d", "bf16")][8:10] == ["-inf", ""] and table[("1d", "bf16")][12] == "0.500"  # equal Δs
    assert "| int8 | 1d | 1 | -0.70 | -0.70 | -2.33 | 1 | 1 | 0.275 |" in text
    assert "1 of 2 runs gave the same test accuracy" in text  # seed 1: 81.0 on 1d, 81.1 in one process
    assert "status 1: `c`: RuntimeError: boom" in text
    (tmp_path / "accuracy.json").write_text(json.dumps(document))
    bench.main(["--report", "--out", str(tmp_path), "--note", "Not run: the rest."])
    assert (tmp_path / "accuracy.md").read_text().endswith("Not run: the rest.\n\n")


def test_paired_t_of_the_per_seed_differences(bench):
    assert bench.paired_t([1.0]) is None  # one seed: no spread
    assert bench.paired_t([0.0, 0.0, 0.0]) == 0.0
    assert bench.paired_t([-0.2, -0.2 + 1e-14]) == float("-inf")  # equal up to rounding: no noise at all
    assert bench.paired_t([1.0, 2.0, 3.0]) == pytest.approx(2.0 / (1.0 / 3 ** 0.5))
    assert bench.paired_t([-4.0, 1.0, 2.0, 0.5]) == pytest.approx(-0.125 / (2.6575 / 2), rel=1e-4)


def test_plot_draws_the_deltas(bench, tmp_path):
    pytest.importorskip("matplotlib")
    records = [_record("fp32", 0, 0.80, 1000, 1400), _record("int8", 0, 0.79, 270, 670),
               _record("fp32", 0, 0.80, 1000, 1400, grid="2d"), _record("bf16", 0, 0.805, 500, 900, grid="2d")]
    drawn = bench.plot({"records": records}, tmp_path / "a.png")
    assert drawn == {"bf16 2d": [pytest.approx(0.5)], "int8 1d": [pytest.approx(-1.0)]}
    assert (tmp_path / "a.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow  # two real gridgnn train subprocesses (15-60 s); the report's logic is tested above
def test_tiny_study_writes_what_it_measured(bench, tmp_path):
    document = bench.main(["--models", "gcn", "--datasets", TINY, "--seeds", "0", "--precisions", "fp32", "bf16",
                           "--grids", "1d", "--nprocs", "2", "--epochs", "2", "--no-local", "--out", str(tmp_path)])
    saved = json.loads((tmp_path / "accuracy.json").read_text())
    assert saved["records"] == document["records"] and len(saved["records"]) == 2
    fp32, bf16 = saved["records"]
    assert fp32["status"] == bf16["status"] == 0, fp32.get("stderr")
    assert bf16["command"].endswith("--comm-precision bf16 --threads 1 --quiet")
    assert fp32["epochs_run"] == 2 and 0.0 <= bf16["test_acc"] <= 1.0
    assert bf16["wire_bytes"] * 2 == fp32["wire_bytes"] > 0  # 2 bytes a value on the wire against 4
    assert fp32["all_bytes"] - fp32["wire_bytes"] == bf16["all_bytes"] - bf16["wire_bytes"]  # the rest is fp32
    cells = _table_rows((tmp_path / "accuracy.md").read_text())[("1d", "bf16")]
    assert cells[11] == str(bf16["wire_bytes"]) and cells[12] == f"{bf16['wire_bytes'] / fp32['wire_bytes']:.3f}"
    assert cells[14] == f"{bf16['all_bytes'] / fp32['all_bytes']:.3f}"
    assert re.search(rf"^    {re.escape(saved['commands'][0])}$", (tmp_path / "accuracy.md").read_text(), re.M)


def test_timing_table_is_the_median_over_rounds(bench, tmp_path):
    records = [{**_record(p, 0, 0.8, w, w, grid="1d"), "step_s": s, "round": k}
               for k, (p, w, s) in enumerate([("fp32", 1000, 0.010), ("int8", 270, 0.030), ("fp32", 1000, 0.020),
                                              ("int8", 270, 0.010), ("fp32", 1000, 0.040), ("int8", 270, 0.015)])]
    (tmp_path / "timing.json").write_text(json.dumps({"commands": ["c"], "date": "d", "machine": "m",
                                                      "records": records}))
    bench.main(["--report", "--timing", "--out", str(tmp_path), "--note", "Loopback."])
    text = (tmp_path / "timing.md").read_text()
    assert text.endswith("Loopback.\n\n")
    assert "| cora | gcn | 1d | fp32 | 3 | 20.0 | 1.00 | 1000 |" in text
    assert "| cora | gcn | 1d | int8 | 3 | 15.0 | 0.75 | 270 |" in text


def test_gin_with_layer_norm_runs_as_gin_with_its_flag(bench):
    run = dict(model="gin-ln", dataset="amazon-photo", precision="int8", seed=2, grid="2d")
    command = bench.train_command(run, None, 200, 4)
    assert command[command.index("--model") + 1] == "gin"
    assert command[command.index("--gin-norm") + 1] == "layer" and "--hidden" in command
    plain = bench.train_command(dict(run, model="gin"), None, 200, 4)
    assert "--gin-norm" not in plain and plain[plain.index("--model") + 1] == "gin"
    assert "gin-ln" in bench.MODELS and "gin-ln" not in bench.DEFAULT_MODELS


def _study(tmp_path, name: str, records: list[dict], date: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "accuracy.json").write_text(json.dumps({"commands": [f"python benchmarks/comm_precision.py {name}"],
                                                      "date": date, "machine": "m", "records": records}))
    return folder


def test_merge_adds_the_runs_a_study_lacks(bench, tmp_path):
    main_study = _study(tmp_path, "main", [_record("fp32", 0, 0.80, 1000, 1400)], "d1")
    beside = _study(tmp_path, "beside", [_record("fp32", 0, 0.99, 1000, 1400),  # main has this run: not taken
                                         _record("bf16", 0, 0.79, 500, 900),
                                         {**_record("int8", 0, 0.0, 0, 0), "status": 1, "stderr": "x"}], "d2")
    document = bench.main(["--merge", str(beside), "--out", str(main_study)])
    saved = json.loads((main_study / "accuracy.json").read_text())
    assert saved == document
    assert [(r["precision"], r["test_acc"]) for r in saved["records"]] == [("fp32", 0.80), ("bf16", 0.79)]
    assert saved["commands"][:2] == ["python benchmarks/comm_precision.py main",
                                     "python benchmarks/comm_precision.py beside"]
    assert saved["commands"][2].startswith("python benchmarks/comm_precision.py --merge ")
    assert saved["date"] == "d1; d2"
    assert _table_rows((main_study / "accuracy.md").read_text())[("1d", "bf16")][7] == "-1.00"
    bench.main(["--merge", str(beside), "--out", str(main_study)])  # again: nothing new
    assert len(json.loads((main_study / "accuracy.json").read_text())["records"]) == 2


def test_append_skips_the_runs_the_study_holds(bench, tmp_path, monkeypatch):
    held = {**_record("fp32", 0, 0.80, 1000, 1400), "model": "gcn", "dataset": "cora"}
    failed = {**_record("bf16", 0, 0.0, 0, 0), "status": 1, "stderr": "x"}
    study = _study(tmp_path, "study", [held, failed], "d1")
    ran = []

    def fake_run(run, **kw):
        ran.append((run["precision"], run["grid"]))
        return {**run, "command": "c", "wall_s": 1.0, "status": 0, "test_acc": 0.8, "wire_bytes": 500,
                "all_bytes": 900, "step_s": 0.01}

    monkeypatch.setattr(bench, "run_one", fake_run)
    bench.main(["--models", "gcn", "--datasets", "cora", "--seeds", "0", "--precisions", "fp32", "bf16",
                "--grids", "1d", "--no-local", "--append", "--out", str(study)])
    assert ran == [("bf16", "1d")]  # fp32 is held; the failed bf16 run is run again
    assert len(json.loads((study / "accuracy.json").read_text())["records"]) == 3
    assert "status 1: `c`: x (run again since: succeeded)" in (study / "accuracy.md").read_text()
