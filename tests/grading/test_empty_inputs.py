"""`python -m tracevote grade` refuses input that cannot be what the user meant (issue 22 item 5): a GSM8K gold
answer without its `#### N`, an empty gold file, an empty predictions file, predictions none of whose ids is a gold
id. One line per problem, exit 2,
nothing graded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import hang_guard_s
from tests.dvcproject import project_env

GSM8K_GOLD = '{"question": "Two plus two?", "answer": "2 + 2 = 4\\n#### 4"}\n'
PREDICTION = '{"id": "gsm8k_test_0", "content": "#### 4"}\n'


def grade(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tracevote", "grade", *args], cwd=cwd, env=project_env(),
                          capture_output=True, text=True, timeout=hang_guard_s())


@pytest.mark.parametrize(("gold", "predictions", "says"), [
    ('{"question": "Two plus two?", "answer": "4"}\n', PREDICTION,
     "gold.jsonl: 1 problem(s) in the gold file:\n  row 0: field 'answer': expected a worked solution ending "
     "'#### N' (GSM8K's layout), got '4'"),
    (GSM8K_GOLD + '{"question": "Three?", "answer": 3}\n', PREDICTION,
     "row 1: field 'answer': expected a worked solution ending '#### N' (GSM8K's layout), got 3"),
    (GSM8K_GOLD + '{"question": "Three?", "answer": "so 3 # 3"}\n', PREDICTION,
     "row 1: field 'answer': expected a worked solution ending '#### N' (GSM8K's layout), got 'so 3 # 3'"),
    ("", PREDICTION, "gold.jsonl: 1 problem(s) in the gold file:\n  no rows (expected one gold item per row"),
    ("\n\n", PREDICTION, "no rows (expected one gold item per row: a problem and its answer)"),
    (GSM8K_GOLD, "", 'preds.jsonl: no predictions, nothing graded (expected one JSON object per line: '
                     '{"id", "dataset", "thinking", "content"})'),
    (GSM8K_GOLD, "\n  \n", "preds.jsonl: no predictions, nothing graded"),
    (GSM8K_GOLD, '{"id": "math500_test_0", "content": "#### 4"}\n',
     "preds.jsonl: none of its 1 prediction ids (first 'math500_test_0') is the id of a gold item (first "
     "'gsm8k_test_0'): is it another dataset's file"),
], ids=["no-mark", "integer-answer", "single-hash", "empty-gold", "blank-gold", "empty-predictions",
        "blank-predictions", "no-id-matches"])
def test_grade_refuses_empty_or_unmarked_input(tmp_path: Path, gold: str, predictions: str, says: str) -> None:
    (tmp_path / "gold.jsonl").write_text(gold, encoding="utf-8")
    (tmp_path / "preds.jsonl").write_text(predictions, encoding="utf-8")
    result = grade(tmp_path, "--dataset", "gsm8k", "--pred-path", "preds.jsonl", "--gold", "gold.jsonl")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("error: ") and says in result.stderr
    assert "Traceback" not in result.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["gold.jsonl", "preds.jsonl"]  # nothing written


def test_a_marked_gsm8k_gold_grades(tmp_path: Path) -> None:
    (tmp_path / "gold.jsonl").write_text(GSM8K_GOLD, encoding="utf-8")
    (tmp_path / "preds.jsonl").write_text(PREDICTION, encoding="utf-8")
    result = grade(tmp_path, "--dataset", "gsm8k", "--pred-path", "preds.jsonl", "--gold", "gold.jsonl", "--json")
    assert result.returncode == 0, result.stderr
    assert '"correct":1' in result.stdout and '"total":1' in result.stdout
