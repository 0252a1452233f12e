"""The code blocks of the documentation (README.md and docs/*.md) as the tests read and run them.

A ```python block runs as written, in a fresh namespace; a block preceded by the line
``<!-- docs-test: slow -->`` starts several processes and runs only in the slow tier. Worker-side code
(`run_printed`) is imported by forked processes, as tests/helpers/train_workers.py is.
"""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCS = REPO_ROOT / "docs"
README = REPO_ROOT / "README.md"
SLOW_MARK = "<!-- docs-test: slow -->"


@dataclass(frozen=True)
class Block:
    """One fenced code block: its page, the language after the fence, its code and whether it is slow."""

    page: Path
    language: str
    code: str
    slow: bool


def pages() -> list[Path]:
    """Every page of the documentation site, sorted."""
    return sorted(DOCS.glob("*.md"))


def page_text(name: str) -> str:
    """The text of ``docs/<name>``."""
    return (DOCS / name).read_text(encoding="utf-8")


def blocks(page: Path, language: str | None = None) -> list[Block]:
    """The fenced blocks of ``page`` in order (only those of ``language`` when given)."""
    found = []
    for match in re.finditer(r"^```(\w*)\n(.*?)^```$", page.read_text(encoding="utf-8"), re.S | re.M):
        before = page.read_text(encoding="utf-8")[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        found.append(Block(page, match.group(1), match.group(2), before.strip() == SLOW_MARK))
    return [b for b in found if language is None or b.language == language]


def quoted_block(page: Path, first_line_start: str) -> list[str]:
    """The lines of the plain (no language) block of ``page`` whose first line starts with ``first_line_start``."""
    for block in blocks(page, ""):
        if block.code.startswith(first_line_start):
            return block.code.rstrip("\n").splitlines()
    raise AssertionError(f"{page.name} has no block starting with {first_line_start!r}")


def run_block(block: Block) -> None:
    """Execute one block in a fresh namespace (its file name in tracebacks is the page's)."""
    exec(compile(block.code, str(block.page), "exec"), {"__name__": "__docs__"})


def run_printed(rank: int, world_size: int, code: str) -> str:
    """Worker side: run ``code`` on this rank of the current process group; what it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "docs", "exec"), {"__name__": "__docs__"})
    return out.getvalue()
