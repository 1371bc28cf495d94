"""Writes that never leave a partial file behind: write beside the target, then rename over it."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import orjson

from tracevote.core.errors import DataError, StorageError


@contextlib.contextmanager
def atomic_path(target: str | Path) -> Iterator[Path]:
    """Yield a temporary path in the target's folder; rename it over the target only on success.

    >>> with tempfile.TemporaryDirectory() as folder:
    ...     with atomic_path(Path(folder) / "out.jsonl") as tmp:
    ...         _ = tmp.write_text("{}")  # out.jsonl appears whole, or not at all
    ...     sorted(path.name for path in Path(folder).iterdir())  # and no temporary file is left beside it
    ['out.jsonl']
    """
    target = Path(target)
    make_folder(target.parent)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.chmod(tmp, _CREATED_MODE)  # mkstemp makes 0600; outputs get the mode any new file would
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def make_folder(folder: Path) -> None:
    """mkdir -p, with StorageError naming the file that sits where the folder (or one of its parents) goes,
    instead of FileExistsError or NotADirectoryError."""
    check_output_folders(folder)
    folder.mkdir(parents=True, exist_ok=True)


def check_output_folders(*folders: Path) -> None:
    """StorageError when a file (not a folder) sits at any of `folders` or their parents: a stage calls it before
    any work, so it writes nothing rather than some outputs and then a traceback."""
    for folder in folders:
        blocker = next((path for path in (folder, *folder.parents) if path.exists() and not path.is_dir()), None)
        if blocker is not None:
            where = "" if blocker == folder else f" (inside it goes {folder})"
            raise StorageError(f"{blocker}: a file sits where an output folder goes{where}; move or delete it "
                               f"and run the stage again (nothing was written)")


def _created_mode() -> int:
    umask = os.umask(0)  # reading the umask means setting it: done once, at import, before any thread
    os.umask(umask)
    return 0o666 & ~umask


_CREATED_MODE = _created_mode()


def parse_json_object(line: bytes, where: str) -> dict:
    """One JSON object, or a DataError naming `where` (e.g. "data/x.jsonl: line 3")."""
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise DataError(f"{where}: not valid JSON ({exc})") from exc
    if not isinstance(record, dict):
        raise DataError(f"{where}: expected an object, got {type(record).__name__}")
    return record


def missing_folders(path: Path) -> list[Path]:
    """`path` and those of its parents that do not exist yet, innermost first: what creating it would make
    (missing_folders(Path("pools/toy/x")) with only pools/ there -> [pools/toy/x, pools/toy])."""
    missing = []
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    return missing


def read_json_file(path: Path, expected: type, what: str) -> Any:
    """A whole JSON file's value, which must be an `expected` (dict, list); DataError naming the file otherwise:
    "AIME/2024/3.json: expected one JSON object (a problem), got list"."""
    try:
        data = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON: {exc}") from exc
    if not isinstance(data, expected):
        raise DataError(f"{path}: expected {what}, got {type(data).__name__}")
    return data


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


RecordT = TypeVar("RecordT")


def read_json_record(path: Path, cls: type[RecordT], *, what: str, missing: str) -> RecordT:
    """A dataclass from a JSON file, or DataError naming the file: `missing` says how to get one,
    `what` names it ("pool manifest")."""
    if not path.is_file():
        raise DataError(f"{path}: {what} not found ({missing})")
    try:
        fields: Any = orjson.loads(path.read_bytes())
        return cls(**fields)
    except (orjson.JSONDecodeError, TypeError) as exc:
        raise DataError(f"{path}: not a {what} ({exc})") from exc
