"""A frozen dataclass from a parsed YAML mapping, with every key and value type checked.

    build(DecodingConfig, {"temperature": "hot", ...}, "decoding")
    -> ConfigError("decoding.temperature: expected a number, got 'hot'")

Nested dataclasses, unions (`X | None`; `str | tuple[str, ...]`, read by the value's shape), Literal,
tuple[X, ...] and dict fields are read recursively (a `dict[str, SomeConfig]` builds each entry with its
key as `name`); ints are accepted where floats are expected. A field declared with `param(...)` carries its
one-line explanation and its bounds, which build checks and the schema and the params reference show. After
construction, the object's own `validate(where)` runs.

Inside `collecting()`, every problem is recorded (one per key) and building goes on, so one run reports them
all; outside it, the first problem raises.

Inside `tracevote.core.reads.recording_reads()`, build makes objects that note each key the program reads.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal

from tracevote.core import reads
from tracevote.core.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class Spec:
    """A field's explanation and bounds; on a list field the bounds apply to each item."""

    doc: str
    ge: float | None = None
    le: float | None = None
    gt: float | None = None
    lt: float | None = None
    min_items: int | None = None
    unique: bool = False
    keys: str | None = None  # a mapping's key names, as a regular expression (the schema's propertyNames)

    def holds(self, value: float) -> bool:
        return ((self.ge is None or value >= self.ge) and (self.le is None or value <= self.le)
                and (self.gt is None or value > self.gt) and (self.lt is None or value < self.lt))

    def bounded(self) -> bool:
        return any(bound is not None for bound in (self.ge, self.le, self.gt, self.lt))

    def range_text(self, integer: bool) -> str:
        """Spec("", ge=1, le=256).range_text(True) -> "an integer in 1..256"; Spec("", gt=0, le=1) -> "in (0, 1]"."""
        low = self.ge if self.ge is not None else self.gt
        high = self.le if self.le is not None else self.lt
        if integer and self.ge is not None and self.le is not None:
            return f"an integer in {_number(self.ge)}..{_number(self.le)}"
        if low is not None and high is not None:
            opening, closing = "[" if self.ge is not None else "(", "]" if self.le is not None else ")"
            return f"in {opening}{_number(low)}, {_number(high)}{closing}"
        if low is not None:
            return f"{'>=' if self.ge is not None else '>'} {_number(low)}"
        return f"{'<=' if self.le is not None else '<'} {_number(high)}" if high is not None else ""


def _number(value: float) -> str:
    return f"{value:,}" if float(value).is_integer() and abs(value) >= 10_000 else f"{value:g}"


def param(doc: str, default: Any = dataclasses.MISSING, **bounds: Any) -> Any:
    """A config field with its explanation and bounds: `n_pool: int = param("traces per problem", ge=1)`."""
    return dataclasses.field(default=default, metadata={"spec": Spec(doc, **bounds)})


def spec_of(field: dataclasses.Field) -> Spec:
    spec = field.metadata.get("spec")
    if spec is None:
        raise TypeError(f"config field {field.name} is not declared with param(...): it needs an explanation")
    return spec


@dataclasses.dataclass(frozen=True)
class ConfigField:
    name: str
    hint: Any
    spec: Spec
    default: Any  # dataclasses.MISSING: the key is required


def config_fields(cls: type, *, entry: bool = False) -> list[ConfigField]:
    """The keys a section of params.yaml holds, in order; an entry of a named collection (`entry`) leaves out
    the field its key fills (KEY_FIELD, else `name`)."""
    given = getattr(cls, "KEY_FIELD", "name") if entry else None
    hints = typing.get_type_hints(cls)
    return [ConfigField(f.name, hints[f.name], spec_of(f), f.default) for f in dataclasses.fields(cls)
            if f.name != given]


@dataclasses.dataclass(frozen=True)
class Problem:
    key: str  # dotted, as the user writes it: "eval.k", "debate.problems[1]"
    message: str  # what is wrong, naming the value
    meant: str | None = None  # an unknown key's nearest known key, dotted: "debate.agents" for "debate.agnets"

    def __str__(self) -> str:
        return f"{self.key}: {self.message}"


_PROBLEMS: ContextVar[list[Problem] | None] = ContextVar("config_problems", default=None)


@contextmanager
def collecting() -> Iterator[list[Problem]]:
    """Record problems instead of raising the first: the yielded list holds them after the block."""
    problems: list[Problem] = []
    token = _PROBLEMS.set(problems)
    try:
        yield problems
    finally:
        _PROBLEMS.reset(token)


def report(key: str, message: str, meant: str | None = None) -> None:
    """A problem with `key`: recorded inside collecting(), else raised as a ConfigError."""
    problems = _PROBLEMS.get()
    problem = Problem(key, message, meant)
    if problems is None:
        raise ConfigError(str(problem))
    if problem not in problems:  # a rule a section checks again after its fields' bounds
        problems.append(problem)


def require(ok: bool, where: str, key: str, value: Any, expected: str) -> bool:
    """Report "<where>.<key>: <value> must be <expected>" unless ok; the result lets dependent checks stop."""
    if not ok:
        report(join(where, key), f"{value!r} must be {expected}")
    return ok


class _Invalid:
    """What build returns for a value it could not read (its problem is already recorded)."""


INVALID: Any = _Invalid()


