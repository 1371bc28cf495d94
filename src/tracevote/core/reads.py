"""Which keys of params.yaml a program reads, noted while `recording_reads()` is open (only the entry point of a
stage run opens it, for the test that compares each stage's reads with what it declares in dvc.yaml):

    with recording_reads() as keys:
        params = load_params("params.yaml")   # validation reads every key: none noted
        params.decoding.temperature            # -> "decoding.temperature"
        list(params.grading.runs)              # listing a named collection -> "grading.runs"

typedconfig.build makes the noting objects (`noting`, `NotingDict`) only while recording, so a program that
does not record reads plain config objects.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class _Recorder:
    def __init__(self) -> None:
        self.reads: set[str] = set()
        self.paused = 0


# Process-wide, not a ContextVar: a stage's worker threads read params too. None builds plain objects.
_RECORDER: _Recorder | None = None


@contextmanager
def recording_reads() -> Iterator[set[str]]:
    """Within the block, configs built by build() note every key read after building; the yielded set
    holds them (dotted keys, as dvc.yaml's params: name them)."""
    global _RECORDER
    previous, _RECORDER = _RECORDER, _Recorder()
    try:
        yield _RECORDER.reads
    finally:
        _RECORDER = previous


@contextmanager
def paused_reads() -> Iterator[None]:
    """Reads inside the block are not noted (validating, hashing, printing a config reads every field)."""
    recorder = _RECORDER
    if recorder is not None:
        recorder.paused += 1
    try:
        yield
    finally:
        if recorder is not None:
            recorder.paused -= 1


def _note(key: str) -> None:
    recorder = _RECORDER
    if recorder is not None and not recorder.paused:
        recorder.reads.add(key)


_RECORDING_CLASSES: dict[type, type] = {}


def _noting_class(cls: type) -> type:
    """`cls` whose field reads are noted; hashing, comparing and printing read nothing, and a copy sent to
    another process is a plain `cls` (its reads there are not noted: run workers in-process to see them)."""
    if cls not in _RECORDING_CLASSES:
        def __reduce__(self: Any) -> Any:
            with paused_reads():
                return cls, tuple(getattr(self, f.name) for f in dataclasses.fields(cls))

        _RECORDING_CLASSES[cls] = type(cls.__name__, (cls,), {
            "__getattribute__": _noting_getattribute, "__hash__": _paused(cls.__hash__), "__eq__": _paused(cls.__eq__),
            "__repr__": _paused(cls.__repr__), "__reduce__": __reduce__, "__qualname__": cls.__qualname__})
    return _RECORDING_CLASSES[cls]


def _noting_getattribute(self: Any, name: str) -> Any:
    value = object.__getattribute__(self, name)
    noted = object.__getattribute__(self, "__dict__")  # a copy made by dataclasses.replace has no _tv_keys
    if name in noted.get("_tv_keys", ()) and not (dataclasses.is_dataclass(value) or isinstance(value, NotingDict)):
        _note(f"{noted['_tv_where']}.{name}" if noted["_tv_where"] else name)
    return value


def _paused(method: Any) -> Any:
    def call(self: Any, *args: Any) -> Any:
        with paused_reads():
            return method(self, *args)
    return call


class NotingDict(dict):
    """A named collection whose names, when listed, count as a read of the collection."""

    def __init__(self, entries: dict[str, Any], where: str) -> None:
        super().__init__(entries)
        self.where = where

    def _listed(self) -> None:
        _note(self.where)

    def __iter__(self) -> Iterator[Any]:
        self._listed()
        return super().__iter__()

    def __len__(self) -> int:
        self._listed()
        return super().__len__()

    def keys(self) -> Any:
        self._listed()
        return super().keys()

    def items(self) -> Any:
        self._listed()
        return super().items()

    def values(self) -> Any:
        self._listed()
        return super().values()

    def __reduce__(self) -> Any:
        return dict, (dict(super().items()),)




def recording() -> bool:
    return _RECORDER is not None


def noting(cls: type, values: dict[str, Any], given: dict[str, Any], where: str, keys: set[str]) -> Any:
    """`cls(**values, **given)` whose reads of `keys` are noted as `<where>.<key>`."""
    obj = _noting_class(cls)(**values, **given)
    object.__setattr__(obj, "_tv_where", where)
    object.__setattr__(obj, "_tv_keys", frozenset(keys))
    return obj
