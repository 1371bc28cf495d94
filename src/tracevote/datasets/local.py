"""Rows of a local dataset file (.jsonl, .json, .parquet, .csv) or problem folder; nothing here loads pyarrow
or requests unless a Parquet file is read, so grading a JSON-lines gold file starts fast."""

from __future__ import annotations

import csv
import sys
from pathlib import Path
from typing import Any

from tracevote.core.errors import DataError
from tracevote.core.fileio import parse_json_object, read_json_file
from tracevote.datasets.folder import read_problem_folder

Row = dict[str, Any]


def read_local_rows(path: str | Path) -> list[Row]:
    """Rows of a local .jsonl, .json (a list of objects), .parquet or .csv file (a header row; every value
    is text), or of a folder in the write-up's layout (tracevote.datasets.folder: one problem per file)."""
    path = Path(path)
    if path.is_dir():
        return read_problem_folder(path)
    if not path.is_file():
        raise DataError(f"{path}: dataset file not found")
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _read_jsonl(path)
    if suffix == ".json":
        return _read_json_list(path)
    if suffix == ".parquet":
        return _read_parquet(path)
    if suffix == ".csv":
        return _read_csv(path)
    raise DataError(f"{path}: unsupported dataset file type {suffix!r} (use .jsonl, .json, .parquet or .csv)")


def _read_csv(path: Path) -> list[Row]:
    csv.field_size_limit(sys.maxsize)  # a long chain of thought is one field, far over csv's 128 KiB default
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            return [dict(row) for row in csv.DictReader(handle)]
    except (csv.Error, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: not a readable CSV file ({exc})") from exc


def _read_parquet(path: Path) -> list[Row]:
    import pyarrow as pa  # here, not above: it takes ~0.3 s to load, and the other formats never need it
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        raise DataError(f"{path}: not a readable Parquet file ({_first_line(exc)})") from exc
    return table.to_pandas().to_dict(orient="records")


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _read_jsonl(path: Path) -> list[Row]:
    rows: list[Row] = []
    for number, line in enumerate(path.read_bytes().splitlines(), start=1):
        if line.strip():
            rows.append(parse_json_object(line, f"{path}: line {number}"))
    return rows


def _read_json_list(path: Path) -> list[Row]:
    data = read_json_file(path, list, "a JSON list of objects")
    for number, row in enumerate(data, start=1):
        if not isinstance(row, dict):
            raise DataError(f"{path}: item {number} is {type(row).__name__}, expected an object")
    return data
