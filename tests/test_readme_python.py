"""The README's "Use from Python" examples run as written (issue 16)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def python_examples() -> list[str]:
    """The ```python blocks of the README section "Use from Python", in order."""
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Use from Python\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_use_from_python_examples_run(tmp_path, monkeypatch, capsys):
    blocks = python_examples()
    assert len(blocks) >= 5
    monkeypatch.chdir(tmp_path)
    for block in blocks:
        exec(compile(block, str(README), "exec"), {"__name__": "__readme__"})
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 4 and (tmp_path / "model.pt").is_file()
