"""`python -m tracevote datasets local DIR`: the real project offline in one step.

Every dataset of params.yaml with a file in DIR (the rule `make try DATA=DIR` uses: <name>.jsonl, .json, .parquet or
.csv, else <name>_test.*) is pointed at it (source.path and source.watch; problem_key as the file says it); every
other dataset is removed from `datasets:` and from each method that names it. params.yaml is rewritten as `dvc exp
run -S` rewrites it (DVC's own round-trip YAML writer), so its comments and layout stay; all or nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from tracevote.cli.demo import LOCAL_SUFFIXES, find_local_file, local_problem_key
from tracevote.cli.demo_params import MAPPED_LISTS, SET_ASIDE_LISTS, nested_get
from tracevote.core.config import load_params
from tracevote.core.errors import DataError
from tracevote.core.fileio import write_text
from tracevote.core.inputs import refuse_output_sources


@dataclass(frozen=True)
class LocalChange:
    """What `datasets local` does to params.yaml."""

    sources: dict[str, str]  # dataset -> its file (datasets_local writes a relative one from the params' folder)
    problem_keys: dict[str, str]  # dataset -> problem_key, where the file's differs from the recipe's
    removed: list[str]  # datasets with no file in DIR
    kept_local: list[str]  # datasets with no file in DIR that already read a local file (e.g. the shipped tinymath)
    lists: dict[str, list[str]]  # "critique.datasets" -> what it keeps, for each list that lost a name
    runs_removed: list[str]  # grading runs of a removed dataset


def plan_local(params: dict[str, Any], data: Path) -> LocalChange:
    """The change, or a DataError (nothing written) when DIR holds no file for a dataset some method needs all of."""
    if not data.is_dir():
        raise DataError(f"{data}: not a folder (name a folder of dataset files, e.g. ../shared/data)")
    datasets = params["datasets"]
    found = {name: path for name in datasets if (path := find_local_file(data, str(name))) is not None}
    if not found:
        raise DataError(f"{data}: holds no file for any dataset of params.yaml: looked for <name> or <name>_test "
                        f"with {', '.join(LOCAL_SUFFIXES)}, for {', '.join(map(str, datasets))}; nothing written")
    kept_local = [str(name) for name in datasets if name not in found and datasets[name]["source"].get("path")]
    removed = [str(name) for name in datasets if name not in found and name not in kept_local]
    offline = {*found, *kept_local}
    lists = {}
    # a method's own list must keep at least one dataset with a file; a live run's and a study's may end empty
    for keys in (*MAPPED_LISTS, *SET_ASIDE_LISTS):
        names = [str(name) for name in nested_get(params, keys)]
        kept = [name for name in names if name in offline]
        if kept != names:
            if not kept and keys in MAPPED_LISTS and keys[-1] == "datasets":
                raise DataError(f"{'.'.join(keys)}: none of {', '.join(names)} has a file in {data} (<name> or "
                                f"<name>_test with {', '.join(LOCAL_SUFFIXES)}); add one, or name another dataset "
                                f"there; nothing written")
            lists[".".join(keys)] = kept
    keys = {name: key for name, path in found.items()
            if (key := local_problem_key(datasets[name], path)) != datasets[name]["problem_key"]}
    runs = [str(run) for run, entry in (params["grading"]["runs"] or {}).items() if entry["dataset"] not in offline]
    return LocalChange({name: str(path) for name, path in found.items()}, keys, removed, kept_local, lists, runs)


def as_written(path: Path, params_dir: Path) -> str:
    """An absolute path as it is; a relative one (as DIR was given, from here) made relative to the params file's
    folder, where DVC runs the stages that read it."""
    return str(path) if path.is_absolute() else os.path.relpath(path, params_dir)


def apply_local(data: Any, change: LocalChange) -> None:
    """`change` made to `data`, params.yaml as DVC's round-trip loader reads it (comments kept)."""
    for name, path in change.sources.items():
        source = data["datasets"][name]["source"]
        source["hf_dataset"], source["path"], source["watch"] = None, path, path
        if name in change.problem_keys:
            data["datasets"][name]["problem_key"] = change.problem_keys[name]
    for name in change.removed:
        del data["datasets"][name]
    for dotted, kept in change.lists.items():
        names = nested_get(data, tuple(dotted.split(".")))
        for name in [name for name in names if name not in kept]:
            names.remove(name)
    for run in change.runs_removed:
        del data["grading"]["runs"][run]


def describe(change: LocalChange, params_path: Path) -> str:
    lines = [f"datasets local: {name} <- {path}" + (f" (problem_key: {change.problem_keys[name]}, as the file "
                                                      f"says)" if name in change.problem_keys else "")
             for name, path in change.sources.items()]
    if change.kept_local:
        lines.append(f"datasets local: kept {', '.join(change.kept_local)} as they are (already read from a local "
                     f"file)")
    if change.removed:
        lines.append(f"datasets local: removed {', '.join(change.removed)} (no file for it) from datasets:")
    lines += [f"datasets local: {dotted} is now [{', '.join(kept)}]" for dotted, kept in change.lists.items()]
    if change.runs_removed:
        lines.append(f"datasets local: removed grading.runs {', '.join(change.runs_removed)} (its dataset is gone)")
    lines.append(f"datasets local: wrote {params_path}; `make repro` now fetches and normalizes offline from these "
                 f"files (each method's model is still called as its endpoint says; model.backend: sim needs none)")
    return "\n".join(lines)


def datasets_local(data: Path, params_path: Path) -> str:
    """Point params.yaml's datasets at the files of `data`; the lines saying what changed."""
    from dvc.utils.serialize import dumps_yaml, parse_yaml_for_update  # DVC's round-trip YAML (`dvc exp run -S`)

    load_params(params_path)  # a file check_params refuses is mended first: the plan reads it as it is
    text = params_path.read_text(encoding="utf-8")
    change = plan_local(yaml.safe_load(text), data)
    change = replace(change, sources={name: as_written(Path(path), params_path.parent)
                                      for name, path in change.sources.items()})
    refuse_output_sources(change.sources, params_path.parent, params_path)  # check_params would refuse them
    document = parse_yaml_for_update(text, str(params_path))
    apply_local(document, change)
    write_text(params_path, dumps_yaml(document))  # whole or not at all
    return describe(change, params_path)
