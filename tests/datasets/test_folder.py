"""A folder in the DyLAN AIME write-up's layout (one problem per file, 0.json is problem 1) as a dataset
source: read through fetch and normalize, ids from the year folder and the file number, and bad files
refused naming the file and the field."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tracevote.core.config_datasets import DatasetConfig, SourceConfig
from tracevote.core.errors import DataError
from tracevote.datasets.fetch import fetch_rows
from tracevote.datasets.folder import folder_summary
from tracevote.datasets.normalize import normalize_dataset

SOURCE = {"hf_dataset": None, "hf_config": "default", "hf_split": "train",
          "api_url": "https://datasets-server.huggingface.co"}


def problem(year: str, number: int, **change: Any) -> dict[str, Any]:
    """The write-up's file for problem `number` + 1 of `year`."""
    return {"problem": f"Problem {number + 1} of {year}: find $x$.", "solution": f"So $\\boxed{{{number}}}$.",
            "answer": str(number), "year": year, "problem_number": number + 1, **change}


def write(folder: Path, name: str, content: Any) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def aime_folder(root: Path, years: dict[str, int]) -> Path:
    for year, count in years.items():
        for number in range(count):
            write(root, f"{year}/{number}.json", problem(year, number))
    return root


def source(path: Path) -> SourceConfig:
    return SourceConfig(**SOURCE, path=str(path), watch=str(path))


def dataset(path: Path) -> DatasetConfig:
    return DatasetConfig(name="aime_folder", source=source(path), kind="problems", problem_key="problem",
                         answer_key="answer", id_key="id", answer_format="aime")


def test_a_folder_of_year_folders_reads_years_by_name_and_files_by_number(tmp_path: Path) -> None:
    root = aime_folder(tmp_path / "AIME", {"2025": 2, "2024": 12})
    write(root, ".DS_Store", "junk")  # skipped, as every name starting with "."
    rows = fetch_rows(source(root))
    assert [row["id"] for row in rows] == [f"2024-{n}" for n in range(12)] + ["2025-0", "2025-1"]
    assert rows[10]["file"] == "2024/10.json" and rows[10]["problem_number"] == 11


def test_normalize_keeps_the_ids_and_the_other_fields_as_meta(tmp_path: Path) -> None:
    root = aime_folder(tmp_path / "AIME", {"2024": 3})
    problems = normalize_dataset(fetch_rows(source(root)), dataset(root), origin=str(root))
    assert [(p.id, p.answer) for p in problems] == [("2024-0", 0), ("2024-1", 1), ("2024-2", 2)]
    assert problems[2].meta == {"solution": "So $\\boxed{2}$.", "year": "2024", "problem_number": 3,
                                "file": "2024/2.json"}


def test_one_year_folder_is_read_as_that_year(tmp_path: Path) -> None:
    root = aime_folder(tmp_path / "AIME", {"sample": 1})  # the write-up's `sample/0.json`
    assert [row["id"] for row in fetch_rows(source(root / "sample"))] == ["sample-0"]


@pytest.mark.parametrize(("name", "content", "says"), [
    ("2024/1.json", "{not json", "2024/1.json: not valid JSON"),
    ("2024/1.json", [problem("2024", 1)], "2024/1.json: expected one JSON object (a problem), got list"),
    ("2024/1.json", problem("2024", 1, problem_number=1), "2024/1.json: field 'problem_number': 1 must be 2"),
    ("2024/1.json", problem("2024", 1, problem_number="2"),
     "2024/1.json: field 'problem_number': expected an integer, got '2'"),
    ("2024/1.json", problem("2024", 1, problem=""), "2024/1.json: field 'problem': expected text, got ''"),
    ("2024/1.json", problem("2024", 1, answer=None), "2024/1.json: field 'answer': expected text or an integer"),
    ("2024/1.json", {k: v for k, v in problem("2024", 1).items() if k != "solution"},
     "2024/1.json: field 'solution': expected text, got None"),
    ("2024/1.json", problem("2024", 1, id="x"), "2024/1.json: field 'id': not allowed"),
    ("2024/01.json", problem("2024", 1), "2024/01.json: not a problem file"),
    ("2024/notes.txt", "hello", "2024/notes.txt: not a problem file"),
    ("2024/1.json/x", "nested", "2024/1.json: not a problem file"),
    ("stray.json", problem("2024", 0), "stray.json: not a year folder"),
    ("2023 bad/0.json", problem("2023 bad", 0), "2023 bad: the year folder's name becomes part of each id, but"),
    ("2023/README", "x", "2023/README: not a problem file"),
])
def test_a_bad_file_is_refused_naming_it_and_the_field(tmp_path: Path, name: str, content: Any, says: str) -> None:
    root = aime_folder(tmp_path / "AIME", {"2024": 1})
    write(root, name, content)
    with pytest.raises(DataError, match=re.escape(f"{root}/{says}")):
        fetch_rows(source(root))


def test_an_empty_year_folder_is_refused(tmp_path: Path) -> None:
    root = aime_folder(tmp_path / "AIME", {"2024": 1})
    (root / "2025").mkdir()
    with pytest.raises(DataError, match=re.escape(f"{root / '2025'}: no problem files")):
        fetch_rows(source(root))


def test_the_write_ups_sample_folder_is_skipped_and_named(tmp_path: Path) -> None:
    """Issue 29: the write-up's layout holds sample/0.json (a test problem) beside the years; it became a 31st
    problem. A folder whose name does not start with a digit is not a year: skipped, and the summary says so."""
    root = aime_folder(tmp_path / "AIME", {"2024": 15, "2025": 15, "sample": 1})
    rows = fetch_rows(source(root))
    assert len(rows) == 30 and not [row for row in rows if row["id"].startswith("sample")]
    assert folder_summary(root) == ("2024/ (15 files), 2025/ (15 files); skipped sample/ (not a year folder: its "
                                    "name does not start with a digit)")


def test_a_folder_with_no_year_folder_is_refused_naming_what_it_holds(tmp_path: Path) -> None:
    root = aime_folder(tmp_path / "AIME", {"sample": 1, "drafts": 1})
    with pytest.raises(DataError, match=re.escape(f"{root}: no year folder (a name starting with a digit, such as "
                                                  f"2024); it holds only drafts/, sample/")):
        fetch_rows(source(root))
