"""docs/reliability.md, the catalogue of promises, stays true to the suite: every test file it names exists, every
test it names (a node id `tests/x.py::test_y`, or a bare `test_y` of a file named earlier in its promise) is
defined there, and every promise of its Reliability section names at least one test."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

PAGE = REPO_ROOT / "docs" / "reliability.md"
# `tests/x.py`, `tests/x.py::test_y`, `tests/x.py::TestZ::test_y`, `tests/x.py::test_y[param]`, or a bare `test_y`
NAMED = re.compile(r"`(?:(?P<file>tests/[\w/]+\.py)(?:::(?P<node>[\w:]+)(?:\[[^\]`]*\])?)?|(?P<bare>test_\w+))`")


@cache
def defined_tests(path: Path) -> frozenset[str]:
    """The test functions of a file as node ids name them: test_y, and TestZ::test_y for a class's."""
    names = set()
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test"):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            names |= {f"{node.name}::{item.name}" for item in node.body
                      if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name.startswith("test")}
    return frozenset(names)


def promises(text: str) -> list[str]:
    """The text cut before each bold head and each heading: a promise runs from its bold head to the next one, its
    code blocks and later paragraphs included."""
    return [part for part in re.split(r"\n\s*\n(?=\*\*|#)", text) if part.strip()]


def unknown_names(promise: str) -> list[str]:
    """What the promise names that the suite does not hold."""
    unknown, files = [], []
    for match in NAMED.finditer(promise):
        if match["bare"]:
            if not any(match["bare"] in defined_tests(REPO_ROOT / file) for file in files):
                unknown.append(f"{match['bare']} (in none of {', '.join(files) or 'no file named before it'})")
            continue
        path = REPO_ROOT / match["file"]
        if not path.is_file():
            unknown.append(match["file"])
            continue
        files.append(match["file"])
        if match["node"] and match["node"] not in defined_tests(path):
            unknown.append(f"{match['file']}::{match['node']}")
    return unknown


def reliability_promises() -> list[str]:
    """The bold-headed promises of the page's Reliability section."""
    section = PAGE.read_text().split("## Reliability\n", 1)[1].split("\n## ", 1)[0]
    return [promise for promise in promises(section) if promise.startswith("**")]


def test_every_test_the_reliability_page_names_exists() -> None:
    text = PAGE.read_text()
    assert len(NAMED.findall(text)) >= 20  # the page does name tests: a broken pattern would find none
    unknown = [name for promise in promises(text) for name in unknown_names(promise)]
    assert unknown == []


def test_every_promise_names_the_tests_that_prove_it() -> None:
    found = reliability_promises()
    assert len(found) >= 10
    assert [promise.split("**")[1] for promise in found if not NAMED.search(promise)] == []


@pytest.mark.parametrize(("promise", "unknown"), [
    ("Tests: `tests/test_reliability_page.py::test_every_test_the_reliability_page_names_exists`.", []),
    ("`tests/test_reliability_page.py` (`test_every_promise_names_the_tests_that_prove_it`)", []),
    ("`tests/test_reliability_page.py::test_gone`", ["tests/test_reliability_page.py::test_gone"]),
    ("`tests/nowhere.py`", ["tests/nowhere.py"]),
    ("`test_every_promise_names_the_tests_that_prove_it` alone",
     ["test_every_promise_names_the_tests_that_prove_it (in none of no file named before it)"]),
    ("`tests/test_reliability_page.py::test_the_checker_finds_what_is_missing[x]`", []),
])
def test_the_checker_finds_what_is_missing(promise: str, unknown: list[str]) -> None:
    assert unknown_names(promise) == unknown
