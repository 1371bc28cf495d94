"""The params a DVC stage declares in dvc.yaml, as DVC resolves them (`foreach` entries and `${...}` filled in).

    declared_params("fetch@aime_2025")  -> ("datasets.aime_2025.source",)
    declared_params("check_params")     -> None (it declares no params: it depends on the whole file)

load_params asks it only when params.yaml has a problem, so that an offline stage fails on the problems of the
keys it reads and leaves the others to the stages that read them (a paid stage refuses every problem:
tracevote.core.config.check_params).
"""

from __future__ import annotations

from pathlib import Path


def declared_params(stage: str, root: Path | None = None) -> tuple[str, ...] | None:
    """The params keys of `stage` (its DVC address); None when it declares none or DVC cannot say."""
    from dvc.dependency.param import ParamsDependency  # slow to import: only on the error path
    from dvc.exceptions import DvcException
    from dvc.repo import Repo

    try:
        with Repo(None if root is None else str(root)) as repo:
            stages = repo.stage.collect(stage)
    except DvcException:
        return None  # subtle: then the stage reports every problem, as it did before stages were told apart
    keys = tuple(key for found in stages for dep in found.deps if isinstance(dep, ParamsDependency)
                 for key in dep.params)
    return keys or None
