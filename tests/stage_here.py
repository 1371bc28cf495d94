"""A stage's script run in the test's own process, as `python <script> <args>` runs it from the project's folder:
its exit code and output, without an interpreter starting and importing for each. For tests that run many stages
only to see each refuse; one case of each such test still runs real processes, as DVC does."""

from __future__ import annotations

import os
import runpy
import subprocess
from pathlib import Path

import pytest


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
        try:
            runpy.run_path(str(script), run_name="__main__")
            code = 0
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
    captured = capsys.readouterr()
    return subprocess.CompletedProcess([str(script), *args], code, captured.out, captured.err)
