"""The README stays a door and the documentation site stays whole (issue 38, item 4): the README is a few
hundred lines whose every link resolves, every page of docs/ is in the site's nav and reachable from the
README, every public name of ``gridgnn`` is in the API reference, and (slow tier, with the ``docs`` extra)
``mkdocs build --strict`` passes."""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import re
import shlex
import subprocess
import sys
import unicodedata
from pathlib import Path

import docs_examples as de
import pytest

import gridgnn

README_MAX_LINES = 300
MKDOCS = (de.REPO_ROOT / "mkdocs.yml").read_text(encoding="utf-8")


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading (what mkdocs.yml's toc slugify makes too): lower case, code marks and
    punctuation dropped, letters of any script kept, spaces to hyphens."""
    text = unicodedata.normalize("NFC", heading.replace("`", "")).lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```$", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    return {_slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def _links(page: Path) -> list[str]:
    text = re.sub(r"^```.*?^```$", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    return re.findall(r"\]\(([^)\s]+)\)", text)


def test_the_readme_is_a_door():
    text = de.README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    headings = re.findall(r"^## (.+)$", re.sub(r"^```.*?^```$", "", text, flags=re.S | re.M), re.M)
    assert headings[:3] == ["Set-up", "First commands", "Where to read on"]
    linked = {Path(link.split("#")[0]).name for link in _links(de.README) if link.startswith("docs/")}
    assert linked >= {page.name for page in de.pages()} - {"index.md"}  # every page is one click away


@pytest.mark.parametrize("page", [de.README, *de.pages()], ids=lambda p: p.name)
def test_every_relative_link_resolves(page):
    """Files exist and anchors name a heading of their page (mkdocs checks docs/ again in its strict build;
    the README is outside the site, so only this test checks it)."""
    for link in _links(page):
        if re.match(r"[a-z]+:", link):
            continue
        path, _, anchor = link.partition("#")
        target = (page.parent / path) if path else page
        assert target.exists(), f"{page.name}: {link} does not exist"
        if anchor:
            assert anchor in _anchors(target), f"{page.name}: {link} names no heading of {target.name}"


def _commands(page: Path) -> list[list[str]]:
    """The ``gridgnn`` command lines of the page's bash blocks, as argument lists after ``gridgnn``."""
    commands = []
    for block in de.blocks(page, "bash"):
        for line in block.code.replace("\\\n", " ").splitlines():
            for command in re.split(r"&&|;|\|", line.split(" #")[0]):
                words = shlex.split(command)
                if "gridgnn" in words and words[words.index("gridgnn") + 1:]:
                    commands.append(words[words.index("gridgnn") + 1:])
    return commands


def _options() -> dict[str, set[str]]:
    """Every subcommand's option strings."""
    from gridgnn.cli.main import build_parser

    subparsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {name: set(parser._option_string_actions) for name, parser in subparsers.choices.items()}


@pytest.mark.parametrize("page", [de.README, *de.pages()], ids=lambda p: p.name)
def test_the_commands_the_pages_show_are_what_the_parser_takes(page):
    """Command lines in bash blocks parse as they stand; a flag named in a command quoted in the prose
    (``gridgnn train --nprocs P``, placeholders allowed) is a flag of that command."""
    from gridgnn.cli.main import build_parser

    for args in _commands(page):
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            try:
                build_parser().parse_args(args)
            except SystemExit as done:  # --help and --version exit 0
                assert done.code == 0, f"{page.name}: gridgnn {' '.join(args)}"
    options = _options()
    prose = re.sub(r"^```.*?^```$", "", page.read_text(encoding="utf-8"), flags=re.S | re.M).replace("\n", " ")
    commands = "|".join(options)
    for name, rest in re.findall(rf"`gridgnn ({commands})((?: [^`]*)?)`", prose):
        for flag in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", rest):
            assert flag in options[name], f"{page.name}: gridgnn {name} has no {flag}"


def test_the_train_flag_table_lists_every_flag_of_train():
    """docs/command-line.md's table of `gridgnn train` flags and the parser's flags are the same set."""
    section = de.page_text("command-line.md").split("## `gridgnn train`")[1].split("\n## ")[0]
    rows = "\n".join(line for line in section.splitlines() if line.startswith("| `--"))
    documented = set(re.findall(r"(?<![\w-])(--[a-z][\w-]*)", rows))
    assert documented == {flag for flag in _options()["train"] if flag.startswith("--")} - {"--help"}


def test_every_page_is_in_the_nav_and_nothing_else():
    nav = re.findall(r"^  - [^:\n]+: (\S+\.md)$", MKDOCS, re.M)
    assert sorted(nav) == sorted(page.name for page in de.pages()) and len(set(nav)) == len(nav)


def test_the_api_reference_documents_every_public_name():
    reference = de.page_text("api.md")
    for name, where in gridgnn._EXPORTS.items():
        module, _, attribute = where.partition(":")
        assert f"::: {module}.{attribute or name}\n" in reference, name


def test_the_docs_extra_is_pinned_and_built_in_ci():
    ci = (de.REPO_ROOT / ".ci" / "run").read_text()
    assert "pip install -c constraints-cpu.txt -e '.[test]'" in ci and "python -m pytest -q" in ci
    assert "pip install -c constraints-cpu.txt -e '.[docs]'" in ci and "mkdocs build --strict" in ci
    pins = dict(re.findall(r"^([\w.-]+)==(\S+)$", (de.REPO_ROOT / "constraints-cpu.txt").read_text(), re.M))
    assert {"mkdocs", "mkdocstrings", "mkdocstrings-python", "pymdown-extensions"} <= set(pins)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("mkdocstrings") is None, reason="needs the docs extra")
def test_the_site_builds_with_warnings_as_errors(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
                          cwd=de.REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "api" / "index.html").read_text(encoding="utf-8").count("grid_aggregation") > 0
