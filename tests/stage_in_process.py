"""`run_stage`'s twin in the test's own process: stages/<script> run as __main__ from `root`, in the environment
`project_env` gives a stage (no *_API_KEY), its exit code, stdout and stderr returned as a process's would be.
For the stages a test runs as a step (normalize a dataset before the stage it is about, score what was built),
to spare each its interpreter start and imports (0.2-0.5 CPU s); the claims about a stage's process (its exit code
and one line on stderr when it refuses, kill -9, a signal) keep a real process. Needs no pytest fixture, so a
module fixture may use it."""

from __future__ import annotations

import contextlib
import io
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.dvcproject import project_env


def run_stage_here(root: Path, script: str, *args: str, check: bool = True,
                   env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """stages/<script> with `args` run in this process in `root`, `env` added to the stage's environment; fails the
    test on a non-zero exit unless `check` is off."""
    path = REPO_ROOT / "stages" / script
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        for key in [key for key in os.environ if key.endswith("_API_KEY")]:
            patch.delenv(key)
        for key, value in project_env(env).items():
            patch.setenv(key, value)
        patch.setattr(sys, "argv", [str(path), *args])
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = _exit_code_of(path)
    result = subprocess.CompletedProcess([str(path), *args], code, out.getvalue(), err.getvalue())
    if check:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


def _exit_code_of(path: Path) -> int:
    try:
        runpy.run_path(str(path), run_name="__main__")
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    return 0
