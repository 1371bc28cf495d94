from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tests.rows_server import RowsAPI, serve_rows
from tracevote.core.config_datasets import HUB_WATCH, SourceConfig
from tracevote.core.errors import DataError, FetchError
from tracevote.datasets.fetch import fetch_rows

ROWS = [{"problem_idx": i + 1, "problem": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(250)]


def hub_source(api_url: str) -> SourceConfig:
    return SourceConfig(hf_dataset="MathArena/aime_2025", hf_config="default", hf_split="train",
                        api_url=api_url, path=None, watch=HUB_WATCH)


def test_pages_until_num_rows_total() -> None:
    api = RowsAPI(ROWS)
    with serve_rows(api) as url:
        rows = fetch_rows(hub_source(url))
    assert rows == ROWS
    offsets = [int(query["offset"]) for _, query in api.requests]
    assert offsets == [0, 100, 200]
    assert all(int(query["length"]) <= 100 for _, query in api.requests)
    assert {query["dataset"] for _, query in api.requests} == {"MathArena/aime_2025"}


def test_retries_429_honouring_retry_after_then_503() -> None:
    api = RowsAPI(ROWS[:30], faults=[(429, {"Retry-After": "1"}), (503, {})])
    with serve_rows(api) as url:
        rows = fetch_rows(hub_source(url), attempts=5, max_elapsed_s=30)
    assert rows == ROWS[:30]
    assert len(api.requests) == 3
    waited_after_429 = api.requests[1][0] - api.requests[0][0]
    assert waited_after_429 >= 0.95  # the server asked for one second


def test_gives_up_with_a_clear_message() -> None:
    api = RowsAPI(ROWS[:5], faults=[(503, {})] * 10)
    with serve_rows(api) as url, pytest.raises(FetchError) as error:
        fetch_rows(hub_source(url), attempts=3, max_elapsed_s=30)
    message = str(error.value)
    assert "MathArena/aime_2025" in message
    assert "gave up after 3 attempts" in message
    assert "HTTP 503" in message
    assert len(api.requests) == 3


def test_client_error_is_not_retried() -> None:
    api = RowsAPI(ROWS[:5], faults=[(404, {})])
    with serve_rows(api) as url, pytest.raises(FetchError, match="HTTP 404"):
        fetch_rows(hub_source(url), attempts=5, max_elapsed_s=30)
    assert len(api.requests) == 1


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".parquet"])
def test_local_sources_round_trip(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"problems{suffix}"
    rows = ROWS[:7]
    if suffix == ".jsonl":
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    elif suffix == ".json":
        path.write_text(json.dumps(rows))
    else:
        pd.DataFrame(rows).to_parquet(path)
    source = SourceConfig(hf_dataset=None, hf_config="default", hf_split="train", api_url="", path=str(path),
                          watch=str(path))
    assert fetch_rows(source) == rows


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("bad.jsonl", '{"problem": "x"}\n{oops\n', "line 2: not valid JSON"),
        ("list.jsonl", '["not", "an", "object"]\n', "line 1: expected an object, got list"),
        ("bad.json", '{"problem": "x"}', "expected a JSON list of objects"),
        ("rows.tsv", "problem\tanswer\n", "unsupported dataset file type '.tsv' (use .jsonl, .json, .parquet or .csv)"),
        ("rows.parquet", '{"problem": "x", "answer": 1}\n', "not a readable Parquet file (Could not open"),
        ("empty.parquet", "", "not a readable Parquet file"),
        ("rows.json", '{"problem": "x"}\n{"problem": "y"}\n', "not valid JSON"),
        ("empty.jsonl", "\n\n", "the dataset file holds no rows"),
        ("empty.json", "[]", "the dataset file holds no rows"),
    ],
)
def test_local_source_errors_name_the_file(tmp_path: Path, name: str, content: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    source = SourceConfig(hf_dataset=None, hf_config="default", hf_split="train", api_url="", path=str(path),
                          watch=str(path))
    with pytest.raises(DataError) as error:
        fetch_rows(source)
    assert str(path) in str(error.value)
    assert message in str(error.value)


def test_a_hub_dataset_with_no_rows_is_refused() -> None:
    with serve_rows(RowsAPI([])) as url, pytest.raises(FetchError, match="the rows API reports 0 rows"):
        fetch_rows(hub_source(url))
