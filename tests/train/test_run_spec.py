"""The frozen run spec (`gridgnn.run_spec`): its file round-trips, every cross-field rule is refused in one
line, the launcher resolves it once (one `grid_shape_for`, one auto choice) into the spec a torchrun worker
reaches on its own, and nothing but torchrun's variables reaches a local worker's environment."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from gridgnn.config import TrainConfig
from gridgnn.data.prepared import is_prepared
from gridgnn.errors import ConfigError
from gridgnn.grid.shape import GridShape
from gridgnn.run_spec import SPEC_FILE, ProcessOptions, RunSpec, read_spec
from gridgnn.train.run import resolve
from gridgnn.train.run.resolve import grid_shape_for, resolve_run
from gridgnn.train.run.training import load_graph

DATA = "csbm:nodes=120,classes=3,features=8"


def _spec(**changes) -> RunSpec:
    config = TrainConfig(dataset=DATA, algo="1.5d", replication=2, nprocs=4, comm="dense")
    fields = dict(config=config, shape=grid_shape_for(config, 4), process=ProcessOptions(60.0, 1, "lo"),
                  prepared_graph="/tmp/x", launcher_pid=os.getpid(), launcher_peak_memory_bytes=123)
    return RunSpec(**{**fields, **changes})


def test_the_spec_file_round_trips_and_is_read_before_torch_is_imported(tmp_path):
    spec = _spec()
    path = spec.write(tmp_path)
    assert path.name == SPEC_FILE and read_spec(path) == spec
    code = ("import sys; import gridgnn.cli.worker; from gridgnn.run_spec import read_spec; "
            f"read_spec({str(path)!r}); print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "False", done.stderr  # a worker whose launcher is gone stops before torch
    document = json.loads(path.read_text())
    assert document["format"] == "gridgnn-run-spec" and document["shape"] == {"algo": "1.5d",
                                                                             "axes": ["row", "rep"],
                                                                             "sizes": [2, 2]}
    predict = _spec(command="predict", model_file="/m.pt")
    assert RunSpec.from_json(predict.to_json()) == predict and predict.launched_locally
    alone = RunSpec(TrainConfig(dataset=DATA), None)
    assert RunSpec.from_json(alone.to_json()) == alone and not alone.launched_locally


@pytest.mark.parametrize("changes, words", [
    ({"config": TrainConfig(dataset=DATA, algo="auto", nprocs=4)}, "--algo auto must be resolved first"),
    ({"config": TrainConfig(dataset=DATA)}, "--algo local has no grid shape"),
    ({"shape": None}, "--algo 1.5d needs its grid shape"),
    ({"shape": GridShape("2d", ("row", "col"), (2, 2))}, "is not a grid of --algo 1.5d"),
    ({"shape": GridShape("1.5d", ("row", "rep"), (4, 1))}, "does not have --replication 2"),
    ({"shape": GridShape("1.5d", ("row", "rep"), (4, 2))}, "is not 4 processes"),
    ({"config": TrainConfig(dataset=DATA, algo="2d", grid="1x4", nprocs=4)}, "is not --grid 1x4"),
    ({"command": "predict"}, "names a model file exactly when its command is predict"),
    ({"command": "serve"}, "command must be one of train, predict"),
    ({"launcher_pid": None}, "only with its launcher's pid"),
    ({"process": ProcessOptions(0.0)}, "timeout_s must be a positive number"),
    ({"process": ProcessOptions(threads=0)}, "threads must be a positive integer"),
    ({"launcher_peak_memory_bytes": -1}, "must be a non-negative integer"),
])
def test_every_cross_field_rule_is_refused_in_one_line(changes, words):
    if "config" in changes and "shape" not in changes and changes["config"].algo == "2d":
        changes["shape"] = GridShape("2d", ("row", "col"), (2, 2))
    with pytest.raises(ConfigError, match=words) as info:
        _spec(**changes)
    assert "\n" not in str(info.value)


def test_a_file_that_is_not_a_spec_ends_a_worker_with_one_line(tmp_path, capsys):
    from gridgnn.cli.worker import main

    for name, text in [("garbage", "{not json"), ("foreign", '{"format": "x"}'),
                       ("other-version", json.dumps({**_spec().to_json(), "version": 99})),
                       ("incomplete", json.dumps({k: v for k, v in _spec().to_json().items() if k != "process"}))]:
        (tmp_path / name).write_text(text)
        assert main(str(tmp_path / name)) == 2
        err = capsys.readouterr().err
        assert err.startswith("gridgnn: error: ") and err.count("\n") == 1, err
    with pytest.raises(ConfigError, match="different gridgnn versions"):
        read_spec(tmp_path / "other-version")


def test_the_launcher_resolves_once_into_the_spec_a_torchrun_worker_reaches(tmp_path, monkeypatch):
    """`prepare_for_workers` (the launcher) calls `grid_shape_for` and the auto choice once; a torchrun
    worker resolving on the same graph gets the same configuration and grid."""
    from gridgnn.launch.workers import prepare_for_workers

    calls = {"shape": 0, "auto": 0}
    real_shape, real_choose = resolve.grid_shape_for, resolve.settle_execution

    def count(key, real):
        def counted(*args, **kwargs):
            calls[key] += 1
            return real(*args, **kwargs)
        return counted

    monkeypatch.setattr(resolve, "grid_shape_for", count("shape", real_shape))
    monkeypatch.setattr(resolve, "settle_execution", count("auto", real_choose))
    config = TrainConfig(dataset=DATA, algo="auto", comm="auto", nprocs=4, memory_check=False)
    spec = prepare_for_workers(config, str(tmp_path), ProcessOptions(30.0, 1))
    assert calls == {"shape": 1, "auto": 1}
    assert spec.launched_locally and spec.prepared_graph == str(tmp_path) and spec.launcher_peak_memory_bytes > 0
    assert spec.config.algo != "auto" and spec.config.comm != "auto" and spec.config.auto_reason.startswith(
        "--algo auto chose")
    worker, shape, _ = resolve_run(config, load_graph(config), 4)
    assert (worker, shape) == (spec.config, spec.shape)
    assert is_prepared(tmp_path)  # the graph the workers memory-map


def test_auto_with_metis_reorders_once_when_it_trains_on_the_order_it_priced(monkeypatch):
    """``--algo auto --comm auto --reorder metis``: every grid is priced on METIS into its own (row blocks,
    depth), one METIS run each, and the chosen grid trains on the very graph that was priced (no second run)."""
    from gridgnn.data import reorder
    from gridgnn.plan.planner import candidate_shapes

    cuts = []
    real = reorder.reorder_graph

    def counted(graph, method, parts, seed=0, nest=1):
        cuts.append(parts)
        return real(graph, method, parts, seed, nest)

    monkeypatch.setattr(reorder, "reorder_graph", counted)
    config = TrainConfig(dataset="csbm:nodes=600,classes=4,features=8", algo="auto", comm="auto", reorder="metis",
                         nprocs=4)
    chosen, shape, graph = resolve_run(config, load_graph(config), 4)
    assert graph.meta["reorder"] == "metis" and graph.meta["reorder_parts"] == shape.sizes[0]
    assert shape.sizes[0] == 4, shape  # auto picks 1d here (sparse, METIS order): the case this test is about
    priced = {(s.sizes[0], s.depth) for s in candidate_shapes(4)}
    assert sorted(cuts) == sorted(rows for rows, _ in priced)  # one METIS run per priced order, none to train
    fixed = dataclasses.replace(config, algo="2d", grid="2x2", comm="sparse")
    cuts.clear()
    _, two_by_two, graph = resolve_run(fixed, load_graph(fixed), 4)
    assert cuts == [2] and graph.meta["reorder_parts"] == 2  # a given grid: METIS into its row blocks, once
    assert two_by_two.sizes == (2, 2)


def test_a_worker_that_resolves_its_own_run_validates_its_grid_once(monkeypatch):
    """torchrun's case, on a one-process grid: `resolve_run` validates the grid; training, the memory guard
    and the metrics reuse it (`train_on_grid` takes the resolved shape and resolves nothing)."""
    from gridgnn.train.run import grid_train, memory_guard
    from gridgnn.train.run.training import run_training

    assert not hasattr(grid_train, "grid_shape_for") and not hasattr(grid_train, "choose_comm")
    calls = []
    for module, name in ((resolve, "grid_shape_for"), (memory_guard, "resolve_grid")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, _real=real, _name=name, **k: calls.append(_name) or _real(*a, **k))
    run = run_training(TrainConfig(dataset=DATA, algo="2d", comm="auto", epochs=1, quiet=True))
    assert calls == ["grid_shape_for"] and run.metrics["config"]["grid_shape"] == "1x1"
    assert run.metrics["config"]["comm"] in ("dense", "sparse") and "--comm auto chose" in run.metrics["config"][
        "auto_reason"]


def test_a_local_worker_gets_torchruns_variables_and_the_spec_path_only(monkeypatch):
    from gridgnn.launch.local import _worker_env, worker_command

    for key in [k for k in os.environ if k.startswith("GRIDGNN_")]:
        monkeypatch.delenv(key)
    env = _worker_env(1, 4, 29500, 2)
    assert not [k for k in env if k.startswith("GRIDGNN_")]
    assert {k: env[k] for k in ("RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "OMP_NUM_THREADS")} == {
        "RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "4", "OMP_NUM_THREADS": "2"}
    command = worker_command("/tmp/run/run-spec.json")
    assert command[-1] == "/tmp/run/run-spec.json" and "gridgnn.cli.worker" in command[2]


def test_the_spec_carries_the_settled_task_to_the_workers(tmp_path):
    """What the launcher settled (task, metric, the line it printed) reaches a worker as it was, and a worker
    that resolves again on the same graph changes nothing (`settle_task` keeps a settled config)."""
    from gridgnn.train.loop.task_choice import settle_task

    graph = load_graph(TrainConfig(dataset=DATA))
    settled = settle_task(TrainConfig(dataset=DATA, algo="1d", nprocs=4, comm="dense", metric="accuracy"), graph)
    assert (settled.task, settled.metric) == ("multiclass", "accuracy")
    assert settled.task_reason.startswith("task       multiclass (inferred from the targets)")
    spec = _spec(config=settled, shape=grid_shape_for(settled, 4))
    back = read_spec(spec.write(tmp_path))
    assert back.config == settled and settle_task(back.config, graph) is back.config



def forbid_resolving(set_attribute=setattr) -> None:
    """Make every resolving function fail, wherever a loaded gridgnn module bound it (a later ``from ... import``
    reads the module's attribute, replaced too): all of `gridgnn.train.run.resolve`, the planner's choice, the grid
    shape's validation, the task's settling and a reordering. ``set_attribute``: ``monkeypatch.setattr`` in this
    process (undone after the test), plain ``setattr`` in a worker."""
    import gridgnn.cli.predict_cmd  # noqa: F401 - the modules a worker runs, loaded so their bindings are found
    import gridgnn.cli.train_cmd  # noqa: F401
    import gridgnn.cli.worker  # noqa: F401
    import gridgnn.train.run.inference  # noqa: F401
    import gridgnn.train.run.memory_guard  # noqa: F401
    import gridgnn.train.run.worker  # noqa: F401
    from gridgnn.data import reorder
    from gridgnn.grid import shape
    from gridgnn.plan import execution, planner
    from gridgnn.train.loop import task_choice
    from gridgnn.train.run import auto

    named = [*[(resolve, name) for name, f in vars(resolve).items()
               if callable(f) and getattr(f, "__module__", "") == resolve.__name__],
             (auto, "settle_execution"), (auto, "choose_configuration"), (auto, "choose_comm"),
             (execution, "choose_execution"), (execution, "settle"), (planner, "plan"),
             (planner, "candidate_shapes"), (shape, "resolve_grid"), (task_choice, "settle_task"),
             (reorder, "reorder_graph"), (reorder, "vertex_order")]
    forbidden = {id(getattr(module, name)): f"{module.__name__}.{name}" for module, name in named}
    assert len(forbidden) == len(named) and {"gridgnn.train.run.resolve.resolve_run",
                                             "gridgnn.train.run.resolve.resolve_auto",
                                             "gridgnn.train.run.resolve.grid_shape_for"} <= set(forbidden.values())

    def refuse(name):
        def resolved_again(*args, **kwargs):
            raise AssertionError(f"a worker holding a run spec resolved its run again: {name}")
        return resolved_again

    for module in [m for key, m in list(sys.modules.items()) if key.startswith("gridgnn") and m is not None]:
        for attr, value in list(vars(module).items()):
            if id(value) in forbidden:
                set_attribute(module, attr, refuse(forbidden[id(value)]))


def test_a_worker_holding_a_spec_trains_it_as_given_and_resolves_nothing(tmp_path, monkeypatch):
    """The launcher (`prepare_for_workers`) resolves once; a worker handed its spec (`train_spec`, what
    `gridgnn.cli.worker` runs) trains it with every resolving function failing, whatever its environment says
    (here none: a 1-process grid)."""
    from gridgnn.cli.train_cmd import train_spec
    from gridgnn.launch.workers import prepare_for_workers

    calls = []
    real = resolve.resolve_run
    monkeypatch.setattr(resolve, "resolve_run", lambda *a, **k: calls.append(1) or real(*a, **k))
    metrics = tmp_path / "metrics.json"
    config = TrainConfig(dataset=DATA, algo="2d", comm="auto", nprocs=1, epochs=1, quiet=True,
                         metrics_out=str(metrics), memory_check=False)
    spec = prepare_for_workers(config, str(tmp_path / "prepared"), ProcessOptions(60.0, 1))
    assert calls == [1] and spec.config.comm != "auto" and spec.shape.label() == "1x1"
    monkeypatch.setattr(resolve, "resolve_run", real)
    forbid_resolving(monkeypatch.setattr)
    with pytest.raises(AssertionError, match="resolved its run again: gridgnn.train.run.resolve.resolve_run"):
        resolve.resolve_run(config, None, 1)  # the guard holds
    assert train_spec(spec) == 0
    written = json.loads(metrics.read_text())["config"]
    assert (written["algo"], written["grid_shape"], written["comm"]) == ("2d", "1x1", spec.config.comm)
    assert written["auto_reason"] == spec.config.auto_reason


NO_RESOLVING_WORKER = """
import sys
sys.path[0] = sys.argv.pop(1)
sys.path.insert(0, sys.argv.pop(1))
from test_run_spec import forbid_resolving
forbid_resolving()
from gridgnn.cli.worker import run
run()
"""
"""A local worker's code, with `forbid_resolving` first (arguments: the package's folder, this tests folder)."""


@pytest.mark.slow  # two real workers (~60 s on this shared machine); the test above runs their code here
def test_launched_workers_train_their_spec_as_given_and_resolve_nothing(tmp_path, monkeypatch, capfd):
    """`gridgnn train --nprocs 2` (the library launcher behind it), everything left to the planner: the
    launcher resolves the run once; its workers, whose resolving functions all fail, train the spec as given."""
    import gridgnn
    from gridgnn.launch import local
    from gridgnn.launch.workers import launch_workers

    root = os.path.dirname(os.path.dirname(os.path.abspath(gridgnn.__file__)))
    here = os.path.dirname(os.path.abspath(__file__))
    monkeypatch.setattr(local, "worker_command",
                        lambda spec_path: [sys.executable, "-c", NO_RESOLVING_WORKER, root, here, spec_path])
    calls = []
    real = resolve.resolve_run
    monkeypatch.setattr(resolve, "resolve_run", lambda *a, **k: calls.append(1) or real(*a, **k))
    metrics = tmp_path / "metrics.json"
    config = TrainConfig(dataset=DATA, algo="auto", nprocs=2, epochs=1, quiet=True, metrics_out=str(metrics))
    status = launch_workers(config, ProcessOptions(60.0, 1))
    out = capfd.readouterr()
    assert status == 0 and "resolved its run again" not in out.out + out.err, out.err
    assert calls == [1]  # the launcher's one resolution
    written = json.loads(metrics.read_text())["config"]
    assert written["algo"] != "auto" and written["auto_reason"].startswith("--algo auto chose")
    assert written["world_size"] == 2 and written["task"] == "multiclass"
