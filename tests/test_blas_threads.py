"""Every stage and command loads numpy with OpenBLAS on one thread (tracevote/__init__.py says why), unless the
user set OPENBLAS_NUM_THREADS: the setting is made when tracevote loads, so each stage script imports tracevote
before any library that loads numpy (pyarrow, matplotlib, ...)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT, hang_guard_s
from tests.dvcproject import project_env

STAGES = sorted((REPO_ROOT / "stages").glob("*.py"))

# Runs a stage script's --help in this interpreter and prints OPENBLAS_NUM_THREADS as it was when numpy began to load
AT_NUMPY = """
import os, runpy, sys
seen = []
sys.addaudithook(lambda event, args: seen.append(os.environ.get("OPENBLAS_NUM_THREADS", "unset"))
                 if event == "import" and args[0] == "numpy" and not seen else None)
sys.argv = [sys.argv[1], "--help"]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit:
    pass
print(seen[0] if seen else "numpy not loaded")  # the last line, after the stage's help
"""


def imported_before_tracevote(script: Path) -> list[str]:
    """The modules the script's top-level imports load before its first import of tracevote."""
    modules = []
    for node in ast.parse(script.read_text(encoding="utf-8")).body:
        names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
        if any(name.split(".")[0] == "tracevote" for name in names):
            return modules
        modules += [name for name in names if name != "__future__"]
    return modules


def test_what_a_stage_imports_before_tracevote_loads_no_numpy() -> None:
    """Every stage's imports that precede tracevote, in one fresh interpreter: numpy stays unloaded."""
    before = sorted({module for script in STAGES for module in imported_before_tracevote(script)})
    assert "argparse" in before  # the check sees each script's imports
    check = f"import sys\nfor name in {before!r}:\n    __import__(name)\nprint('numpy' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", check], env=project_env(), capture_output=True, text=True,
                            timeout=hang_guard_s())
    assert result.stdout.strip() == "False", (before, result.stdout, result.stderr)


def numpy_threads_setting(env_extra: dict[str, str]) -> str:
    # this process set the variable when it loaded tracevote: the stage must not inherit it
    env = {key: value for key, value in project_env().items() if key != "OPENBLAS_NUM_THREADS"} | env_extra
    result = subprocess.run([sys.executable, "-c", AT_NUMPY, str(REPO_ROOT / "stages" / "score.py")], env=env,
                            capture_output=True, text=True, timeout=hang_guard_s())
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()[-1]


def test_numpy_loads_single_threaded_unless_the_user_set_it() -> None:
    assert numpy_threads_setting({}) == "1"
    assert numpy_threads_setting({"OPENBLAS_NUM_THREADS": "3"}) == "3"
