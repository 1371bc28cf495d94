"""A frozen dataclass from a parsed YAML mapping, with every key and value type checked.

    build(DecodingConfig, {"temperature": "hot", ...}, "decoding")
    -> ConfigError("decoding.temperature: expected a number, got 'hot'")

Nested dataclasses, unions (`X | None`; `str | tuple[str, ...]`, read by the value's shape), Literal,
tuple[X, ...] and dict fields are read recursively (a `dict[str, SomeConfig]` builds each entry with its
key as `name`); ints are accepted where floats are expected. After construction, the object's own
`validate(where)` runs.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any, Literal

from tracevote.core.errors import ConfigError


def build(cls: type, raw: Any, where: str, **given: Any) -> Any:
    """Construct dataclass `cls` from a mapping, checking keys and value types recursively.

    `given` fields come from the caller, not the file (a dataset's name is its key in `datasets:`);
    the file may not set them.
    """
    if not isinstance(raw, dict):
        raise ConfigError(f"{where or 'top level'}: expected a mapping, got {raw!r}")
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name not in given}
    hints = typing.get_type_hints(cls)
    required = {n for n, f in fields.items() if f.default is dataclasses.MISSING}
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        raise ConfigError(f"{_join(where, unknown[0])}: unknown key (known: {', '.join(sorted(fields))})")
    missing = sorted(required - set(raw))
    if missing:
        raise ConfigError(f"{_join(where, missing[0])}: missing")
    values = {name: _coerce(hints[name], raw[name], _join(where, name)) for name in raw}
    obj = cls(**values, **given)
    if hasattr(obj, "validate"):
        obj.validate(where)
    return obj


def _coerce(hint: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if dataclasses.is_dataclass(hint):
        return build(hint, value, where)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        return _coerce_union([a for a in args if a is not type(None)], value, where)
    if origin is Literal:
        if value not in args:
            raise ConfigError(f"{where}: {value!r} is not one of {', '.join(map(repr, args))}")
        return value
    if origin is tuple:
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        return tuple(_coerce(args[0], item, f"{where}[{i}]") for i, item in enumerate(value))
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        if args and dataclasses.is_dataclass(args[1]):  # a named collection: each entry learns its key
            key_field = getattr(args[1], "KEY_FIELD", "name")
            return {key: build(args[1], entry, _join(where, str(key)), **{key_field: key})
                    for key, entry in value.items()}
        return value
    return _scalar(hint, value, where)


def _coerce_union(alternatives: list[Any], value: Any, where: str) -> Any:
    """The alternative of the value's shape (`str | tuple[str, ...]`: a list is read as the tuple)."""
    fitting = [hint for hint in alternatives if _shape(hint) == _shape_of(value)]
    if fitting or len(alternatives) == 1:
        return _coerce((fitting or alternatives)[0], value, where)
    expected = " or ".join(_SHAPE_NAMES[_shape(hint)] for hint in alternatives)
    raise ConfigError(f"{where}: expected {expected}, got {value!r}")


_SHAPE_NAMES = {"list": "a list", "mapping": "a mapping", "scalar": "a single value"}


def _shape(hint: Any) -> str:
    origin = typing.get_origin(hint)
    if origin is tuple:
        return "list"
    if dataclasses.is_dataclass(hint) or origin is dict or hint is dict:
        return "mapping"
    return "scalar"


def _shape_of(value: Any) -> str:
    return "list" if isinstance(value, list) else "mapping" if isinstance(value, dict) else "scalar"


def _scalar(hint: Any, value: Any, where: str) -> Any:
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return value
    raise TypeError(f"unsupported config type {hint!r} at {where}")


def require(ok: bool, where: str, key: str, value: Any, expected: str) -> None:
    if not ok:
        raise ConfigError(f"{_join(where, key)}: {value!r} must be {expected}")


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key
