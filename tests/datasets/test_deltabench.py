"""DeltaBench -> ProcessBench-style items: every conversion rule on hand-written records, and the CLI."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import hang_guard_s
from tests.dvcproject import project_env
from tracevote.core.errors import DataError
from tracevote.datasets.deltabench import convert_row, convert_rows, first_error_label, split_sections

SECTIONS = "section1: Let x be the count.\n\n\nsection2: Then x = 3 + 4 = 8.\n\n\nsection3: So the answer is 8."


def record(**fields: object) -> dict[str, object]:
    base = {"id": "db-1", "question": "How many?", "sections_content": SECTIONS,
            "reason_error_section_numbers": [2, 3], "task_l1": "math", "task_l2": "arithmetic",
            "final_correct": False, "long_cot": "the whole chain", "sections": ["unused"]}
    return {**base, **fields}


def test_sections_lose_their_prefixes_and_the_earliest_error_is_the_label() -> None:
    converted = convert_row(record(), 1)
    assert converted["steps"] == ["Let x be the count.", "Then x = 3 + 4 = 8.", "So the answer is 8."]
    assert (converted["label"], converted["task"], converted["problem"]) == (1, "math", "How many?")
    assert converted["meta"] == {"task_l2": "arithmetic", "final_correct": False}


def test_the_other_field_name_is_accepted() -> None:
    row = record()
    row["section_content"] = row.pop("sections_content")
    assert convert_row(row, 1)["steps"][0] == "Let x be the count."


def test_csv_string_lists_are_read_as_python_literals_never_evaluated() -> None:
    assert convert_row(record(reason_error_section_numbers="[3, 2]"), 1)["label"] == 1  # unsorted: the smallest
    assert convert_row(record(reason_error_section_numbers="[]"), 1)["label"] == -1
    with pytest.raises(ValueError, match="not a Python list literal: \"__import__\\('os'\\)"):
        convert_row(record(reason_error_section_numbers="__import__('os')"), 1)


def test_an_empty_error_list_means_no_error() -> None:
    assert first_error_label([], 3) == -1


def test_a_label_outside_the_sections_is_an_error() -> None:
    with pytest.raises(ValueError, match="section 4 does not exist \\(3 sections\\)"):
        convert_row(record(reason_error_section_numbers=[4]), 1)
    with pytest.raises(ValueError, match="section 0 does not exist"):
        first_error_label([0], 3)


def test_sections_must_be_numbered_from_1_without_gaps() -> None:
    with pytest.raises(ValueError, match=r"numbered \[1, 3\]"):
        split_sections("section1: a\n\n\nsection3: b")
    with pytest.raises(ValueError, match="does not start with 'section1:'"):
        split_sections("preamble\nsection1: a")


def test_every_bad_row_is_named_with_its_field_and_value() -> None:
    rows = [record(), record(question=""), record(reason_error_section_numbers="[1,"), record(task_l1=None)]
    with pytest.raises(DataError) as caught:
        convert_rows(rows, "deltabench.csv")
    message = str(caught.value)
    assert message.startswith("deltabench.csv: 3 DeltaBench rows cannot be converted")
    assert "row 2: field 'question'" in message and "row 3: field 'reason_error_section_numbers'" in message
    assert "'[1,'" in message and "row 4: field 'task_l1'" in message


def test_the_cli_converts_a_hub_style_csv_to_json_lines(tmp_path: Path) -> None:
    path = tmp_path / "deltabench.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["id", "question", "sections_content",
                                                    "reason_error_section_numbers", "task_l1"])
        writer.writeheader()
        writer.writerow({"id": "q1", "question": "How many?", "sections_content": SECTIONS,
                         "reason_error_section_numbers": "[2]", "task_l1": "math"})
        writer.writerow({"id": "q2", "question": "Again?", "sections_content": "section1: Yes.",
                         "reason_error_section_numbers": "[]", "task_l1": "code"})
    result = subprocess.run([sys.executable, "-m", "tracevote", "critique", "convert", "--from", "deltabench",
                             str(path)], capture_output=True, text=True, env=project_env(), timeout=hang_guard_s())
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["id"], r["label"], r["task"], len(r["steps"])) for r in lines] == [("q1", 1, "math", 3),
                                                                                ("q2", -1, "code", 1)]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([record(reason_error_section_numbers=[9])]))
    failed = subprocess.run([sys.executable, "-m", "tracevote", "critique", "convert", "--from", "deltabench",
                             str(bad)], capture_output=True, text=True, env=project_env(), timeout=hang_guard_s())
    assert failed.returncode != 0 and failed.stdout == ""
    assert "row 1: field 'reason_error_section_numbers': section 9 does not exist" in failed.stderr


# issue 22 item 4: a malformed error list is a DataError naming the row and field, never a traceback
MALFORMED_ERROR_LISTS = [
    ("{[1]}", "not a Python list literal: '{[1]}'"),  # a set of a list: TypeError inside literal_eval
    ("{[1]: 2}", "not a Python list literal: '{[1]: 2}'"),  # a dict keyed by a list: TypeError too
    ("[1, [2]]", "expected section numbers, got [1, [2]]"),
    ("[[1]]", "expected section numbers, got [[1]]"),
    ("{1: 2}", "expected a list, got {1: 2}"),
    ("{1, 2}", "expected a list, got {1, 2}"),
    ("'1'", "expected a list, got '1'"),
    ("[1.5]", "expected section numbers, got [1.5]"),
    ("[True]", "expected section numbers, got [True]"),
    ("[" * 200_000, "not a Python list literal"),  # nesting beyond the parser's limit
    ("f(1)", "not a Python list literal: 'f(1)'"),
    ({"a": 1}, "expected a list, got {'a': 1}"),  # a JSON object, not text
    (7, "expected a list, got 7"),
]


@pytest.mark.parametrize(("errors", "says"), MALFORMED_ERROR_LISTS)
def test_a_malformed_error_list_is_a_data_error_naming_row_and_field(errors: object, says: str) -> None:
    with pytest.raises(DataError) as caught:
        convert_rows([record(), record(reason_error_section_numbers=errors)], "deltabench.csv")
    lines = str(caught.value).splitlines()
    assert lines[0] == "deltabench.csv: 1 DeltaBench rows cannot be converted:"
    assert lines[1].startswith(f"  row 2: field 'reason_error_section_numbers': {says}")


def test_a_parquet_list_column_reads_as_a_list() -> None:
    import numpy as np

    assert convert_row(record(reason_error_section_numbers=np.array([3, 2])), 1)["label"] == 1


def convert_cli(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tracevote", "critique", "convert", "--from", "deltabench",
                           str(path)], capture_output=True, text=True, env=project_env(), timeout=hang_guard_s())


HEADER = "id,question,sections_content,reason_error_section_numbers,task_l1\n"


@pytest.mark.parametrize(("name", "content", "says"), [
    ("empty.csv", "", "no DeltaBench rows"),
    ("blank.csv", "\n\n", "no DeltaBench rows"),
    ("header_only.csv", HEADER, "no DeltaBench rows (expected records with question, sections_content"),
    ("empty.jsonl", "", "no DeltaBench rows"),
    ("empty_list.json", "[]", "no DeltaBench rows"),
    ("set_of_list.csv", HEADER + 'q1,How many?,section1: a,"{[1]}",math\n',
     "row 1: field 'reason_error_section_numbers': not a Python list literal: '{[1]}'"),
    ("dict_of_list.csv", HEADER + 'q1,How many?,section1: a,"{[1]: 2}",math\n',
     "row 1: field 'reason_error_section_numbers': not a Python list literal: '{[1]: 2}'"),
])
def test_the_cli_refuses_empty_and_malformed_files_in_one_line(tmp_path: Path, name: str, content: str,
                                                               says: str) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    failed = convert_cli(path)
    assert failed.returncode != 0 and failed.stdout == ""
    assert says in failed.stderr and "Traceback" not in failed.stderr


def test_the_normalize_stage_refuses_a_malformed_error_list(tmp_path: Path) -> None:
    from tracevote.cli.demo import local_steps_dataset
    from tracevote.core.config_datasets import DatasetConfig
    from tracevote.core.typedconfig import build
    from tracevote.datasets.normalize import normalize_dataset

    cfg = build(DatasetConfig, local_steps_dataset(tmp_path / "d.csv", steps_format="deltabench"), "datasets.d",
                name="d")
    with pytest.raises(DataError, match=r"row 1: field 'reason_error_section_numbers': not a Python list literal"):
        normalize_dataset([record(reason_error_section_numbers="{[1]: 2}")], cfg, "d.csv")
