"""The fetch stage's core: rows of a dataset from the Hugging Face datasets-server, or a local file."""

from __future__ import annotations

import csv
import sys
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import requests

from tracevote.core.config import SourceConfig
from tracevote.core.errors import DataError, FetchError
from tracevote.core.fileio import parse_json_object, read_json_file
from tracevote.core.retry import TransientError, call_with_retries, parse_retry_after
from tracevote.datasets.folder import read_problem_folder

PAGE_LENGTH = 100  # the rows API serves at most 100 rows a request
Row = dict[str, Any]


def fetch_rows(source: SourceConfig, *, attempts: int = 6, max_elapsed_s: float = 120.0) -> list[Row]:
    """Every row of the configured source: a local file when `path` is set, else the hub."""
    if source.path:
        rows = read_local_rows(Path(source.path))
        if not rows:
            raise DataError(f"{source.path}: the dataset file holds no rows")
        return rows
    assert source.hf_dataset is not None  # SourceConfig.validate guarantees one of the two
    rows = fetch_hub_rows(source, attempts=attempts, max_elapsed_s=max_elapsed_s)
    if not rows:
        raise FetchError(f"{source.hf_dataset} (config {source.hf_config!r}, split {source.hf_split!r}): "
                         "the rows API reports 0 rows")
    return rows


def fetch_hub_rows(source: SourceConfig, *, attempts: int, max_elapsed_s: float) -> list[Row]:
    """Page through `GET {api_url}/rows` until `num_rows_total` rows are in."""
    rows: list[Row] = []
    total: int | None = None
    with requests.Session() as session:
        while total is None or len(rows) < total:
            page = _get_page(session, source, len(rows), attempts, max_elapsed_s)
            total = _total_rows(page, source)
            new_rows = [item["row"] for item in page.get("rows", [])]
            if not new_rows and len(rows) < total:
                raise FetchError(f"{source.hf_dataset}: page at offset {len(rows)} is empty, "
                                 f"but num_rows_total is {total}")
            rows.extend(new_rows)
    return rows[:total]


def _get_page(session: requests.Session, source: SourceConfig, offset: int, attempts: int,
              max_elapsed_s: float) -> dict[str, Any]:
    url = source.api_url.rstrip("/") + "/rows"
    query = {"dataset": source.hf_dataset, "config": source.hf_config, "split": source.hf_split,
             "offset": offset, "length": PAGE_LENGTH}

    def attempt() -> dict[str, Any]:
        try:
            response = session.get(url, params=query, timeout=(10, 60))
        except (requests.ConnectionError, requests.Timeout) as exc:
            raise TransientError("connection", str(exc)) from exc
        if response.status_code == 429 or response.status_code >= 500:
            raise TransientError(f"HTTP {response.status_code}", response.text[:200],
                                 parse_retry_after(response.headers.get("Retry-After")))
        if response.status_code != 200:
            raise FetchError(f"{url} ({source.hf_dataset}, offset {offset}): HTTP {response.status_code}: "
                             f"{response.text[:300]}")
        try:
            return orjson.loads(response.content)
        except orjson.JSONDecodeError as exc:
            raise TransientError("malformed JSON", str(exc)) from exc

    try:
        return call_with_retries(attempt, attempts=attempts, max_elapsed_s=max_elapsed_s)
    except TransientError as exc:
        raise FetchError(f"{url} ({source.hf_dataset}, offset {offset}): gave up after {attempts} attempts "
                         f"or {max_elapsed_s:.0f}s; last error: {exc}") from exc


def _total_rows(page: dict[str, Any], source: SourceConfig) -> int:
    total = page.get("num_rows_total")
    if not isinstance(total, int) or not isinstance(page.get("rows"), list):
        raise FetchError(f"{source.hf_dataset}: the rows API answered without num_rows_total or rows: "
                         f"keys {sorted(page)}")
    return total


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
