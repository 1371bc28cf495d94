"""A fresh clone of this repository as `make setup` leaves it, built once per test run for the tests that run the
Makefile's workflows in one (`make demo`, `make try`, the README's offline block): each copies it instead of cloning
and setting up its own (the plots template and the bytecode: ~3.5 CPU s a clone). The Makefile's targets run with
this test run's venv."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, hang_guard_s
from tests.dvcproject import built_once, copy_project, project_env, run

VENV = Path(sys.executable).parent.parent
PLOTS_TEMPLATE = Path(".dvc") / "plots_offline.html"  # the Makefile's PLOTS_TEMPLATE


def make(cwd: Path, *targets: str) -> subprocess.CompletedProcess:
    """The real Makefile target, reusing this test run's venv instead of installing a new one."""
    stamp = VENV / ".runtime-installed"
    command = ["make", "--no-print-directory", f"VENV={VENV}", "-o", str(stamp), *targets]
    return subprocess.run(command, cwd=cwd, env=project_env(), capture_output=True, text=True, timeout=hang_guard_s())


@pytest.fixture
def venv_stamp() -> None:
    if not (VENV / ".runtime-installed").is_file():
        pytest.skip(f"{VENV} was not set up by `make setup` (no .runtime-installed stamp)")


def build_set_up_clone(folder: Path) -> None:
    """`git clone` and `make setup` in folder/clone, then the bytecode each of `make demo`, `try` and `real` compiles
    first (the Makefile's compile_own), so a copy finds it up to date."""
    clone = folder / "clone"
    run(folder, "git", "clone", "-q", str(REPO_ROOT), str(clone))
    set_up = make(clone, "setup")
    assert set_up.returncode == 0, set_up.stdout + set_up.stderr
    run(clone, sys.executable, "-m", "compileall", "-q", "src", "stages", "bench", "tests")
    assert run(clone, "git", "status", "--porcelain").stdout == ""  # what setup made, git ignores


def set_up_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fresh clone after `make setup`, built once per run and shared by xdist workers: read it, never change it."""
    return built_once(tmp_path_factory, "set-up-clone", build_set_up_clone) / "clone"


def set_up_clone(tmp_path_factory: pytest.TempPathFactory, destination: Path) -> Path:
    """A copy of the fresh clone after `make setup`, at `destination`, for a test to run the Makefile in."""
    return copy_project(set_up_template(tmp_path_factory), destination)


def copy_plots_template(tmp_path_factory: pytest.TempPathFactory, project: Path) -> None:
    """The page `make setup` writes (PLOTS_TEMPLATE, ~2.3 CPU s) into a project made of the pipeline's files, with the
    clone's mtime: its `make setup` (or `make repro`, which needs it) then finds it up to date."""
    shutil.copy2(set_up_template(tmp_path_factory) / PLOTS_TEMPLATE, project / PLOTS_TEMPLATE)
