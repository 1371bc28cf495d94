import json
from pathlib import Path

import pytest

from tracevote.answers.formats import gold_integer


@pytest.mark.parametrize(
    ("value", "answer_format", "expected"),
    [
        (25, "aime", 25),
        ("025", "aime", 25),
        (" 7 ", "aime", 7),
        (12.0, "aime", 12),
        ("Janet sells 9 eggs.\n#### 18", "integer", 18),
        ("x #### 1,018", "integer", 1018),
        ("a #### b #### -3", "integer", -3),
        ("123456", "integer", 123456),
        ("+4", "integer", 4),
    ],
)
def test_gold_integer_reads(value, answer_format, expected):
    assert gold_integer(value, answer_format) == (expected, None)


@pytest.mark.parametrize(
    ("value", "answer_format", "reason"),
    [
        (None, "aime", "missing or empty"),
        ("  ", "integer", "missing or empty"),
        (True, "integer", "True is not an integer"),
        ("12.5", "integer", "'12.5' is not an integer"),
        (12.5, "aime", "12.5 is not an integer"),
        ("1,00", "integer", "'1,00' is not an integer"),
        ("#### ", "integer", "'#### ' is not an integer"),
        ("1\x00", "integer", "'1\\x00' is not an integer"),
        ([1], "integer", "[1] is not an integer"),
        ("1000", "aime", "'1000' is outside the AIME range 0-999"),
        (-1, "aime", "-1 is outside the AIME range 0-999"),
    ],
)
def test_gold_integer_rejects_with_reason(value, answer_format, reason):
    assert gold_integer(value, answer_format) == (None, reason)


def test_gsm8k_real_file_every_gold_is_an_integer(shared_data):
    path: Path = shared_data / "gsm8k_test.jsonl"
    if not path.exists():
        pytest.skip(f"{path} is absent: the shared GSM8K test file is needed")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    golds = [gold_integer(row["answer"], "integer") for row in rows]
    assert [reason for _, reason in golds if reason] == []
    assert len(golds) == len(rows) > 1000
