"""`python -m tracevote preset small`: the few params.yaml keys for a first real `dvc repro` on the simulated model.

`small` is the size the pipeline tests run at (16 traces per problem of about 150 tokens, windows of 32), on the
simulated model (`model.backend: sim`): every stage runs, offline, with no key, in minutes. params.yaml is rewritten
as `dvc exp run -S` rewrites it (DVC's own round-trip YAML writer), so its comments and layout stay; the result is
checked as check_params checks it before anything is written.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from tracevote.core.config import load_params
from tracevote.core.errors import ConfigError
from tracevote.core.fileio import write_text
from tracevote.core.params_yaml import read_params_yaml

SMALL_K = [1, 2, 4, 8, 16]
PRESETS: dict[str, dict[str, Any]] = {
    "small": {"model.backend": "sim", "model.sim.mean_tokens": 150, "pool.n_pool": 16,
              "confidence.group_size": 32, "confidence.tail_tokens": 32, "eval.k": SMALL_K, "eval.repeat": 8,
              "report.k": 16},
}
PRESET_HELP = ("write a preset's few keys into the params file: small is the simulated model (model.backend: sim) "
               "at 16 traces per problem, for a first `make repro` offline with no key")


def add_preset_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    preset = subparsers.add_parser("preset", help=PRESET_HELP, description=PRESET_HELP[0].upper() + PRESET_HELP[1:]
                                   + ". Comments and layout stay; `git diff params.yaml` shows the change.")
    preset.add_argument("name", choices=sorted(PRESETS), help="the preset")
    preset.add_argument("--params", type=Path, default=Path("params.yaml"),
                        help="the params file to rewrite (default: %(default)s)")
    preset.set_defaults(handler=cmd_preset)


def cmd_preset(args: argparse.Namespace) -> int:
    print(apply_preset(args.params, args.name))
    return 0


def preset_changes(params: dict[str, Any], name: str) -> dict[str, Any]:
    """The dotted keys the preset writes; study.k too when it names a K the preset's eval.k lacks ([]: every one)."""
    changes = dict(PRESETS[name])
    study_k = (params.get("study") or {}).get("k") or []
    if any(k not in changes["eval.k"] for k in study_k):
        changes["study.k"] = []
    return changes


def apply_preset(path: Path, name: str) -> str:
    """Write preset `name` into params file `path`, all or nothing; the lines saying what changed."""
    from dvc.utils.serialize import dumps_yaml, parse_yaml_for_update  # DVC's round-trip YAML (`dvc exp run -S`)

    params = read_params_yaml(path)
    if not isinstance(params, dict):
        raise ConfigError(f"{path}: not a mapping of params.yaml's sections")
    changes = preset_changes(params, name)
    document = parse_yaml_for_update(path.read_text(encoding="utf-8"), str(path))
    lines = [f"preset {name}: {dotted}: {value} (was {set_key(document, dotted, value)})"
             for dotted, value in changes.items()]
    text = dumps_yaml(document)
    with tempfile.TemporaryDirectory() as scratch:  # check_params's checks, on the file as it would be
        (Path(scratch) / path.name).write_text(text, encoding="utf-8")
        try:
            load_params(Path(scratch) / path.name)
        except ConfigError as exc:
            raise ConfigError(f"preset {name}: {path} would not pass check_params; nothing written:\n"
                              f"{str(exc).replace(str(Path(scratch) / path.name), str(path))}") from None
    write_text(path, text)
    return "\n".join([*lines, f"preset {name}: wrote {path}; `make repro` now runs every stage on the simulated "
                                f"model, offline and with no key (`git checkout {path}` undoes it)"])


def set_key(document: Any, dotted: str, value: Any) -> Any:
    """document[a][b] = value for "a.b" (sections made when absent); the value it replaced, or None."""
    *sections, key = dotted.split(".")
    node = document
    for section in sections:
        if node.get(section) is None:
            node[section] = {}
        node = node[section]
    before = node.get(key)
    node[key] = value
    return list(before) if isinstance(before, list) else before
