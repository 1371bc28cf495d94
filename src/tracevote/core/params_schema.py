"""A JSON Schema of params.yaml, made from the config classes (their types, Literal values, bounds and
explanations), so an editor completes keys and flags wrong values as check_params would.

    schema_text() -> '{\\n  "$schema": "https://json-schema.org/draft/2020-12/schema", ...'

`python -m tracevote params schema --out params.schema.json` writes it; params.yaml names it on its first line.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from typing import Any, Literal

from tracevote.core.config import Params
from tracevote.core.typedconfig import ConfigField, Spec, config_fields

SCHEMA_FILE = "params.schema.json"
DRAFT = "https://json-schema.org/draft/2020-12/schema"
_BOUNDS = {"ge": "minimum", "le": "maximum", "gt": "exclusiveMinimum", "lt": "exclusiveMaximum"}
_SCALARS = {bool: "boolean", int: "integer", float: "number", str: "string"}


def params_schema() -> dict[str, Any]:
    """The schema of the whole file."""
    root = _section(Params, entry=False)
    return {"$schema": DRAFT, "title": "tracevote params.yaml",
            "description": "Generated from tracevote's config classes by `python -m tracevote params schema`; "
                           "check_params applies the same rules and a few across sections.", **root}


def schema_text() -> str:
    """The schema as committed: two-space indents, keys in the classes' order, a final newline."""
    return json.dumps(params_schema(), indent=2, ensure_ascii=False) + "\n"


def _section(cls: type, *, entry: bool) -> dict[str, Any]:
    fields = config_fields(cls, entry=entry)
    schema: dict[str, Any] = {"type": "object", "properties": {field.name: _field(field) for field in fields}}
    required = [field.name for field in fields if field.default is dataclasses.MISSING]
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False  # build refuses an unknown key
    return schema


def _field(field: ConfigField) -> dict[str, Any]:
    schema = {"description": field.spec.doc, **_value(field.hint, field.spec)}
    if dataclasses.is_dataclass(field.default):  # a section params.yaml may leave out: its keys' defaults
        schema["default"] = dataclasses.asdict(field.default)  # type: ignore[arg-type]
    elif field.default is not dataclasses.MISSING:
        schema["default"] = field.default
    return schema


def _value(hint: Any, spec: Spec) -> dict[str, Any]:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if dataclasses.is_dataclass(hint):
        return _section(hint, entry=False)
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [_value(arg, spec) if arg is not type(None) else {"type": "null"} for arg in args]}
    if origin is Literal:
        return {"enum": list(args)}
    if origin is tuple:
        return _list(args, spec)
    if origin is dict or hint is dict:
        return _mapping(args, spec)
    schema: dict[str, Any] = {"type": _SCALARS[hint]}
    if hint in (int, float):
        schema.update(_bounds(spec))
    return schema


def _list(args: tuple[Any, ...], spec: Spec) -> dict[str, Any]:
    if args[-1] is not Ellipsis:  # a fixed-length tuple, [start, end]
        return {"type": "array", "prefixItems": [_value(arg, spec) for arg in args], "minItems": len(args),
                "maxItems": len(args)}
    schema: dict[str, Any] = {"type": "array", "items": _value(args[0], spec)}
    if spec.min_items is not None:
        schema["minItems"] = spec.min_items
    if spec.unique:
        schema["uniqueItems"] = True
    return schema


def _mapping(args: tuple[Any, ...], spec: Spec) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object"}
    if spec.keys is not None:
        schema["propertyNames"] = {"pattern": spec.keys}
    if args and dataclasses.is_dataclass(args[1]):
        schema["additionalProperties"] = _section(args[1], entry=True)
    elif args and args[1] is not Any:
        schema["additionalProperties"] = _value(args[1], spec)
    return schema


def _bounds(spec: Spec) -> dict[str, float]:
    return {name: getattr(spec, bound) for bound, name in _BOUNDS.items() if getattr(spec, bound) is not None}
