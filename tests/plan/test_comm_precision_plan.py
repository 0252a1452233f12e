"""The planner and ``--comm-precision``: each precision priced by the one byte rule, ``auto`` lowering it only
where the profile says it pays (and saying so), and ``plan`` and ``train`` agreeing."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from gridgnn.cli.main import main
from gridgnn.config import ExecutionOptions, TrainConfig
from gridgnn.cost.epoch_model import predict_epoch
from gridgnn.cost.graph_stats import GraphStats
from gridgnn.cost.profile import PROFILE_DIR
from gridgnn.errors import ConfigError
from gridgnn.grid.shape import resolve_grid
from gridgnn.nn.trace import model_spec
from gridgnn.plan.execution import choose_execution
from gridgnn.run_spec import RunSpec
from gridgnn.train.run.training import load_graph


def test_each_precision_prices_the_activation_phases_only():
    """1d dense, GCN: every activation row of w values costs 4w, 2w or w + 1 bytes; weight gradients and the
    loss keep float32's bytes."""
    stats = GraphStats.from_counts(4000, 40000, 300, 7)
    spec = model_spec(TrainConfig(hidden=16), stats)
    shape = resolve_grid("1d", 4)
    by = {p: predict_epoch(spec, stats, shape, comm_precision=p) for p in ("fp32", "bf16", "fp16", "int8")}
    exact = by["fp32"]
    for precision in ("bf16", "fp16"):
        for phase in ("spmm_forward", "spmm_backward"):
            np.testing.assert_array_equal(2 * by[precision].bytes_by_phase[phase], exact.bytes_by_phase[phase])
    rows = 3000  # a 1d rank receives the other three blocks of 1000 rows
    assert by["int8"].bytes_by_phase["spmm_forward"].max() == rows * (16 + 1) + rows * (7 + 1)  # widths 16, 7
    for precision in ("bf16", "fp16", "int8"):
        for phase in ("weight_grad", "loss", "other"):
            np.testing.assert_array_equal(by[precision].bytes_by_phase[phase], exact.bytes_by_phase[phase])
        np.testing.assert_array_equal(by[precision].calls, exact.calls)  # 1d: no sum changes collective


def _slow_network(tmp_path, factor: float) -> str:
    """This machine's measured profile with every per-byte time multiplied by ``factor``."""
    profile = json.loads((PROFILE_DIR / "cpu-local.json").read_text())
    for op in profile["intra_node"].values():
        op["beta_s_per_byte"] *= factor
    path = tmp_path / f"slow-{factor:g}.json"
    path.write_text(json.dumps(profile))
    return str(path)


def test_auto_takes_bf16_only_where_the_profile_says_it_pays_and_says_so(tmp_path, capsys):
    data = "csbm:nodes=1500,classes=4,features=40"
    flags = ["--nprocs", "4", "--algo", "1d", "--comm", "dense", "--reorder", "none", "--hidden", "64"]
    free = TrainConfig(dataset=data, algo="1d", nprocs=4, comm="dense", reorder="none", cache_panels=False,
                       full_feature_rows=False, defer_weight_gather=False, comm_precision="auto", hidden=64)
    graph = load_graph(free)
    assert ExecutionOptions.of(free).free == ("comm_precision",)
    slow = _slow_network(tmp_path, 1e4)
    chosen, ranked, _ = choose_execution(dataclasses.replace(free, profile=slow), graph, 4)
    assert chosen.comm_precision == "bf16" and ranked.best.comm_precision == "bf16"
    assert "--comm-precision auto chose bf16" in ranked.reason and "accuracy risk" in ranked.reason
    assert ranked.best.train_flags()[-2:] == ["--comm-precision", "bf16"]
    kept, ranked, _ = choose_execution(dataclasses.replace(free, profile="cpu-local"), graph, 4)
    assert kept.comm_precision == "fp32" and "--comm-precision auto kept fp32" in ranked.reason
    capsys.readouterr()  # plan agrees with train on the same flags
    assert main(["plan", "--dataset", data, *flags, "--comm-precision", "auto", "--profile", slow]) == 0
    out = capsys.readouterr().out
    assert "--comm-precision auto chose bf16" in out and "--comm-precision bf16" in out.split("train with:")[1]


def test_auto_is_settled_before_a_run_spec_and_is_fp32_on_one_process():
    with pytest.raises(ConfigError, match="comm_precision must be settled by the planner first"):
        RunSpec(TrainConfig(algo="1d", nprocs=2, comm_precision="auto"), resolve_grid("1d", 2))
    assert ExecutionOptions(comm_precision="auto").settled_locally() == {"comm_precision": "fp32"}
    with pytest.raises(ConfigError, match="comm_precision must be one of"):
        TrainConfig(comm_precision="fp8")


def test_an_unknown_precision_is_one_line_and_status_2(capsys):
    assert main(["train", "--dataset", "csbm:nodes=50", "--nprocs", "2", "--comm-precision", "fp8"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1
    assert "--comm-precision: invalid choice: 'fp8'" in err


def test_a_precision_on_one_process_is_accepted_and_said(capsys):
    """Nothing moves on one process: the run goes on, and the warning about grid-only flags names it."""
    assert main(["train", "--dataset", "csbm:nodes=60", "--epochs", "1", "--quiet", "--comm-precision", "int8"]) == 0
    err = capsys.readouterr().err
    assert "--comm-precision applies to a process grid" in err and "(--algo local) and ignores it" in err
