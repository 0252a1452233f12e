"""The README's "Use from Python" examples run as written (issue 16). The example that starts local workers
(``nprocs=``) costs a few interpreter start-ups, so it runs in the slow tier."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def python_examples() -> list[str]:
    """The ```python blocks of the README section "Use from Python", in order."""
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Use from Python\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def _run(blocks: list[str]) -> None:
    for block in blocks:
        exec(compile(block, str(README), "exec"), {"__name__": "__readme__"})


def test_use_from_python_examples_run(tmp_path, monkeypatch, capsys):
    blocks = [b for b in python_examples() if "nprocs=" not in b and "run_training(" not in b]
    assert len(blocks) == 4  # the run_training example: tests/test_first_contact.py
    monkeypatch.chdir(tmp_path)
    _run(blocks)
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 3 and (tmp_path / "model.pt").is_file()


@pytest.mark.slow
def test_use_from_python_example_with_local_workers(tmp_path, monkeypatch, capsys):
    blocks = [b for b in python_examples() if "nprocs=" in b]
    assert len(blocks) == 1
    monkeypatch.chdir(tmp_path)
    _run(blocks)
    assert capsys.readouterr().out.split()[:2] == ["2", "torch.Size([300])"]
