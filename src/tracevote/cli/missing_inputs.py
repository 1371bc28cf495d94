"""What a stage's inputs lack, and how to get them: `dvc pull <the stage that makes it>` when the project has a DVC
remote (a teammate may have pushed it), else which stage makes it.

DVC itself stops a stage run alone before its inputs exist (`dvc repro -s score@aime_2025` in a fresh clone) with
`[Errno 2] No such file or directory`, before the stage's own code runs; `make repro`, `python -m tracevote inputs`
and `pool status` say this one line instead.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class MissingInput:
    path: str  # as dvc.yaml names it: data/aime_2025.jsonl
    made_by: str | None  # the stage that writes it (normalize@aime_2025); None: a source file no stage writes


@dataclass(frozen=True)
class StageInputs:
    stage: str  # score@aime_2025
    missing: list[MissingInput]
    remote: str | None  # the project's default DVC remote, or None when it has none


def stage_inputs(root: Path, targets: list[str]) -> list[StageInputs]:
    """For each stage `targets` name (a stage, a foreach group, or a dvc.yaml), the inputs it lacks."""
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        remote, makers = default_remote(repo), stage_outputs(repo)
        found = []
        for target in targets:
            for stage in repo.stage.collect(target):
                missing = [MissingInput(dep.def_path, made_by(makers, str(dep.fs_path)))
                           for dep in stage.deps if not dep.exists]
                found.append(StageInputs(stage.addressing, missing, remote))
    return found


def default_remote(repo: Any) -> str | None:
    """The DVC remote `dvc pull` reads (core.remote, else the only one configured), or None."""
    return repo.config["core"].get("remote") or next(iter(repo.config["remote"]), None)


def stage_outputs(repo: Any) -> dict[str, str]:
    """Every output of the project's stages, as an absolute path, -> the stage that writes it."""
    return {os.path.normpath(str(out.fs_path)): stage.addressing for stage in repo.index.stages for out in stage.outs}


def output_hint(root: Path, path: Path) -> str:
    """How to get `path`, an output of a stage of the project at `root`, in a few words: "`dvc pull
    build_pool@aime_2025` fetches it from the DVC remote 'local', or `dvc repro build_pool@aime_2025` makes it"; ""
    outside a DVC project or for a path no stage writes."""
    from dvc.exceptions import NotDvcRepoError
    from dvc.repo import Repo

    try:
        with Repo(str(root)) as repo:
            remote, stage = default_remote(repo), made_by(stage_outputs(repo), str((root / path).absolute()))
    except NotDvcRepoError:
        return ""
    if stage is None:
        return ""
    make_it = f"`dvc repro {stage}` makes it"
    return make_it if remote is None else f"`dvc pull {stage}` fetches it from the DVC remote '{remote}', or {make_it}"


def made_by(makers: dict[str, str], path: str) -> str | None:
    """The stage whose output is `path` or a folder holding it."""
    path = os.path.normpath(path)
    for candidate in (path, *map(str, Path(path).parents)):
        if candidate in makers:
            return makers[candidate]
    return None


def hint(inputs: StageInputs, *, pulled: bool = False) -> str:
    """One line: what the stage lacks and the command that gets it, or "" when it lacks nothing. `pulled`: a pull
    from the remote was tried already (`dvc repro --pull`), so only making it is left."""
    if not inputs.missing:
        return ""
    one = len(inputs.missing) == 1
    each_named = [each.path + (f" (made by {each.made_by})" if each.made_by else " (no stage makes it)")
                  for each in inputs.missing]
    named = each_named[0] if one else f"{', '.join(each_named[:-1])} and {each_named[-1]}"
    start = f"{inputs.stage}: its input{'' if one else 's'} {named} {'is' if one else 'are'} missing"
    makers = list(dict.fromkeys(each.made_by for each in inputs.missing if each.made_by))
    if not makers:
        return start
    them = "it" if one else "them"
    make_it = f"`dvc repro {inputs.stage}` (without -s) makes {them} first"
    if inputs.remote is None:
        return f"{start}: {make_it} (the project has no DVC remote to pull from)"
    if pulled:
        return f"{start}, and the DVC remote '{inputs.remote}' did not have {them}: {make_it}"
    return f"{start}: `dvc pull {' '.join(makers)}` fetches {them} from the DVC remote '{inputs.remote}', or {make_it}"
