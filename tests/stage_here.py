"""A stage's script run in the test's own process, as `python <script> <args>` runs it from the project's folder:
its exit code and output, without an interpreter starting and importing for each (0.2-0.5 CPU s). For the stages a
test runs as a step (normalize a dataset before the stage it is about, score what was built) and for tests that run
many stages only to see each refuse; the claims about a stage's process (its exit code and one line on stderr when
it refuses, kill -9, a signal, the environment it inherits) keep a real process, as DVC runs it."""

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


def run_script_here(project: Path, script: Path, args: list[str], monkeypatch: pytest.MonkeyPatch,
                    capsys: pytest.CaptureFixture[str], *, env: dict[str, str] | None = None,
                    without_api_keys: bool = False) -> subprocess.CompletedProcess:
    """`script` with `args` run as __main__ in `project`, `env` set (and every *_API_KEY unset when asked): its exit
    code, stdout and stderr."""
    with monkeypatch.context() as patch:
        patch.chdir(project)
        for key, value in (env or {}).items():
            patch.setenv(key, value)
        if without_api_keys:
            for key in [key for key in os.environ if key.endswith("_API_KEY")]:
                patch.delenv(key)
        patch.setattr("sys.argv", [str(script), *args])
        capsys.readouterr()
        code = exit_code_of(script)
    captured = capsys.readouterr()
    return subprocess.CompletedProcess([str(script), *args], code, captured.out, captured.err)


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
            code = exit_code_of(path)
    result = subprocess.CompletedProcess([str(path), *args], code, out.getvalue(), err.getvalue())
    if check:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


def exit_code_of(script: Path) -> int:
    """`script` run as __main__: its exit code as the interpreter would give it (SystemExit(None) is 0, a message 1)."""
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    return 0


TRACEVOTE_MAIN = REPO_ROOT / "src" / "tracevote" / "__main__.py"  # what `python -m tracevote` runs, for run_script_here


def bench_stage_here(root: Path, stage: str, args: list[str], env: dict[str, str]) -> None:
    """A bench project's stage (bench.explorer_trace_project's StageRunner) run in this process."""
    run_stage_here(root, f"{stage}.py", *args, env=env)
