"""The docstring examples of src/ run with the suite (pyproject.toml's testpaths and --doctest-modules), and run from
any folder without writing into it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, hang_guard_s


def test_the_suite_collects_the_doctests_of_src(pytestconfig: pytest.Config) -> None:
    assert "src/tracevote" in pytestconfig.getini("testpaths")
    assert "--doctest-modules" in pytestconfig.getini("addopts")


def test_the_doctests_pass_from_an_empty_folder_and_leave_nothing_in_it(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(REPO_ROOT),
               "-c", str(REPO_ROOT / "pyproject.toml"), str(REPO_ROOT / "src" / "tracevote")]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=hang_guard_s())
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    passed = re.search(r"(\d+) passed", result.stdout)
    assert passed and int(passed[1]) >= 50, result.stdout[-1000:]  # the examples ran, not none
    assert sorted(path.name for path in tmp_path.iterdir()) == []
