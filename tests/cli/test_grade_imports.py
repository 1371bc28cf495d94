"""`python -m tracevote grade` on a file starts fast: the critic's and the pool's heavy libraries load only when
they are used (together they cost ~1-2 s of start-up, more than grading GSM8K takes)."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("numpy", "pandas", "pyarrow", "requests", "sympy")


@pytest.mark.parametrize("module", ["tracevote.cli.main", "tracevote.cli.grade", "tracevote.grading.runs"])
def test_the_grade_path_imports_no_heavy_library(module: str) -> None:
    code = f"import sys, {module}; print(' '.join(name for name in {HEAVY!r} if name in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert loaded == []
