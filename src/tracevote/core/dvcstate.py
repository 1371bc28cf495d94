"""What dvc.lock says was already built, so a fresh clone never pays for a pool a teammate has.

In a fresh clone the pool is not on disk, DVC sees build_pool's output missing, and `dvc repro`
runs the paid stage again. When dvc.lock records a successful build_pool with exactly the params in
force now (and the same content of the files it depends on), the samples exist somewhere (a remote, a
teammate's cache): the stage refuses to request them and says to pull instead.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import yaml

# libyaml's parser where PyYAML was built with it: the same values (the resolver and constructor are PyYAML's own
# in both), several times faster on a dvc.lock of a few hundred stages, which every paid stage reads
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(path: Path) -> Any:
    """The YAML file at `path`, as yaml.safe_load reads it; {} when empty."""
    return yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER) or {}


def locked_stage(lock_path: Path, stage: str) -> dict[str, Any]:
    """dvc.lock's entry for `stage` ({} when the file or the stage is absent)."""
    if not lock_path.is_file():
        return {}
    entry = read_yaml(lock_path).get("stages", {}).get(stage)
    return entry if isinstance(entry, dict) else {}


def locked_params(entry: dict[str, Any]) -> dict[str, Any] | None:
    """The param values a dvc.lock entry (locked_stage) recorded for its stage's last successful run, or None."""
    values = (entry.get("params") or {}).get("params.yaml")
    return values if isinstance(values, dict) and values else None


def dotted(params: dict[str, Any], key: str) -> Any:
    """params["a"]["b"] for key "a.b"; a missing key reads as None."""
    value: Any = params
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def already_built(lock_path: Path, stage: str, params_path: Path) -> bool:
    """True when dvc.lock's last run of `stage` used the same values as params.yaml has now, and the same
    content of each file it depends on (a changed predictions file is new work, not a pool to pull)."""
    entry = locked_stage(lock_path, stage)
    recorded = locked_params(entry)
    if recorded is None:
        return False
    current = read_yaml(params_path)
    same_params = all(dotted(current, key) == value for key, value in recorded.items())
    return same_params and not changed_file_deps(entry, lock_path.parent)


def changed_file_deps(entry: dict[str, Any], root: Path) -> list[str]:
    """The file dependencies of a dvc.lock entry (locked_stage) whose md5 on disk, under `root`, differs from the
    recorded one (folders are not compared)."""
    changed = []
    for dep in entry.get("deps", []) or []:
        recorded, path = dep.get("md5"), root / str(dep.get("path"))
        comparable = isinstance(recorded, str) and not recorded.endswith(".dir") and path.is_file()
        if comparable and hashlib.md5(path.read_bytes()).hexdigest() != recorded:
            changed.append(str(dep["path"]))
    return changed
