"""The params reference: every key of params.yaml, grouped by section, with its type, default, allowed values
and explanation, all read from the config classes (the explanations are their fields' `param(...)` text).

    reference_markdown() -> "# params.yaml reference\\n...| `pool.n_pool` | integer | `512` | 1..1,000,000 | ..."

The docs site's hook calls reference_markdown(); `python -m tracevote params reference` prints it.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import yaml

from tracevote.core.config import Params
from tracevote.core.typedconfig import ConfigField, Spec, config_fields

ENTRY = "<name>"  # stands for an entry's key in a named collection (datasets.<name>.kind)
INTRO = ("Every key of `params.yaml`, generated from tracevote's config classes (`python -m tracevote params "
         "reference`), so it cannot drift from what `check_params` accepts. *Default* is the value in the "
         "repository's `params.yaml` (or the class's default where the file leaves the key out); `{ENTRY}` stands "
         "for an entry's key (1-64 letters, digits, `_` and `-`, no `.`). `params.schema.json` carries the same "
         "rules for editors.").replace("{ENTRY}", ENTRY)


@dataclasses.dataclass(frozen=True)
class Row:
    key: str
    field: ConfigField
    value: Any  # the value in params.yaml, or MISSING


def reference_markdown(params_file: str | Path = "params.yaml") -> str:
    """The reference page; defaults come from `params_file` when it exists (the repository's params.yaml)."""
    path = Path(params_file)
    values = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else {}
    lines = ["# params.yaml reference", "", INTRO]
    for section in config_fields(Params):
        lines += ["", f"## {section.name}", "", _prose(section.spec.doc[:1].upper() + section.spec.doc[1:]) + "."]
        lines += _table(list(_rows(section, section.name, (values or {}).get(section.name, dataclasses.MISSING))))
    return "\n".join(lines) + "\n"


def _rows(field: ConfigField, key: str, value: Any) -> Iterator[Row]:
    """The field itself, unless it is a section (its keys instead), and for a named collection its entries'
    keys under `<key>.<name>`."""
    hint = _without_none(field.hint)
    entry = _entry_class(hint)
    if dataclasses.is_dataclass(hint):
        yield from _section_rows(hint, key, value, entry=False)
    elif entry is not None:
        yield Row(key, field, dataclasses.MISSING)
        yield from _section_rows(entry, f"{key}.{ENTRY}", dataclasses.MISSING, entry=True)
    else:
        yield Row(key, field, value)


def _section_rows(cls: type, key: str, values: Any, *, entry: bool) -> Iterator[Row]:
    for field in config_fields(cls, entry=entry):
        value = values.get(field.name, dataclasses.MISSING) if isinstance(values, dict) else dataclasses.MISSING
        yield from _rows(field, f"{key}.{field.name}", value)


def _table(rows: list[Row]) -> list[str]:
    lines = ["", "| Key | Type | Default | Allowed | Explanation |", "| --- | --- | --- | --- | --- |"]
    for row in rows:
        cells = [f"`{row.key}`", type_text(row.field.hint), _default(row), allowed_text(row.field.hint, row.field.spec),
                 _prose(row.field.spec.doc)]
        lines.append("| " + " | ".join(cell.replace("|", "\\|").replace("\n", " ") for cell in cells) + " |")
    return lines


def _prose(text: str) -> str:
    """Text outside code spans, where Markdown would take <name> for an HTML tag."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _default(row: Row) -> str:
    value = row.value if row.value is not dataclasses.MISSING else row.field.default
    if value is dataclasses.MISSING:
        return "required" if _entry_class(_without_none(row.field.hint)) is None else ""
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else json.dumps(value)
    return f"`{text}`" if len(text) <= 60 else f"`{text[:57]}...`"


def type_text(hint: Any) -> str:
    """int -> "integer"; str | None -> "text or null"; tuple[int, ...] -> "list of integers"."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join("null" if arg is type(None) else type_text(arg) for arg in args)
    if origin is Literal:
        return "choice"
    if origin is tuple:
        if args[-1] is not Ellipsis:
            return f"list of {len(args)} {type_text(args[0])}s"
        return f"list of {type_text(args[0])}s"
    if origin is dict or hint is dict:
        return "mapping" if not args or args[1] is Any else f"mapping of {_entry_name(args[1])}"
    if dataclasses.is_dataclass(hint):
        return "section"
    return {bool: "true/false", int: "integer", float: "number", str: "text"}[hint]


def allowed_text(hint: Any, spec: Spec) -> str:
    """The Literal's values, the bounds, the least length, no repeats and the key pattern, as they apply."""
    parts = [", ".join(f"`{value}`" for value in _literal_values(hint))]
    numeric = _without_none(hint) in (int, float) or _item_hint(hint) in (int, float)
    if spec.bounded() and numeric:
        parts.append(spec.range_text(int in (_without_none(hint), _item_hint(hint))))
    if spec.min_items:
        parts.append("not empty")
    if spec.unique:
        parts.append("no repeats")
    if spec.keys:
        parts.append(f"keys match `{spec.keys}`")
    return "; ".join(part for part in parts if part)


def _literal_values(hint: Any) -> list[Any]:
    hint = _without_none(hint)
    return list(typing.get_args(hint)) if typing.get_origin(hint) is Literal else []


def _item_hint(hint: Any) -> Any:
    hint = _without_none(hint)
    args = typing.get_args(hint)
    return args[-1] if args and typing.get_origin(hint) in (tuple, dict) and args[-1] is not Ellipsis else \
        (args[0] if args else None)


def _without_none(hint: Any) -> Any:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        rest = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        return rest[0] if len(rest) == 1 else hint
    return hint


def _entry_class(hint: Any) -> type | None:
    args = typing.get_args(hint)
    is_map = typing.get_origin(hint) is dict
    return args[1] if is_map and args and dataclasses.is_dataclass(args[1]) else None


def _entry_name(hint: Any) -> str:
    return "entries" if dataclasses.is_dataclass(hint) else f"{type_text(hint)}s"
