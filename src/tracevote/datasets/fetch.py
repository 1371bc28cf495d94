"""The fetch stage's core: rows of a dataset from the Hugging Face datasets-server, or a local file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from tracevote.core.config_datasets import SourceConfig
from tracevote.core.errors import DataError, FetchError
from tracevote.core.retry import TransientError, call_with_retries, parse_retry_after
from tracevote.datasets.local import Row, read_local_rows

if TYPE_CHECKING:
    import requests

PAGE_LENGTH = 100  # the rows API serves at most 100 rows a request


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
    import requests  # here, not at the top: a local source, fetched on every project's first run, never needs it

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

    import requests

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
