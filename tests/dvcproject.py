"""Real DVC projects in temporary git repos, built from this repository's pipeline files and the tests'
own params (tests/fixtures/params.yaml), so a user's edits to params.yaml never change what a test runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from filelock import FileLock

from tests.conftest import FIXTURE_PARAMS, REPO_ROOT, hang_guard_s, run_tmp_path_factory
from tracevote.cli.demo import (
    BUILTIN_STEPS,
    copy_pipeline,
    deep_merge,
    local_dataset,
    local_steps_dataset,
    write_params,
)

BIN_DIR = Path(sys.executable).parent


def project_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment stages run in: this venv first on PATH, no API key unless given."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PATH"] = f"{BIN_DIR}{os.pathsep}{env.get('PATH', '')}"
    env["DVC_NO_ANALYTICS"] = "1"
    return {**env, **(extra or {})}


def run(cwd: Path, *args: str, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(args, cwd=cwd, env=env or project_env(), text=True, capture_output=True,
                            timeout=hang_guard_s())
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {result.returncode}\n{result.stdout}\n{result.stderr}")
    return result


def run_stage(root: Path, script: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """stages/<script> run as DVC runs it, in `root`; fails the test on a non-zero exit unless `check` is off."""
    result = subprocess.run([sys.executable, str(REPO_ROOT / "stages" / script), *args], cwd=root,
                            env=project_env(), capture_output=True, text=True, timeout=hang_guard_s())
    if check:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


def dvc(cwd: Path, *args: str, **kwargs: Any) -> subprocess.CompletedProcess:
    return run(cwd, str(BIN_DIR / "dvc"), *args, **kwargs)


def make_project(root: Path, params: dict[str, Any] | None = None) -> Path:
    """A git repo holding this repository's pipeline (dvc.yaml, stages/) and the fixture params with overrides."""
    copy_pipeline(REPO_ROOT, root, FIXTURE_PARAMS, params or {})
    init_repos(root)
    run(root, "git", "add", "-A")
    run(root, "git", "commit", "-qm", "pipeline")
    return root


def init_repos(root: Path) -> None:
    """A git repo (a test identity) and a DVC project in `root`, analytics off: a copy of what one real `git init`
    and `dvc init` made this run (init_repos_for_real, built once), so a project costs no DVC process (~0.44 CPU s).
    It refuses what `dvc init` refuses: a `.dvc` already there, or one the project's .gitignore ignores."""
    if (root / ".dvc").exists():
        raise AssertionError(f"{root / '.dvc'} exists: `dvc init` would refuse it")
    template = built_once(run_tmp_path_factory(), "dvc-init", lambda folder: init_repos_for_real(folder / "repo"))
    shutil.copytree(template / "repo" / ".git", root / ".git", symlinks=True)
    # asked before .dvc is there, of the .gitignore files alone (the index tracks .dvc's files), as `dvc init` asks
    if run(root, "git", "check-ignore", "-q", "--no-index", ".dvc", check=False).returncode == 0:
        raise AssertionError(f"{root / '.dvc'} is ignored by git: `dvc init` would refuse it")
    # DVC makes .dvc/tmp (the btime that keys its cache of this folder, the lock) at its first run in the project
    shutil.copytree(template / "repo" / ".dvc", root / ".dvc", ignore=shutil.ignore_patterns("tmp"))
    shutil.copy2(template / "repo" / ".dvcignore", root / ".dvcignore")


def init_repos_for_real(root: Path) -> None:
    """What init_repos copies, made by the real commands in the new folder `root`: `git init` with a test
    identity, then `dvc init` (which stages .dvc/config, .dvc/.gitignore and .dvcignore), analytics off."""
    root.mkdir(parents=True)
    run(root, "git", "init", "-q")
    run(root, "git", "config", "user.email", "test@example.com")
    run(root, "git", "config", "user.name", "test")
    dvc(root, "init", "-q")
    # what `dvc config core.analytics false` writes, without another DVC process (~0.3 CPU s) per project
    (root / ".dvc" / "config").write_text("[core]\n    analytics = false\n", encoding="utf-8")


def copy_project(project: Path, destination: Path) -> Path:
    """A copy of a built project (git, DVC cache, ledgers and all) for a test that changes or deletes parts of
    it, so the tests sharing the original see it as built whatever order they run in."""
    return Path(shutil.copytree(project, destination, symlinks=True))


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder `name` that `build` fills, built once per test run and shared by every xdist worker: the first
    to ask builds it under a lock, the others wait and then read it. A build that failed half-way is built anew by
    the next to ask. Read it or copy it (copy_project): never change it, other workers read it at the same time."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the run's folder, above each worker's
    folder = shared / "built-once" / name
    folder.parent.mkdir(exist_ok=True)
    with FileLock(shared / "built-once" / f"{name}.lock"):
        if not (folder / "done").is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            build(folder)
            (folder / "done").write_text("built\n")
    return folder


def one_dataset(name: str, path: Path | str, **fields: Any) -> dict[str, Any]:
    """Params overrides for a project of one local dataset `name`, which DeepConf and debate run on, and the
    hand-written step-labelled demo file (`<name>_steps`), which the critique runs on; grading grades the pool
    (run pool_<name>) with one Math-Verify worker, which is enough for it and starts in half the CPU."""
    steps = f"{name}_steps"
    return {"datasets": {name: {**local_dataset(Path(path)), **fields}, steps: local_steps_dataset(BUILTIN_STEPS)},
            "deepconf": {"datasets": [name]}, "debate": {"datasets": [name], "contest_halves": []},
            "critique": {"datasets": [steps]},
            "grading": {"runs": {f"pool_{name}": {"dataset": name, "predictions": f"pools/{name}.json",
                                                  "id_key": None}}, "workers": 1}}


def update_params(root: Path, overrides: dict[str, Any]) -> None:
    """Merge `overrides` into the project's params.yaml."""
    params = yaml.safe_load((root / "params.yaml").read_text())
    write_params(root / "params.yaml", deep_merge(params, overrides))


MODEL_KEYS = frozenset({"backend", "sim"})  # the rest of what tests once set under model: is the endpoint's


def model_overrides(endpoint: str = "deepseek", **fields: Any) -> dict[str, Any]:
    """Params overrides for who answers and the endpoint every method uses by default: `backend` and `sim` go to
    `model:`, the rest (base_url, name, needs_key, extra_body, profile, ...) to `endpoints.<endpoint>`."""
    if "base_url" in fields:  # a loopback simulated server plays DeepSeek unless the test names another profile
        fields = {"profile": "deepseek", **fields}
    model = {key: value for key, value in fields.items() if key in MODEL_KEYS}
    served = {key: value for key, value in fields.items() if key not in MODEL_KEYS}
    return {**({"model": model} if model else {}), **({"endpoints": {endpoint: served}} if served else {})}


def update_endpoint(params: dict[str, Any], endpoint: str = "deepseek", **fields: Any) -> dict[str, Any]:
    """`params` (a loaded params.yaml) changed in place as model_overrides says, and returned."""
    if "base_url" in fields:
        fields = {"profile": "deepseek", **fields}
    for key, value in fields.items():
        target = params["model"] if key in MODEL_KEYS else params["endpoints"][endpoint]
        target[key] = value
    return params
