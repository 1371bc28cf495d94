"""CSV safe for spreadsheets: a text cell a spreadsheet would run as a formula gets a leading quote, numbers stay
numbers, the rule reads back exactly, and every CSV the project writes goes through the one writer."""

from __future__ import annotations

import ast
import csv
import io
import math
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import REPO_ROOT
from tracevote.core.csvtext import FORMULA_STARTS, columns_csv, csv_text, frame_csv, read_cell, safe_cell
from tracevote.critique.results import BY_TASK_COLUMNS, write_by_task_csv
from tracevote.report.critique import read_by_task_csv
from tracevote.report.grading import write_table_csv
from tracevote.report.tables import ONLINE_COLUMNS, table_csv


@pytest.mark.parametrize(("cell", "written"), [
    ('=HYPERLINK("http://evil","click")', '\'=HYPERLINK("http://evil","click")'),
    ("+1+2", "'+1+2"),
    ("-2+3", "'-2+3"),
    ("@SUM(A1:A9)", "'@SUM(A1:A9)"),
    ("\tcmd", "'\tcmd"),
    ("\rcmd", "'\rcmd"),
    ("-\\frac{1}{2}", "'-\\frac{1}{2}"),  # a LaTeX answer is text, not a number
    ("-inf", "'-inf"),
    ("'quoted", "''quoted"),  # so reading back is exact
    ("-1", "-1"),  # numbers stay numbers: a DeltaBench label, a negative answer
    ("-0.500000", "-0.500000"),
    ("+3e2", "+3e2"),
    ("-.5", "-.5"),
    ("x=1", "x=1"),  # only the first character counts
    ("", ""),
    ("gsm8k_test_3", "gsm8k_test_3"),
])
def test_formula_like_text_gets_a_leading_quote_and_reads_back(cell: str, written: str) -> None:
    assert safe_cell(cell) == written
    assert read_cell(written) == cell


@pytest.mark.parametrize("value", [-1, -0.25, 0, None, True, math.nan])
def test_cells_that_are_not_text_are_left_as_they_are(value: object) -> None:
    assert safe_cell(value) is value


def test_csv_text_quotes_what_needs_quoting_and_neutralises_header_and_cells() -> None:
    text = csv_text(["id", "=run"], [["=1+2", -1], ['a,"b"', None], ["-3", 0.5]])
    assert text == "id,'=run\n'=1+2,-1\n\"a,\"\"b\"\"\",\n-3,0.5\n"


def test_a_carriage_return_or_newline_anywhere_in_a_cell_is_quoted_so_the_row_stays_whole() -> None:
    text = csv_text(["a", "b"], [["x\ry", "p\nq"], ["\rz", "-1"]])
    assert text == 'a,b\n"x\ry","p\nq"\n"\'\rz",-1\n'
    assert list(csv.reader(io.StringIO(text, newline=""))) == [["a", "b"], ["x\ry", "p\nq"], ["'\rz", "-1"]]


def test_frame_csv_writes_numbers_exactly_as_pandas_did() -> None:
    frame = pd.DataFrame({"k": pd.array([1, None, -16], dtype="Int64"), "acc": [-0.123456789, math.nan, 1e-9],
                          "n": [3, -4, 5]})
    assert frame_csv(frame, "%.6f") == frame.to_csv(index=False, float_format="%.6f", lineterminator="\n")


def test_frame_csv_neutralises_text_columns_and_names_but_not_numbers() -> None:
    frame = pd.DataFrame({"label": ["=cmd", "Cons@4", "-1"], "k": pd.array([-1, None, 4], dtype="Int64"),
                          "@x": [-0.5, 1.0, math.nan]})
    assert frame_csv(frame, "%.2f") == "label,k,'@x\n'=cmd,-1,-0.50\nCons@4,,1.00\n-1,4,\n"


@pytest.mark.parametrize("columns", [
    {"label": ["=cmd", "Cons@4", "-1"], "k": [-1, None, 4], "@x": [-0.5, 1.0, None], "simulated": [True] * 3},
    {"method": ["pass1", "debate"], "k": [1, None], "tokens": [161.74479166, 9000.0], "acc": [67.1875, math.nan]},
    {"subset": ["pb/gsm8k"], "f1_pct": [None], "error_accuracy_pct": [33.333333]},
])
def test_columns_csv_writes_plain_columns_as_frame_csv_writes_their_frame(columns: dict) -> None:
    """The pandas-free stages (compare, report_critiques) write the CSVs `dvc plots` reads byte for byte as the
    frame's writer did: an int column with a gap stays ints (as Int64), a float column's gap is empty."""
    frame = pd.DataFrame({name: pd.array(values, dtype="Int64") if name == "k" else values
                          for name, values in columns.items()})
    assert columns_csv(columns, "%.4f") == frame_csv(frame, "%.4f")


def test_the_critique_table_reads_back_the_task_names_it_wrote(tmp_path: Path) -> None:
    row = dict.fromkeys(BY_TASK_COLUMNS, 1)
    rows = [{**row, "dataset": "deltabench", "task": "=cmd|' /C calc'!A0"}, {**row, "dataset": "d", "task": "-1"},
            {**row, "dataset": "d", "task": "'quoted"}]
    path = tmp_path / "by_task.csv"
    write_by_task_csv(path, rows)
    assert [line.split(",")[1] for line in path.read_text().splitlines()[1:]] == [
        "'=cmd|' /C calc'!A0", "-1", "''quoted"]
    assert [(row["dataset"], row["task"]) for row in read_by_task_csv(path)] == [
        (row["dataset"], row["task"]) for row in rows]


def test_a_grading_run_named_like_a_formula_is_neutralised(tmp_path: Path) -> None:
    record = {"run": "=evil()", "dataset": "@gsm8k", "simulated": False, "accuracy": 0.5, "avg_word_count": -3.0,
              "critic_score": None, "avg_word_count_correct": 2.0, "avg_word_count_incorrect": 4.0}
    path = tmp_path / "grading.csv"
    write_table_csv(path, [record])
    cells = [cell for row in csv.reader(io.StringIO(path.read_text())) for cell in row]
    assert "'=evil()" in cells and "'@gsm8k" in cells and "-3.0" in cells and not any_formula(cells)


def test_the_results_tables_keep_negative_numbers_as_numbers() -> None:
    record = {**dict.fromkeys(ONLINE_COLUMNS, -1.5), "method": "-online"}
    line = table_csv([record], ONLINE_COLUMNS).splitlines()[1].split(",")
    assert line == ["'-online" if column == "method" else "-1.500000" for column in ONLINE_COLUMNS]


def any_formula(cells: list[str]) -> bool:
    """Whether a cell would run as a formula: it starts with a formula character and is no plain number."""
    return any(cell.startswith(FORMULA_STARTS) and safe_cell(cell) != cell for cell in cells)


def writes_csv(node: ast.AST) -> bool:
    """csv.writer, csv.DictWriter or any .to_csv."""
    if not isinstance(node, ast.Attribute):
        return False
    from_csv = isinstance(node.value, ast.Name) and node.value.id == "csv"
    return node.attr == "to_csv" or (from_csv and node.attr in ("writer", "DictWriter"))


def test_every_csv_the_project_writes_goes_through_core_csvtext() -> None:
    """No csv.writer, csv.DictWriter or DataFrame.to_csv anywhere else in src/ or stages/."""
    found = []
    for path in sorted([*(REPO_ROOT / "src").rglob("*.py"), *(REPO_ROOT / "stages").glob("*.py")]):
        if path.name == "csvtext.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if writes_csv(node):
                found.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}: {node.attr}")
    assert found == []