def build(cls: type, raw: Any, where: str, **given: Any) -> Any:
    """Construct dataclass `cls` from a mapping, checking keys and value types recursively.

    `given` fields come from the caller, not the file (a dataset's name is its key in `datasets:`);
    the file may not set them. Inside collecting(), a value that cannot be read gives INVALID.
    """
    if not isinstance(raw, dict):
        report(where or "top level", f"expected a mapping, got {raw!r}")
        return INVALID
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name not in given}
    hints = typing.get_type_hints(cls)
    for name in raw:
        if name not in fields:
            _unknown_key(where, str(name), sorted(fields))
    missing = [name for name, f in fields.items() if f.default is dataclasses.MISSING and name not in raw]
    for name in missing:
        report(join(where, name), "missing")
    values = {name: _coerce(hints[name], raw[name], join(where, name)) for name in raw if name in fields}
    if missing or any(value is INVALID for value in values.values()):
        return INVALID
    bounded = [_within(fields[name], value, join(where, name)) for name, value in values.items()]
    # recording, the fields the file sets are noted when read: `given` ones (an entry's name) are its key
    obj = cls(**values, **given) if not reads.recording() else reads.noting(cls, values, given, where, set(fields))
    with reads.paused_reads():  # validation is no read of the program's
        if all(bounded) and hasattr(obj, "validate"):
            obj.validate(where)
    return obj


def _unknown_key(where: str, name: str, known: list[str]) -> None:
    """"debate.agnets: unknown key (did you mean agents? known: agents, ...)": the nearest known key, when one is
    close, is named first and recorded, so the stage reading that key owns the typo."""
    nearest = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    if not nearest:
        report(join(where, name), f"unknown key (known: {', '.join(known)})")
        return
    report(join(where, name), f"unknown key (did you mean {nearest[0]}? known: {', '.join(known)})",
           meant=join(where, nearest[0]))


def _within(field: dataclasses.Field, value: Any, where: str) -> bool:
    """The field's bounds (each item's, for a list), its least length and no repeats."""
    spec = field.metadata.get("spec")
    if spec is None or value is None:
        return True
    items = value if isinstance(value, tuple) else None
    if items is None:
        ok = not isinstance(value, int | float) or not spec.bounded() or spec.holds(value)
        return ok or _refuse(where, value, spec.range_text(isinstance(value, int)))
    numbers = [item for item in items if isinstance(item, int | float)]
    if spec.bounded() and not all(spec.holds(item) for item in numbers):
        kind = "integers" if all(isinstance(item, int) for item in numbers) else "numbers"
        return _refuse(where, list(items), f"a list of {kind} {_plain(spec.range_text(False))}")
    if spec.min_items is not None and len(items) < spec.min_items:
        return _refuse(where, list(items), "a non-empty list" if spec.min_items == 1 else
                       f"a list of at least {spec.min_items}")
    if spec.unique and len(set(items)) != len(items):
        return _refuse(where, list(items), "without repeats")
    return True


def _plain(range_text: str) -> str:
    return range_text.removeprefix("an integer ")


def _refuse(where: str, value: Any, expected: str) -> bool:
    report(where, f"{value!r} must be {expected}")
    return False


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
        return value if value in args else _invalid(where, f"{value!r} is not one of {', '.join(map(repr, args))}")
    if origin is tuple:
        if not isinstance(value, list):
            return _invalid(where, f"expected a list, got {value!r}")
        items = tuple(_coerce(args[0], item, f"{where}[{i}]") for i, item in enumerate(value))
        return INVALID if any(item is INVALID for item in items) else items
    if origin is dict or hint is dict:
        return _coerce_mapping(args, value, where)
    return _scalar(hint, value, where)


def _coerce_mapping(args: tuple[Any, ...], value: Any, where: str) -> Any:
    if not isinstance(value, dict):
        return _invalid(where, f"expected a mapping, got {value!r}")
    if not (args and dataclasses.is_dataclass(args[1])):
        return value
    # a named collection: each entry learns its key
    key_field = getattr(args[1], "KEY_FIELD", "name")
    entries = {key: build(args[1], entry, join(where, str(key)), **{key_field: key}) for key, entry in value.items()}
    if any(entry is INVALID for entry in entries.values()):
        return INVALID
    return reads.NotingDict(entries, where) if reads.recording() else entries


def _coerce_union(alternatives: list[Any], value: Any, where: str) -> Any:
    """The alternative of the value's shape (`str | tuple[str, ...]`: a list is read as the tuple)."""
    fitting = [hint for hint in alternatives if _shape(hint) == _shape_of(value)]
    if fitting or len(alternatives) == 1:
        return _coerce((fitting or alternatives)[0], value, where)
    expected = " or ".join(_SHAPE_NAMES[_shape(hint)] for hint in alternatives)
    return _invalid(where, f"expected {expected}, got {value!r}")


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
        return value if isinstance(value, bool) else _invalid(where, f"expected true or false, got {value!r}")
    if hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return value if ok else _invalid(where, f"expected an integer, got {value!r}")
    if hint is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        return float(value) if ok else _invalid(where, f"expected a number, got {value!r}")
    if hint is str:
        return value if isinstance(value, str) else _invalid(where, f"expected a string, got {value!r}")
    raise TypeError(f"unsupported config type {hint!r} at {where}")


def _invalid(where: str, message: str) -> Any:
    report(where, message)
    return INVALID


def join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key
