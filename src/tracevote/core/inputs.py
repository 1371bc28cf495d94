"""A user's own input is never a pipeline output: a dataset's local `source.path` may not be, lie inside, or hold a
path DVC tracks as an output (a dvc.yaml stage's, or a .dvc file's), which a run would overwrite.

    clashes({"aime_2025": "data/aime_2025.jsonl"}, [Output(<root>/data/aime_2025.jsonl, "normalize@aime_2025")], root)
    -> ["datasets.aime_2025.source.path: data/aime_2025.jsonl is an output of normalize@aime_2025, which ..."]

The paths are read from params.yaml as plain YAML, before it is validated: a source that is an output is the problem
to report first, whatever else the file says (its `watch` not matching it, say).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracevote.core.errors import ConfigError

INPUTS_FOLDER = "inputs"  # where the messages suggest keeping one's own files


@dataclass(frozen=True)
class Output:
    path: Path  # absolute
    writer: str  # the stage that writes it (normalize@aime_2025) or the .dvc file that tracks it


def local_sources(params: Any) -> dict[str, str]:
    """{dataset: source.path} for every dataset with a local source (text) in `params`, params.yaml as plain YAML
    (read_params_yaml's, parsed once by its caller) before it is validated; {} when it holds no such mapping
    (validation then says why)."""
    datasets = params.get("datasets") if isinstance(params, dict) else None
    if not isinstance(datasets, dict):
        return {}
    return {str(name): entry["source"]["path"] for name, entry in datasets.items()
            if isinstance(entry, dict) and isinstance(entry.get("source"), dict)
            and isinstance(entry["source"].get("path"), str) and entry["source"]["path"]}


def output_sources(sources: Mapping[str, str], root: Path, params_path: Path) -> list[str]:
    """`<params file>: <problem>`, one line per dataset of `sources` whose path clashes with an output of the
    project at `root`."""
    near = {name: path for name, path in sources.items() if _relation((root / path).resolve(), root.resolve())}
    if not near:  # every output lies inside the project: a source outside it needs no look at DVC's index (a second)
        return []
    if not inside_a_dvc_project(root):  # no project, no outputs: DVC is not imported (~0.4 CPU s) to say so
        return []
    return [f"{params_path}: {line}" for line in clashes(near, tracked_outputs(root), root)]


def refuse_output_sources(sources: Mapping[str, str], root: Path, params_path: Path) -> None:
    lines = output_sources(sources, root, params_path)
    if lines:
        raise ConfigError("\n".join(lines))


def inside_a_dvc_project(root: Path) -> bool:
    """Whether DVC finds a project at `root`: a `.dvc` folder there or in a folder above it, up to the mount point,
    as dvc.repo.Repo.find_root looks (outside one, Repo raises NotDvcRepoError and tracked_outputs finds none)."""
    folder = os.path.abspath(root)
    while not os.path.isdir(os.path.join(folder, ".dvc")):
        parent = os.path.dirname(folder)
        if os.path.ismount(folder) or parent == folder:
            return False
        folder = parent
    return True


def tracked_outputs(root: Path) -> list[Output]:
    """Every output DVC knows in the project at `root`: each dvc.yaml stage's (every foreach entry) and each
    .dvc file's."""
    from dvc.exceptions import DvcException  # slow to import: only where a local source is checked
    from dvc.repo import Repo

    try:
        with Repo(str(root)) as repo:
            return [Output(Path(out.fs_path).resolve(), out.stage.addressing) for out in repo.index.outs]
    except DvcException:
        return []  # subtle: a pipeline DVC cannot read (a source that is its own fetch's output makes a cycle) fails
        # every dvc command with DVC's own message; run as a script, the params' problems are still reported


def clashes(sources: Mapping[str, str], outputs: list[Output], root: Path) -> list[str]:
    """One line per dataset whose local source (a path relative to `root`, or absolute) is, lies inside or holds
    an output; [] when none does."""
    lines, root = [], root.resolve()
    for name, path in sources.items():
        source = (root / path).resolve()
        for output in outputs:
            relation = _relation(source, output.path)
            if relation:
                lines.append(_message(name, path, relation, output, root))
                break
    return lines


def _relation(source: Path, output: Path) -> str | None:
    if source == output:
        return "is"
    if source.is_relative_to(output):
        return "lies inside"
    if output.is_relative_to(source):
        return "holds"
    return None


def _message(name: str, path: str, relation: str, output: Output, root: Path) -> str:
    shown = output.path.relative_to(root) if output.path.is_relative_to(root) else output.path
    what = "an output" if relation == "is" else f"{shown}, an output"
    place = f"{INPUTS_FOLDER}/{Path(path).name}"
    # a .dvc file's output (`dvc add`) is replaced by `dvc checkout` and `dvc pull`; a stage's, by the stage
    writer = (f"{output.writer}, whose checkout and pull would replace your file" if output.writer.endswith(".dvc")
              else f"{output.writer}, which a run would write over your file")
    return (f"datasets.{name}.source.path: {path} {relation} {what} of {writer}; keep it outside the pipeline's "
            f"outputs, e.g. move it to {place} and set source.path and source.watch to {place}")
