"""Real DVC projects in temporary git repos, built from this repository's pipeline files."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import REPO_ROOT

BIN_DIR = Path(sys.executable).parent
PIPELINE_FILES = ("dvc.yaml", "params.yaml", ".dvcignore")


def project_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment stages run in: this venv first on PATH, no API key unless given."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PATH"] = f"{BIN_DIR}{os.pathsep}{env.get('PATH', '')}"
    env["DVC_NO_ANALYTICS"] = "1"
    return {**env, **(extra or {})}


def run(cwd: Path, *args: str, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(args, cwd=cwd, env=env or project_env(), text=True, capture_output=True,
                            timeout=600)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {result.returncode}\n{result.stdout}\n{result.stderr}")
    return result


def dvc(cwd: Path, *args: str, **kwargs: Any) -> subprocess.CompletedProcess:
    return run(cwd, str(BIN_DIR / "dvc"), *args, **kwargs)


def make_project(root: Path, params: dict[str, Any] | None = None) -> Path:
    """A git repo holding this repository's pipeline (dvc.yaml, stages/, params.yaml with overrides)."""
    root.mkdir(parents=True, exist_ok=True)
    for name in PIPELINE_FILES:
        shutil.copy(REPO_ROOT / name, root / name)
    shutil.copytree(REPO_ROOT / "stages", root / "stages", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO_ROOT / "src", root / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    write_params(root, params or {})
    run(root, "git", "init", "-q")
    run(root, "git", "config", "user.email", "test@example.com")
    run(root, "git", "config", "user.name", "test")
    dvc(root, "init", "-q")
    dvc(root, "config", "core.analytics", "false")
    run(root, "git", "add", "-A")
    run(root, "git", "commit", "-qm", "pipeline")
    return root


def write_params(root: Path, overrides: dict[str, Any]) -> None:
    """params.yaml from the repository's, with nested `overrides` merged in."""
    params = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())
    if (root / "params.yaml").exists():
        params = yaml.safe_load((root / "params.yaml").read_text())
    (root / "params.yaml").write_text(yaml.safe_dump(deep_merge(params, overrides), sort_keys=False))


def deep_merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged
