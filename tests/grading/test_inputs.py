"""Gold files in each grading format (the real ones in ../shared/data), normalized gold, id conventions, and
prediction files: what is read, and the errors that name the file, the line or row, and the value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import FIXTURE_PARAMS
from tests.dvcproject import run_stage
from tracevote.cli.demo import local_dataset, write_params
from tracevote.core.errors import DataError
from tracevote.grading.gold import (
    FORMAT_KEYS,
    answer_text,
    format_keys,
    gold_from_normalized,
    gold_items,
    read_gold_file,
)
from tracevote.grading.predictions import Prediction, of_dataset, read_predictions

# (format, shared file, rows, first id, first gold answer, first has a reference solution)
SHARED_GOLD = [
    ("gsm8k", "gsm8k_test.jsonl", 1319, "gsm8k_test_0", "18", True),
    ("math500", "math500_test.jsonl", 500, "test/precalculus/807.json", "\\left( 3, \\frac{\\pi}{2} \\right)", True),
    ("aime", "aime_2024_with_solutions.jsonl", 30, "60", "204", True),
    ("amc23", "amc23_test.jsonl", 40, "0", "27", False),
]


@pytest.mark.parametrize(("fmt", "file", "rows", "first_id", "first_answer", "has_reference"), SHARED_GOLD,
                         ids=[case[0] for case in SHARED_GOLD])
def test_each_format_reads_its_real_gold_file(shared_data: Path, fmt, file, rows, first_id, first_answer,
                                              has_reference):
    items = read_gold_file(shared_data / file, FORMAT_KEYS[fmt], prefix=fmt)
    assert len(items) == rows and len({item.id for item in items}) == rows
    first = items[0]
    assert (first.id, first.answer, first.reference is not None) == (first_id, first_answer, has_reference)
    assert first.problem.strip()


def test_gsm8k_gold_is_after_the_last_mark_and_the_reference_before_it(shared_data: Path):
    first = read_gold_file(shared_data / "gsm8k_test.jsonl", FORMAT_KEYS["gsm8k"], prefix="gsm8k")[0]
    assert first.reference is not None and first.reference.endswith("<<9*2=18>>18 every day at the farmer’s market.")
    assert "####" not in first.reference


def test_amc23_floats_read_as_integers_and_the_problem_key_falls_back(tmp_path: Path):
    rows = [{"id": 3, "problem": "p", "answer": 27.0}, {"id": 4, "question": "q", "answer": "0.50"},
            {"id": 5, "question": "q", "answer": 2.5}]
    items = gold_items(rows, FORMAT_KEYS["amc23"], prefix="amc23", origin="x")
    assert [(item.id, item.problem, item.answer) for item in items] == [("3", "p", "27"), ("4", "q", "0.50"),
                                                                       ("5", "q", "2.5")]
    assert answer_text("27.000", "answer") == "27"


def test_ids_without_an_id_field_follow_the_prediction_files_convention():
    rows = [{"question": "a", "answer": "x\n#### 1"}, {"question": "b", "answer": "y\n#### 2"}]
    assert [item.id for item in gold_items(rows, FORMAT_KEYS["gsm8k"], prefix="gsm8k", origin="x")] == \
        ["gsm8k_test_0", "gsm8k_test_1"]


def test_an_explicit_id_key_overrides_and_must_be_in_every_row():
    rows = [{"problem": "a", "answer": "1", "uid": "u-1", "id": 9}, {"problem": "b", "answer": "2", "id": 10}]
    keys = format_keys("aime", id_key="uid")
    with pytest.raises(DataError) as caught:
        gold_items(rows, keys, prefix="aime", origin="gold.jsonl")
    assert "gold.jsonl" in str(caught.value) and "row 1: field 'uid' (the id key)" in str(caught.value)
    assert [item.id for item in gold_items(rows[:1], keys, prefix="aime", origin="x")] == ["u-1"]


def test_duplicate_gold_ids_are_an_error_naming_both_rows():
    rows = [{"id": 1, "problem": "a", "answer": "1"}, {"id": 1, "problem": "b", "answer": "2"}]
    with pytest.raises(DataError) as caught:
        gold_items(rows, FORMAT_KEYS["aime"], prefix="aime", origin="gold.jsonl")
    assert str(caught.value).startswith("gold.jsonl: 1 problem(s)")
    assert "row 1: duplicate id '1' (first at row 0)" in str(caught.value)


def test_a_gold_row_without_an_answer_is_an_error_naming_row_field_and_value():
    rows = [{"question": "a", "answer": "x\n####  "}, {"question": "b", "answer": None}]
    with pytest.raises(DataError) as caught:
        gold_items(rows, FORMAT_KEYS["gsm8k"], prefix="gsm8k", origin="gold.jsonl")
    message = str(caught.value)
    assert "row 0: field 'answer': nothing after the last ####" in message
    assert "row 1: field 'answer': expected a gold answer, got None" in message


def test_normalized_gold_keeps_ids_answers_and_the_gsm8k_worked_solution(tmp_path: Path, shared_data: Path):
    """The project's normalize stage, then the gold it gives: the same items as the raw file."""
    params = yaml.safe_load(FIXTURE_PARAMS.read_text())
    for name, key in (("gsm8k", "question"), ("math500", "problem")):
        params["datasets"][name] = {**local_dataset(shared_data / f"{name}_test.jsonl", problem_key=key,
                                                    answer_format="integer" if name == "gsm8k" else "math")}
    write_params(tmp_path / "params.yaml", params)
    for name in ("gsm8k", "math500"):
        run_stage(tmp_path, "normalize.py", "--dataset", name, "--raw", str(shared_data / f"{name}_test.jsonl"),
                  "--out", f"data/{name}.jsonl")
        from_normalized = gold_from_normalized(tmp_path / "data" / f"{name}.jsonl", prefix=name)
        from_raw = read_gold_file(shared_data / f"{name}_test.jsonl", FORMAT_KEYS[name], prefix=name)
        assert [(g.id, g.reference) for g in from_normalized] == [(g.id, g.reference) for g in from_raw]
        # the normalized gold is the integer (GSM8K) or the stripped text (MATH-500)
        expected = [g.answer.replace(",", "") if name == "gsm8k" else g.answer for g in from_raw]
        assert [g.answer for g in from_normalized] == expected
    project_ids = gold_from_normalized(tmp_path / "data" / "gsm8k.jsonl", prefix="gsm8k", project_ids=True)
    assert project_ids[0].id == "gsm8k-01"


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_predictions_are_read_with_missing_text_as_empty(tmp_path: Path):
    path = write_lines(tmp_path / "p.jsonl", [
        json.dumps({"id": "gsm8k_test_0", "dataset": "gsm8k", "thinking": "a b", "content": "#### 1", "extra": 1}),
        "",
        json.dumps({"id": 7, "thinking": None}),
    ])
    assert read_predictions(path) == [Prediction("gsm8k_test_0", "gsm8k", "a b", "#### 1", 1),
                                      Prediction("7", None, "", "", 3)]


def test_bad_prediction_lines_are_errors_naming_file_and_line(tmp_path: Path):
    path = write_lines(tmp_path / "p.jsonl", [
        json.dumps({"id": "a", "content": "#### 1"}),
        "[1, 2]",
        "{not json",
        json.dumps({"thinking": "no id"}),
        json.dumps({"id": "a", "content": "#### 2"}),
        json.dumps({"id": "b", "content": 5}),
    ])
    with pytest.raises(DataError) as caught:
        read_predictions(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: 5 bad line(s), nothing graded")
    for expected in ("line 2: expected an object, got list", "line 3: not valid JSON",
                     "line 4: field 'id': expected a text or integer id, got None",
                     "line 5: duplicate id 'a' (first at line 1)", "line 6: field 'content': expected text, got int"):
        assert expected in message


def test_a_missing_predictions_file_is_named(tmp_path: Path):
    with pytest.raises(DataError, match=r"absent\.jsonl: predictions file not found"):
        read_predictions(tmp_path / "absent.jsonl")


def test_a_file_of_one_dataset_is_graded_whole_and_a_mixed_one_filtered():
    one = [Prediction("1", "aime", "", "", 1), Prediction("2", None, "", "", 2)]
    assert of_dataset(one, ["aime_2024"], "f") == one
    mixed = [Prediction("1", "gsm8k", "", "", 1), Prediction("2", "math500", "", "", 2),
             Prediction("3", None, "", "", 3)]
    assert [p.id for p in of_dataset(mixed, ["math500"], "f")] == ["2", "3"]
    with pytest.raises(DataError, match="f: the file mixes datasets \\('gsm8k', 'math500'\\) and none"):
        of_dataset(mixed[:2], ["amc23"], "f")
