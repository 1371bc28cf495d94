"""Writes that never leave a partial file behind: write beside the target, then rename over it."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import orjson


@contextlib.contextmanager
def atomic_path(target: str | Path) -> Iterator[Path]:
    """Yield a temporary path in the target's folder; rename it over the target only on success.

    >>> with atomic_path("out.jsonl") as tmp:
    ...     tmp.write_text("...")   # out.jsonl appears whole, or not at all
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def write_text(target: str | Path, text: str) -> None:
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(target: str | Path, obj: object) -> None:
    with atomic_path(target) as tmp:
        tmp.write_bytes(orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")


def write_jsonl(target: str | Path, records: Iterable[object]) -> None:
    with atomic_path(target) as tmp, open(tmp, "wb") as out:
        for record in records:
            out.write(orjson.dumps(record) + b"\n")
