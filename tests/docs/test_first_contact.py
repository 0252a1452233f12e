"""What a new user meets in the first hour: the README's quick start and the documentation's examples, no
silent fallbacks, hints that run what they planned, a light and talkative start (issue 20).

The outputs the README and docs/*.md quote are checked against what the code prints, so they cannot drift
again (the python examples of docs/: tests/docs/test_docs_examples.py).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import docs_examples as de
import numpy as np
import pytest

from gridgnn.cli.main import build_parser, main
from gridgnn.cli.train_cmd import config_from_args, resolve_algo

REPO_ROOT = Path(__file__).resolve().parents[2]
README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
COMMAND_LINE = de.DOCS / "command-line.md"
DATA_ROOT = REPO_ROOT.parent / "shared" / "datasets"
needs_cora = pytest.mark.skipif(not (DATA_ROOT / "cora").is_dir(), reason="Cora not in ../shared/datasets")
SMALL = "csbm:nodes=300,classes=3,features=8"


def _cli(*argv: str, cwd: Path | None = None, umask: int | None = None) -> subprocess.CompletedProcess:
    """The console script as a user runs it: its folder (not the current one) first on sys.path."""
    code = "import sys; del sys.path[0]; from gridgnn.cli.main import run; run()"
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=600,
                          cwd=cwd, env=env, preexec_fn=(lambda: os.umask(umask)) if umask is not None else None)


# --- the documentation's examples are what the code prints -------------------------------------------------------

@needs_cora
def test_docs_cora_summary_and_epoch_line_are_what_the_code_prints(capsys):
    assert main(["train", "--dataset", "cora", "--data-root", str(DATA_ROOT), "--progress"]) == 0
    lines = capsys.readouterr().out.splitlines()
    summary = lines[lines.index(next(line for line in lines if line.startswith("dataset"))):]
    quoted = de.quoted_block(COMMAND_LINE, "dataset    cora:")
    assert len(summary) == len(quoted)
    for printed, readme in zip(summary, quoted, strict=True):
        if readme.startswith("time"):  # the one line that depends on the machine: same shape
            assert re.fullmatch(r"time +[0-9.]+ ms per epoch \(training step\), [0-9.]+ s over 200 epochs", printed)
        else:
            assert printed == readme
    assert lines[0] == de.quoted_block(COMMAND_LINE, "task ")[0]  # the first line: what the run trains
    epoch_line = de.quoted_block(COMMAND_LINE, "epoch ")[0]
    number = int(epoch_line.split()[1].split("/")[0])
    printed = next(line for line in lines if line.startswith(f"epoch {number:>3}/200"))
    assert printed.rsplit("  ", 1)[0] == epoch_line.rsplit("  ", 1)[0]  # all but the milliseconds


def test_docs_memory_guard_line_is_what_the_code_prints(capsys):
    """The memory guard's example (docs/command-line.md): the command the page names prints the quoted line."""
    text = COMMAND_LINE.read_text(encoding="utf-8")
    command = re.search(r"here\s+`(gridgnn train [^`]+)`:", text).group(1)
    quoted = de.quoted_block(COMMAND_LINE, "gridgnn: error: not enough memory")
    assert main(shlex.split(command)[1:]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == quoted  # refused before the run's first line


def test_docs_diverging_training_line_is_what_the_code_prints(capsys):
    """The warning docs/metrics.md quotes is what the command it names prints, and the run goes on (status 0)."""
    page = de.DOCS / "metrics.md"
    command = re.search(r"naming it; here\s+`(gridgnn train [^`]+)`:", page.read_text(encoding="utf-8")).group(1)
    assert main([*shlex.split(command)[1:], "--quiet"]) == 0
    assert capsys.readouterr().err.splitlines() == de.quoted_block(page, "gridgnn: warning: the training loss")


def test_readme_quick_start_default_run_has_the_documented_shape(capsys):
    assert "pip install -c constraints-cpu.txt -e . && gridgnn train\n" in README  # the first command
    assert main(["train"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if not line.startswith("epoch ")]  # a log's
    assert [line.split()[0] for line in lines] == ["task", "dataset", "split", "model", "final", "best", "time"]
    assert lines[0].startswith("task       multiclass (inferred from the targets): 5 classes")
    assert lines[1].startswith("dataset    csbm: 2000 nodes") and "algo local" in lines[3]
    assert float(lines[4].split("test ")[1]) >= 0.95  # "test accuracy ≈ 0.99"
    assert main(["--version"]) == 0 and re.fullmatch(r"gridgnn \d+\.\d+\.\d+\n", capsys.readouterr().out)


def test_readme_setup_names_every_extra_and_what_distributed_runs_are_for():
    extras = re.findall(r"^(\w+) = \[", (REPO_ROOT / "pyproject.toml").read_text().split(
        "[project.optional-dependencies]")[1].split("\n[")[0], re.M)
    setup = README.split("## Set-up")[1].split("\n## ")[0]
    assert set(extras) >= {"test", "pyg", "plots", "bench"}
    assert all(f"`{extra}`" in setup for extra in extras)
    assert "slower than `--algo local`" in README and "graph_from_pyg" in README and "GRIDGNN_DEBUG" in README
    install = de.page_text("install.md")
    assert all(f"| `{extra}` |" in install for extra in extras)  # the docs say what each holds


def test_quick_start_distributed_run_is_talkative_exact_and_immune_to_a_gridgnn_folder(tmp_path):
    """`gridgnn train --nprocs 2` without --algo, from a folder holding a fake `gridgnn` package (what `git
    clone` makes), under umask 022, with --threads 1: it says it runs --algo auto, that workers start and the
    grid is ready, trains the single-process numbers, and writes a metrics file others can read. Its first line
    says what it trains, the next what the planner chose and why."""
    fake = tmp_path / "gridgnn"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('the fake gridgnn folder was imported')\n")
    metrics = tmp_path / "m.json"
    done = _cli("train", "--dataset", SMALL, "--nprocs", "2", "--epochs", "3", "--threads", "1",
                "--metrics-out", str(metrics), cwd=tmp_path, umask=0o022)
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert out[0].startswith("task       multiclass (inferred from the targets)")
    out = out[1:]
    assert out[0].startswith("--algo auto chose ") and "profile cpu-local" in out[0]
    assert out[1] == "starting   2 workers, 1 thread each"
    assert re.fullmatch(r"ready      \S+ \S+ on 2 processes: set-up took [0-9.]+ s", out[2])
    assert out[3].startswith("dataset ") and "fake" not in done.stderr
    document = json.loads(metrics.read_text())
    assert stat.S_IMODE(metrics.stat().st_mode) == 0o644
    assert document["setup"]["threads"] == 1 and document["config"]["world_size"] == 2
    from gridgnn.config import TrainConfig
    from gridgnn.train.run.training import run_training

    local = run_training(TrainConfig(dataset=SMALL, epochs=3, quiet=True))
    np.testing.assert_allclose([e["loss"] for e in document["epochs"]], [r.loss for r in local.result.epochs],
                               rtol=1e-5)


# --- no silent fallbacks -----------------------------------------------------------------------------------

def test_grid_algorithms_on_one_process_and_local_on_several_are_refused_with_the_fix(capsys):
    assert main(["train", "--algo", "2d", "--epochs", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--nprocs P" in err and "--algo local" in err
    assert main(["train", "--algo", "local", "--nprocs", "3", "--epochs", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "drop --nprocs" in err
    assert main(["train", "--algo", "1d", "--grid", "2x2"]) == 2  # a grid needing more processes says so first
    assert "needs 4 processes" in capsys.readouterr().err


def test_the_algorithm_a_user_means(monkeypatch):
    for key in ("WORLD_SIZE", "RANK"):
        monkeypatch.delenv(key, raising=False)
    args = argparse.Namespace(algo=None, nprocs=4)
    assert resolve_algo(args) is None and args.algo == "auto"  # the planner's line says what it chose, and why
    args = argparse.Namespace(algo=None, nprocs=1)
    assert resolve_algo(args) is None and args.algo == "local"
    for key, value in {"WORLD_SIZE": "4", "RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}.items():
        monkeypatch.setenv(key, value)  # as torchrun sets them
    args = argparse.Namespace(algo=None, nprocs=1)  # torchrun --nproc-per-node 4 without --algo
    assert resolve_algo(args) is None and args.algo == "auto"


def test_threads_are_honoured_with_the_local_algorithm(capsys):
    import torch

    before = torch.get_num_threads()
    try:
        assert main(["train", "--dataset", SMALL, "--epochs", "1", "--threads", "3", "--quiet"]) == 0
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)


def test_a_one_class_graph_says_its_accuracy_means_nothing(tmp_path, capsys):
    edges = tmp_path / "g.txt"
    edges.write_text("0 1\n1 2\n2 3\n3 0\n0 2\n4 1\n5 4\n")
    assert main(["train", "--dataset", str(edges), "--epochs", "2"]) == 0
    final = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("final"))
    assert final.endswith("(placeholder labels, one class: accuracy is 1 by construction)")


def test_no_command_lists_every_command(capsys):
    assert main([]) == 2
    err = capsys.readouterr().err
    assert all(name in err for name in ("train", "info", "prepare", "plan", "calibrate"))


# --- plans that train what they planned --------------------------------------------------------------------

def test_plan_hint_trains_the_planned_graph_and_model(capsys):
    from gridgnn.cost.graph_stats import GraphStats
    from gridgnn.train.run.training import load_graph

    assert main(["plan", "--dataset", SMALL, "--seed", "3", "--hidden", "8", "--layers", "3", "--nprocs", "2",
                 "--json"]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert main(["plan", "--dataset", SMALL, "--seed", "3", "--hidden", "8", "--layers", "3", "--nprocs", "2"]) == 0
    hint = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("train with: "))
    argv = shlex.split(hint.removeprefix("train with: "))
    assert argv[:2] == ["gridgnn", "train"]
    args = build_parser().parse_args(argv[1:])
    config = config_from_args(args)
    assert (config.dataset, config.seed, config.hidden, config.layers) == (SMALL, 3, 8, 3)
    best = next(entry for entry in planned if entry["best"])
    assert (config.algo, config.nprocs) == (best["algo"], 2)
    stats = GraphStats.from_graph(load_graph(config))
    from gridgnn.data.registry import load_dataset

    assert stats.num_nodes == 300 and stats.nnz == GraphStats.from_graph(load_dataset(SMALL, seed=3)).nnz


def test_plan_on_statistics_asks_for_the_dataset_and_ties_read_as_ties(capsys):
    from gridgnn.cost.graph_stats import GraphStats
    from gridgnn.plan import plan

    assert main(["plan", "--num-nodes", "1000", "--num-edges", "8000", "--num-features", "8", "--num-classes", "3",
                 "--nprocs", "4"]) == 0
    hint = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("train with: "))
    assert hint.startswith("train with: gridgnn train --dataset YOUR_GRAPH ")
    ranked = plan(argparse.Namespace(layers=2, hidden=16, order="auto"),
                  GraphStats.from_counts(1000, 8000, 8, 3), 4)
    first, second = ranked.entries[0], ranked.entries[1]
    assert "1.00x" not in ranked.reason
    if second.prediction.epoch_s <= 1.005 * first.prediction.epoch_s:
        assert f"tied with {second.algo} {second.grid}" in ranked.reason


# --- prepared folders are datasets everywhere --------------------------------------------------------------

def test_info_and_plan_read_a_prepared_folder_as_train_does(tmp_path, capsys):
    folder = tmp_path / "prepared"
    assert main(["prepare", SMALL, "--out", str(folder)]) == 0
    capsys.readouterr()
    infos, plans = [], []
    for source in (SMALL, str(folder)):
        assert main(["info", source, "--json"]) == 0
        infos.append(capsys.readouterr().out)
        assert main(["plan", "--dataset", source, "--nprocs", "2", "--json"]) == 0
        plans.append(json.loads(capsys.readouterr().out))
    assert infos[0] == infos[1]
    # the folder trains in its own order (train refuses another): plan prices that order, as for the source
    assert {entry["reorder"] for entry in plans[1]} == {"none"}
    same_order = [entry for entry in plans[0] if entry["reorder"] == "none"]
    assert [{k: v for k, v in e.items() if k != "best"} for e in same_order] == \
        [{k: v for k, v in e.items() if k != "best"} for e in plans[1]]
    assert main(["info", str(folder), "--directed"]) == 2
    assert "prepared undirected" in capsys.readouterr().err


# --- resumed runs report this invocation's epochs ----------------------------------------------------------

def test_a_resumed_run_times_only_its_own_epochs(tmp_path, capsys):
    flags = ["train", "--dataset", SMALL, "--checkpoint-dir", str(tmp_path / "ck"), "--checkpoint-every", "2"]
    assert main([*flags, "--epochs", "4", "--quiet"]) == 0
    metrics = tmp_path / "m.json"
    assert main([*flags, "--epochs", "6", "--resume", "--metrics-out", str(metrics)]) == 0
    time_line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("time"))
    final, epochs = (document := json.loads(metrics.read_text()))["final"], document["epochs"]
    assert final["timed_epochs"] == 2
    assert final["mean_epoch_time_s"] == pytest.approx(sum(e["time_s"] for e in epochs[4:]) / 2)
    assert final["history_mean_epoch_time_s"] == pytest.approx(sum(e["time_s"] for e in epochs) / 6)
    assert "over epochs 5-6 run now (4 earlier epochs came from the checkpoint)" in time_line


# --- files others can read; one-line peer failures ---------------------------------------------------------

def test_written_files_follow_the_umask(tmp_path):
    from gridgnn.train.outputs.metrics import write_json_atomic

    previous = os.umask(0o027)
    try:
        write_json_atomic(tmp_path / "p.json", {"a": 1})
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "p.json").stat().st_mode) == 0o640


def test_peer_failure_lines_have_no_gloo_paths_and_come_from_one_process(monkeypatch, capsys):
    from gridgnn.launch.local import _report
    from gridgnn.peer_errors import collective_error_line

    error = RuntimeError("[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed "
                         "by peer [127.0.0.1]:5000\nsecond line")
    monkeypatch.setenv("RANK", "0")
    assert collective_error_line(error) == "Connection closed by peer [127.0.0.1]:5000"
    monkeypatch.setenv("RANK", "1")
    assert collective_error_line(error) is None  # under torchrun: rank 0 speaks for the run
    monkeypatch.setenv("RANK", "0")
    assert collective_error_line(error, launcher_speaks=True) is None  # under gridgnn's launcher: it speaks
    _report(1, 3, None, [(1, "it is stopped (SIGSTOP or a debugger)")])
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "worker rank 1 stopped answering" in err and "did not answer in time" in err


# --- a light start; preprocessing whatever the door ------------------------------------------------------

def test_version_help_info_and_plan_on_statistics_do_not_import_torch(tmp_path):
    edges = tmp_path / "g.txt"
    edges.write_text("0 1\n1 2\n")
    code = ("import sys\nfrom gridgnn.cli.main import main\n"
            "for argv in (['--version'], ['--help'], ['train', '--help'], ['info', sys.argv[1]],\n"
            "             ['plan', '--num-nodes', '100', '--num-edges', '400', '--num-features', '4',\n"
            "              '--num-classes', '2']):\n"
            "    assert main(argv) == 0, argv\n"
            "print(sorted(m for m in ('torch', 'scipy', 'numpy') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code, str(edges)], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "['numpy', 'scipy']"  # info and plan need them; never torch


def test_graph_from_pyg_preprocesses_as_the_command_line_does(tmp_path):
    torch = pytest.importorskip("torch")
    data_cls = pytest.importorskip("torch_geometric.data").Data
    from gridgnn.data.interop import graph_from_pyg
    from gridgnn.data.registry import load_dataset

    pairs = [(0, 1), (1, 2), (1, 2), (2, 2), (3, 0)]  # a duplicate, a self-loop, one-way edges
    data = data_cls(edge_index=torch.tensor(pairs).T, num_nodes=4, y=torch.tensor([0, 1, 0, 1]))
    edges = tmp_path / "g.txt"
    edges.write_text("".join(f"{s} {d}\n" for s, d in pairs))
    from_pyg, from_cli = graph_from_pyg(data), load_dataset(str(edges))
    assert (from_pyg.adj != from_cli.adj).nnz == 0 and from_pyg.adj.diagonal().sum() == 0
    assert not from_pyg.directed and from_pyg.meta["symmetrized"]
    assert graph_from_pyg(data, preprocess=False).adj.diagonal().sum() == 1


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("torchrun") is None, reason="torchrun not on PATH")
def test_torchrun_without_algo_runs_auto_says_so_once_and_honours_threads(tmp_path):
    metrics = tmp_path / "m.json"
    done = subprocess.run(["torchrun", "--nproc-per-node", "2", "-m", "gridgnn", "train", "--dataset", SMALL,
                           "--epochs", "2", "--threads", "1", "--metrics-out", str(metrics)],
                          capture_output=True, text=True, timeout=600, env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()  # the task first (issue 33), then what auto chose and why, once
    assert done.stdout.count("--algo auto chose ") == 1 and lines[0].startswith("task       ")
    assert lines[1].startswith("--algo auto chose "), lines[:3]
    document = json.loads(metrics.read_text())
    assert document["setup"]["threads"] == 1 and document["config"]["world_size"] == 2
    assert document["config"]["algo"] in ("1d", "1.5d", "2d", "3d")
