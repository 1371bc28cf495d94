from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracevote.answers.formats import parse_integer
from tracevote.core.config_datasets import DatasetConfig, SourceConfig
from tracevote.core.errors import DataError
from tracevote.datasets.problems import load_problems, normalize_rows

SOURCE = SourceConfig(hf_dataset=None, hf_config="default", hf_split="train", api_url="", path="x.jsonl",
                      watch="x.jsonl")


def dataset(**overrides: object) -> DatasetConfig:
    fields = {"name": "aime_2025", "source": SOURCE, "kind": "problems", "problem_key": "problem",
              "answer_key": "answer", "id_key": None, "answer_format": "aime"}
    return DatasetConfig(**{**fields, **overrides})


GOOD = {"problem": "Find $x$.\nGiven $x+1=2$.", "answer": "1"}


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ([GOOD, {"answer": "5"}], ["row 2: field 'problem': missing"]),
        ([GOOD, {"problem": "  ", "answer": "5"}], ["row 2: field 'problem': expected non-empty text"]),
        ([GOOD, {"problem": "Find x."}], ["row 2: field 'answer': missing or empty"]),
        ([GOOD, {"problem": "Find x.", "answer": ""}], ["row 2: field 'answer': missing or empty"]),
        ([GOOD, {"problem": "Find x.", "answer": "1000"}], ["row 2: field 'answer': '1000' is outside the AIME range"]),
        ([GOOD, {"problem": "Find x.", "answer": -3}], ["row 2: field 'answer': -3 is outside the AIME range"]),
        ([GOOD, {"problem": "Find x.", "answer": "12.5"}], ["row 2: field 'answer': '12.5' is not an integer"]),
        ([GOOD, {"problem": "Find x.", "answer": "seven"}], ["row 2: field 'answer': 'seven' is not an integer"]),
        ([GOOD, {"problem": "Find x.", "answer": True}], ["row 2: field 'answer': True is not an integer"]),
        ([GOOD, {"problem": "Let \x0crac{1}{2} be y.", "answer": "1"}],
         ["row 2: field 'problem': contains control character U+000C at offset 4 (a mis-escaped \\frac?)"]),
        ([{"problem": "On \triangle ABC", "answer": "1"}],
         ["row 1: field 'problem': contains control character U+0009 at offset 3 (a mis-escaped \\triangle"]),
        ([], ["no rows"]),
    ],
)
def test_each_bad_input_gets_its_own_message(rows: list[dict], expected: list[str]) -> None:
    with pytest.raises(DataError) as error:
        normalize_rows(rows, dataset(), origin="data/raw/aime_2025.jsonl")
    message = str(error.value)
    assert message.startswith("data/raw/aime_2025.jsonl: ")
    for fragment in expected:
        assert fragment in message


def test_every_offending_row_is_listed() -> None:
    rows = [GOOD, {"problem": "a\x0cb", "answer": "x"}, GOOD, {"answer": "2000"}]
    with pytest.raises(DataError) as error:
        normalize_rows(rows, dataset(), origin="raw.jsonl")
    lines = str(error.value).splitlines()
    assert lines[0] == "raw.jsonl: 4 problem(s), nothing written:"
    assert [line.split(":")[0].strip() for line in lines[1:]] == ["row 2", "row 2", "row 4", "row 4"]


def test_duplicate_ids_name_both_rows() -> None:
    rows = [{"n": "A-1", **GOOD}, {"n": "A-2", **GOOD}, {"n": "A-1", **GOOD}]
    with pytest.raises(DataError, match=r"row 3: field 'n': duplicate id 'A-1' \(first at row 1\)"):
        normalize_rows(rows, dataset(id_key="n"), origin="raw.jsonl")


def test_id_key_must_hold_a_plain_name() -> None:
    with pytest.raises(DataError, match="row 1: field 'n': id 'a b'"):
        normalize_rows([{"n": "a b", **GOOD}], dataset(id_key="n"), origin="raw.jsonl")


def test_keeps_newlines_metadata_and_leading_zero_answers() -> None:
    rows = [{"problem": "Line one.\nLine two.", "answer": "025", "year": 2025, "problem_idx": 1,
             "tags": ["not", "scalar"]}]
    [problem] = normalize_rows(rows, dataset(), origin="raw.jsonl")
    assert problem.id == "aime_2025-01"
    assert problem.problem == "Line one.\nLine two."
    assert problem.answer == 25
    assert problem.meta == {"year": 2025, "problem_idx": 1}


@pytest.mark.parametrize(
    ("value", "expected"),
    [(25, 25), ("25", 25), (" 025 ", 25), (25.0, 25), ("+7", 7), ("-3", -3), ("25.5", None), (25.5, None),
     ("", None), ("1e3", None), (None, None), (False, None)],
)
def test_parse_integer(value: object, expected: int | None) -> None:
    assert parse_integer(value) == expected


def test_integer_format_accepts_any_integer() -> None:
    [problem] = normalize_rows([{"problem": "p", "answer": "123456"}], dataset(answer_format="integer"),
                               origin="raw.jsonl")
    assert problem.answer == 123456


def test_shared_aime_2025_with_question_key(shared_data: Path, tmp_path: Path) -> None:
    path = shared_data / "aime_2025.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    problems = normalize_rows(rows, dataset(problem_key="question"), origin=str(path))
    assert len(problems) == 30
    assert [p.answer for p in problems] == [int(row["answer"]) for row in rows]
    assert len({p.id for p in problems}) == 30

    out = tmp_path / "aime_2025.jsonl"
    out.write_text("".join(json.dumps(p.to_record()) + "\n" for p in problems))
    assert load_problems(out) == problems


def test_gsm8k_real_file_normalizes_with_integer_format(shared_data: Path) -> None:
    path = shared_data / "gsm8k_test.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} is absent: the shared GSM8K test file is needed")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    problems = normalize_rows(rows, dataset(name="gsm8k", problem_key="question", answer_format="integer"), str(path))
    assert len(problems) == len(rows)
    assert problems[0].answer == 18  # "Janet's ducks": the solution ends in "#### 18"


@pytest.mark.parametrize(("text", "flagged"), [
    ("In $\triangle ABC$, find $x$.", True),   # JSON's \t ate the backslash-t of \triangle
    ("Let $\theta = 30^\\circ$. Find x.", True),
    ("Solve $\tfrac{1}{2}x = 3$.", True),
    ("real f(real x)\n{\n\treturn 2*sin(3*x);\n}", False),  # MATH-500's Asymptote code is indented with tabs
    ("The sides have\tequal\tperimeters.", False),
])
def test_a_tab_is_an_error_only_where_a_latex_command_lost_its_backslash(text: str, flagged: bool) -> None:
    row = {"problem": text, "answer": "1"}
    if flagged:
        with pytest.raises(DataError, match="control character U\\+0009"):
            normalize_rows([row], dataset(), origin="raw.jsonl")
    else:
        assert normalize_rows([row], dataset(), origin="raw.jsonl")[0].problem == text
