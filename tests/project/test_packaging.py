"""The package as a user installs it: the versions it claims are the ones tested, CI builds the wheel and runs
it from a fresh environment (scripts/wheel_check.sh), and that script passes."""

import re
import subprocess

import pytest
import torch
from model_helpers import REPO_ROOT

tomllib = pytest.importorskip("tomllib")  # Python 3.11 on

PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.match(r"(\d+(?:\.\d+)*)", version).group(1).split("."))


def test_the_oldest_torch_claimed_is_the_torch_ci_tests():
    claimed = next(d for d in PYPROJECT["project"]["dependencies"] if d.startswith("torch"))
    minimum = re.fullmatch(r"torch>=([\d.]+)", claimed).group(1)
    pinned = re.search(r"^torch==([\d.]+)", (REPO_ROOT / "constraints-cpu.txt").read_text(), re.M).group(1)
    assert _release(minimum) == _release(pinned)[:len(_release(minimum))], (minimum, pinned)
    assert _release(torch.__version__) >= _release(minimum)
    assert f"`torch>={minimum}`" in README and f"torch {minimum} or newer" in README


def test_the_supported_python_is_stated_where_pip_and_the_readme_say_it():
    floor = re.fullmatch(r">=3\.(\d+)", PYPROJECT["project"]["requires-python"]).group(1)
    assert f"Programming Language :: Python :: 3.{floor}" in PYPROJECT["project"]["classifiers"]
    assert f"Python 3.{floor} or newer" in README
    assert PYPROJECT["tool"]["ruff"]["target-version"] == f"py3{floor}"


def test_ci_builds_the_wheel_and_runs_the_installed_command():
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    assert ci.index("bash scripts/wheel_check.sh") < ci.index("python -m pytest")
    script = (REPO_ROOT / "scripts" / "wheel_check.sh").read_text()
    for step in ("python -m build", "python -m venv", '"$gridgnn" --version', '"$gridgnn" train --epochs 5',
                 "--nprocs 2", 'load_profile("cpu-local")', "entry_points.txt", "unset PYTHONPATH"):
        assert step in script, step
    assert "build" in " ".join(PYPROJECT["project"]["optional-dependencies"]["test"])
    # the shipped profiles and the trace templates `gridgnn plan` reads without torch
    assert PYPROJECT["tool"]["setuptools"]["package-data"]["gridgnn"] == ["cost/profiles/*.json",
                                                                        "plan/op_templates.json"]


@pytest.mark.slow
def test_the_wheel_check_passes():
    pytest.importorskip("build")
    done = subprocess.run(["bash", str(REPO_ROOT / "scripts" / "wheel_check.sh")], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "wheel check: passed" in done.stdout and "gridgnn 0.1.0\n" in done.stdout
