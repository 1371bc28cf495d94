"""A stage run before its inputs exist (a fresh clone): one line naming what is missing and `dvc pull <the stage that
makes it>` when the project has a DVC remote, else the stage that makes it; from `tracevote inputs`, `pool status`
and `make repro ARGS="-s <stage>"` (where DVC alone says `[Errno 2] No such file or directory`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, hang_guard_s
from tests.dvcproject import dvc, project_env, run
from tests.fresh_clone import copy_plots_template, make, venv_stamp  # noqa: F401 (a fixture)

SCORE_LACKS = ("score@aime_2025: its inputs data/aime_2025.jsonl (made by normalize@aime_2025), pools/aime_2025 (made "
               "by build_pool@aime_2025) and pools/aime_2025.json (made by build_pool@aime_2025) are missing")


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A fresh clone: no data, no pools; its DVC remote the shipped `local`."""
    clone = tmp_path / "clone"
    run(tmp_path, "git", "clone", "-q", str(REPO_ROOT), str(clone))
    return clone


def tracevote(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tracevote", *args], cwd=cwd, env=project_env(),
                          capture_output=True, text=True, timeout=hang_guard_s())


def test_with_a_remote_it_says_what_to_pull(clone: Path) -> None:
    result = tracevote(clone, "inputs", "score@aime_2025")
    assert result.returncode == 1
    assert result.stdout == (f"{SCORE_LACKS}: `dvc pull normalize@aime_2025 build_pool@aime_2025` fetches them from "
                             f"the DVC remote 'local', or `dvc repro score@aime_2025` (without -s) makes them first\n")


def test_without_a_remote_it_says_which_stage_makes_it(clone: Path) -> None:
    dvc(clone, "remote", "remove", "local")
    result = tracevote(clone, "inputs", "normalize@aime_2025")
    assert result.returncode == 1
    assert result.stdout == ("normalize@aime_2025: its input data/raw/aime_2025.jsonl (made by fetch@aime_2025) is "
                             "missing: `dvc repro normalize@aime_2025` (without -s) makes it first (the project has no "
                             "DVC remote to pull from)\n")


def test_a_stage_with_its_inputs_lacks_nothing(clone: Path) -> None:
    result = tracevote(clone, "inputs", "fetch@aime_2025")  # its inputs are the repository's own files
    assert (result.returncode, result.stdout) == (0, "inputs: fetch@aime_2025 has every input\n")


def test_pool_status_says_how_to_get_the_pool(clone: Path) -> None:
    result = tracevote(clone, "pool", "status")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ("no pools under pools/aime_2025: `dvc pull build_pool@aime_2025` fetches it from the DVC "
                             "remote 'local', or `dvc repro build_pool@aime_2025` makes it\n")


@pytest.mark.slow
def test_make_repro_of_one_stage_says_it_after_dvc_fails(clone: Path, venv_stamp: None,  # noqa: F811
                                                          tmp_path_factory: pytest.TempPathFactory) -> None:
    copy_plots_template(tmp_path_factory, clone)  # what `make setup` writes, so `make repro` has nothing to set up
    dvc(clone, "remote", "modify", "--local", "local", "url", str(clone.parent / "remote"))  # an empty one
    result = make(clone, "repro", "ARGS=-s score@aime_2025")
    assert result.returncode != 0
    assert "ERROR" in result.stderr or "WARNING" in result.stderr  # DVC's own lines, before the stage could run
    assert (f"{SCORE_LACKS}, and the DVC remote 'local' did not have them: `dvc repro score@aime_2025` (without -s) "
            f"makes them first") in result.stdout, result.stdout + result.stderr
