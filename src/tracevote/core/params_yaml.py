"""params.yaml read as YAML, a syntax error said in one line with its file, line and column (what DVC prints in five):
a tab on line 3 -> "params.yaml:3:1: not valid YAML: found character '\\t' that cannot start any token (a tab: YAML
indents with spaces only)"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tracevote.core.errors import ConfigError

TAB_HINT = " (a tab: YAML indents with spaces only)"


def read_params_yaml(path: Path) -> Any:
    """The file's YAML, or a ConfigError: "<path>: not found", or the syntax error as yaml_error_line says it."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: not found") from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(yaml_error_line(path, exc)) from None


def yaml_error_line(path: Path, error: yaml.YAMLError) -> str:
    """"<path>:<line>:<column>: not valid YAML: <the problem>", lines and columns counted from 1 as editors do."""
    mark = getattr(error, "problem_mark", None)
    problem = " ".join(str(getattr(error, "problem", None) or error).split())
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
    return f"{where}: not valid YAML: {problem}" + (TAB_HINT if "'\\t'" in problem else "")

