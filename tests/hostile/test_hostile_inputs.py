"""Hostile input (issue 6): a corpus of malformed files, flags and grids, each through the real command line.

Every case must end the same way: exit status 2, exactly one line ``gridgnn: error: ...`` on stderr that names
the problem, nothing on stdout, no traceback, and no output file: a ``--metrics-out`` path in a fresh folder
is never created (not even a temporary file beside it) and a metrics file that already exists stays
byte-identical. The corpus (`hostile_corpus.py`) covers every reader (Planetoid pickles, gnn-benchmark
``.npz``/``.zip``, Matrix Market, text edge lists, OGB folders, gridgnn's native ``.npz``), the generator
specs, the training flags and the process-grid flags. Pickles that ask for a forbidden callable must be
refused *before* it runs: every case asserts that the marker file such a payload would create does not exist.

Cases run `gridgnn.cli.main.main` in-process (fast); `test_through_a_real_process` runs a handful as
``python -m gridgnn`` (in the background while the others run) to prove the real exit status and stderr.
Grid errors are raised before any worker starts, so only the "more processes than vertices" case starts
workers (two).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from data_error_helpers import fails, load
from hostile_corpus import DATA_CASES, FLAG_CASES, MARKER, REPO_ROOT, SMALL

from gridgnn.cli.main import main

PREVIOUS_METRICS = b'{"previous": "run", "keep": [1, 2, 3]}\n'
"""What an existing metrics file holds before a bad run (it must stay byte-identical)."""


def _params(cases: list) -> list:
    return [pytest.param(*case[1:], id=case[0]) for case in cases]


def _one_error_line(status: int, out: str, err: str, keyword: str | tuple[str, ...]) -> str:
    """The contract: status 2, nothing on stdout, one stderr line ``gridgnn: error: ...`` containing
    ``keyword`` (or one of several), case-insensitively."""
    assert status == 2, f"exit status {status}, stderr: {err!r}"
    assert "Traceback" not in err and "Traceback" not in out, err
    lines = err.splitlines()
    assert len(lines) == 1 and err.endswith("\n"), f"expected one stderr line, got {err!r}"
    assert lines[0].startswith("gridgnn: error: "), lines[0]
    keywords = (keyword,) if isinstance(keyword, str) else keyword
    assert any(k.lower() in lines[0].lower() for k in keywords), f"{keyword!r} not in {lines[0]!r}"
    assert out == "", f"unexpected stdout {out!r}"
    return lines[0]


def _metrics_folder(tmp: Path, existing: bool) -> tuple[Path, Path]:
    """(folder, metrics path) in a fresh folder; with ``existing`` the path already holds a previous run."""
    folder = tmp / "out"
    folder.mkdir()
    target = folder / "metrics.json"
    if existing:
        target.write_bytes(PREVIOUS_METRICS)
    return folder, target


def _assert_untouched(folder: Path, target: Path, existing: bool) -> None:
    """No partial output: the folder holds exactly what it held before (and no temporary file)."""
    if existing:
        assert target.read_bytes() == PREVIOUS_METRICS
        assert sorted(p.name for p in folder.iterdir()) == [target.name]
    else:
        assert list(folder.iterdir()) == []


_METRICS_STATES = pytest.mark.parametrize("existing", [False, True], ids=["no-metrics-file", "existing-metrics-file"])


@_METRICS_STATES
@pytest.mark.parametrize(("build", "keyword"), _params(DATA_CASES))
def test_bad_dataset(build, keyword: str, existing: bool, tmp_path: Path, capsys) -> None:
    argument, culprit = build(tmp_path)
    assert culprit not in str(tmp_path)  # else naming it would prove nothing
    folder, target = _metrics_folder(tmp_path, existing)
    status = main(["train", "--dataset", argument, "--epochs", "1", "--metrics-out", str(target)])
    line = _one_error_line(status, *capsys.readouterr(), keyword)
    assert culprit in line, f"the error does not name {culprit!r}: {line}"
    _assert_untouched(folder, target, existing)
    assert not (tmp_path / MARKER).exists(), "a pickle payload ran"
    if existing:
        return
    # `gridgnn info` loads exactly as train does, and the library raises the same one-line DataError
    assert _one_error_line(main(["info", argument]), *capsys.readouterr(), keyword) == line
    if Path(argument).exists():
        message = fails(load(Path(argument)), culprit, re.escape(line[len("gridgnn: error: "):]))
        assert f"gridgnn: error: {message}" == line
    assert not (tmp_path / MARKER).exists(), "a pickle payload ran"


def _train_argv(flags: list[str], target: Path) -> list[str]:
    """``gridgnn train`` on SMALL for one epoch writing ``target``; ``flags`` come last, so they win."""
    return ["train", "--epochs", "1", "--dataset", SMALL, "--metrics-out", str(target), *flags]


def _is_train_case(argv: list[str]) -> bool:
    return bool(argv) and argv[0] not in ("info", "plan", "frobnicate", "netcheck")


@pytest.mark.parametrize(("argv", "keyword"), _params(FLAG_CASES))
def test_bad_flag(argv: list[str], keyword: str, tmp_path: Path, capsys) -> None:
    argv = [arg.replace("{tmp}", str(tmp_path)) for arg in argv]
    folder, target = _metrics_folder(tmp_path, existing=False)
    if any(arg.startswith("/sys/") for arg in argv) and not Path("/sys").is_dir():
        pytest.skip("no /sys on this machine")
    _one_error_line(main(_train_argv(argv, target) if _is_train_case(argv) else argv), *capsys.readouterr(), keyword)
    _assert_untouched(folder, target, existing=False)


@pytest.mark.parametrize(("argv", "keyword"), _params(
    [case for case in FLAG_CASES if _is_train_case(case[1]) and "--metrics-out" not in case[1]]))
def test_bad_flag_keeps_existing_metrics_file(argv: list[str], keyword: str, tmp_path: Path, capsys) -> None:
    argv = [arg.replace("{tmp}", str(tmp_path)) for arg in argv]
    folder, target = _metrics_folder(tmp_path, existing=True)
    _one_error_line(main(_train_argv(argv, target)), *capsys.readouterr(), keyword)
    _assert_untouched(folder, target, existing=True)


def test_corpus_size() -> None:
    """Issue 6 asks for at least 30 malformed inputs across every reader and flag; ids stay unique."""
    ids = [case[0] for case in DATA_CASES + FLAG_CASES]
    assert len(ids) >= 30 and len(set(ids)) == len(ids)
    for prefix in ("planetoid", "npz", "mtx", "edgelist", "ogb", "native", "csbm", "rmat", "grid", "metrics-out",
                   "checkpoint"):
        assert any(i.startswith(prefix) for i in ids), prefix


# --- through a real process -----------------------------------------------------------------------------

# (id, arguments: a DATA_CASES id, a FLAG_CASES id or extra train flags, key word)
PROCESS_CASES = [
    ("planetoid-forbidden-os-system-reduce", "planetoid-forbidden-os-system-reduce", "forbidden class"),
    ("grid-2d-3x3-on-4-procs", "grid-2d-3x3-on-4-procs", "needs 9 processes"),
    ("timeout-zero", "timeout-zero", "--timeout"),
    # the one case that starts workers (two): the vertex count is known only once a worker has loaded the
    # graph; every rank fails alike and the launcher shows rank 0's line only
    ("more-processes-than-vertices", ["--algo", "1d", "--nprocs", "2", "--dataset", "csbm:nodes=1,classes=1"],
     "vertices"),
]


def _process_argv(arguments: str | list[str], tmp: Path, target: Path) -> list[str]:
    data = {case[0]: case[1] for case in DATA_CASES}
    if isinstance(arguments, str) and arguments in data:
        return ["train", "--dataset", data[arguments](tmp)[0], "--epochs", "1", "--metrics-out", str(target)]
    flags = {case[0]: case[1] for case in FLAG_CASES}[arguments] if isinstance(arguments, str) else arguments
    return _train_argv(list(flags), target)


def _run_process(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run([sys.executable, "-m", "gridgnn", *argv], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=240)


@pytest.fixture(scope="module", autouse=True)
def process_runs(request, tmp_path_factory):
    """Start the selected process cases in the background as the module starts, two at a time, so that
    their torch imports overlap the in-process cases; yields case id -> (future, folder, metrics, tmp)."""
    selected = {item.name for item in request.session.items}
    runs = {}
    with ThreadPoolExecutor(max_workers=2) as pool:
        for case_id, arguments, _ in PROCESS_CASES:
            if f"test_through_a_real_process[{case_id}]" in selected:
                tmp = tmp_path_factory.mktemp(case_id)
                folder, target = _metrics_folder(tmp, existing=True)
                argv = _process_argv(arguments, tmp, target)
                runs[case_id] = (pool.submit(_run_process, argv, tmp), folder, target, tmp)
        yield runs


@pytest.mark.parametrize(("case_id", "keyword"), [
    pytest.param(case[0], case[2], id=case[0]) for case in PROCESS_CASES
])
def test_through_a_real_process(case_id: str, keyword: str, process_runs: dict) -> None:
    future, folder, target, tmp = process_runs[case_id]
    done = future.result(timeout=300)
    _one_error_line(done.returncode, done.stdout, done.stderr, keyword)
    _assert_untouched(folder, target, existing=True)
    assert not (tmp / MARKER).exists(), "a pickle payload ran"
