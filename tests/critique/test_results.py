"""Scoring critiques from stored replies: votes per solution, the flat metrics, the by-task CSV and the report's
table and heat map, on hand-made records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracevote.core.errors import DataError
from tracevote.critique.build import CritiqueItem
from tracevote.critique.results import by_task_rows, critique_metrics, item_result, write_by_task_csv
from tracevote.datasets.steps import load_step_records
from tracevote.report import critique as report
from tracevote.store.calls import CallRecord


def reply(text: str, finish: str = "stop", completion: int = 100) -> CallRecord:
    return CallRecord(key="0", kind="critique", request_sha256="x", text=text, finish_reason=finish,
                      prompt_tokens=50, cached_prompt_tokens=0, completion_tokens=completion, usd=0.001, latency_s=0.0)


def boxed(*contents: str) -> list[CallRecord]:
    return [reply(f"... so \\boxed{{{content}}}") for content in contents]


def test_an_item_votes_over_its_parsed_critiques_and_counts_the_rest() -> None:
    records = [*boxed("2", "two", "1", "2"), reply("cut off before the verdict", finish="length")]
    result = item_result("pb", CritiqueItem("pb-0", "gsm8k", 2, 4), records)
    assert result.boxed == ["2", "two", "1", "2", None]
    assert result.votes == [2, None, 1, 2, None] and result.prediction == 2 and result.match
    assert (result.unparsable, result.truncated, result.unanimous) == (2, 1, False)
    assert (result.prompt_tokens, result.completion_tokens) == (250, 500) and result.usd == pytest.approx(0.005)


def test_a_tie_goes_to_the_index_seen_first_and_no_vote_is_wrong() -> None:
    tied = item_result("pb", CritiqueItem("a", "t", -1, 3), boxed("1", "-1", "-1", "1"))
    assert tied.prediction == 1 and not tied.match
    silent = item_result("pb", CritiqueItem("b", "t", -1, 3), boxed("none", "x"))
    assert silent.prediction is None and not silent.match and silent.unparsable == 2


def results() -> list:
    """pb: two flawed solutions (one found), one right one (found), all unanimous but the miss; db: only flawed."""
    return [item_result("pb", CritiqueItem("1", "gsm8k", 1, 3), boxed("1", "1")),
            item_result("pb", CritiqueItem("2", "gsm8k", 0, 3), boxed("2", "-1")),
            item_result("pb", CritiqueItem("3", "gsm8k", -1, 3), boxed("-1", "-1")),
            item_result("db", CritiqueItem("4", "math", 4, 9), boxed("4", "oops")),
            item_result("db", CritiqueItem("5", "code", 2, 6), boxed("3", "3"))]


def test_the_flat_metrics_hold_overall_and_per_dataset_scores_with_null_for_an_empty_subset() -> None:
    metrics = critique_metrics(results(), simulated=True)
    assert metrics["simulated"] is True and metrics["solutions"] == 5 and metrics["calls"] == 10
    assert (metrics["n_error"], metrics["n_correct"]) == (4, 1)
    assert (metrics["error_accuracy_pct"], metrics["correct_accuracy_pct"], metrics["f1_pct"]) == (50.0, 100.0, 66.67)
    assert metrics["unanimous_pct"] == 60.0 and metrics["unparsable_pct"] == 10.0  # percent, two decimals
    assert (metrics["error_accuracy_pb_pct"], metrics["correct_accuracy_pb_pct"], metrics["f1_pb_pct"]) == (
        50.0, 100.0, 66.67)
    assert (metrics["n_error_db"], metrics["n_correct_db"]) == (2, 0)
    assert metrics["correct_accuracy_db_pct"] is None and metrics["f1_db_pct"] is None, "an empty subset is null"
    assert metrics["f1_mean_pct"] is None, "a mean over a null F1 is not a number"
    assert not {"error_acc", "correct_acc", "f1", "f1_mean", "unanimous_share"} & set(metrics), "every share is _pct"
    assert all(value is None or isinstance(value, int | float | bool) for value in metrics.values())


def test_the_by_task_csv_round_trips_with_blank_cells_for_null(tmp_path: Path) -> None:
    rows = by_task_rows(results())
    assert [(r["dataset"], r["task"]) for r in rows] == [("pb", "gsm8k"), ("db", "math"), ("db", "code")]
    write_by_task_csv(tmp_path / "by_task.csv", rows)
    text = (tmp_path / "by_task.csv").read_text()
    assert text.splitlines()[0] == ("dataset,task,n_error,n_correct,error_accuracy_pct,correct_accuracy_pct,f1_pct,"
                                    "unanimous_pct,unparsable_pct")
    assert text.splitlines()[2] == "db,math,1,0,100.00,,,0.00,50.00"  # percent; null as an empty cell
    back = report.read_by_task_csv(tmp_path / "by_task.csv")
    assert back[2]["correct_accuracy_pct"] is None and back[2]["error_accuracy_pct"] == 0.0
    assert back[1]["n_error"] == 1 and back[0]["f1_pct"] == 66.67
    assert report.subset_label(back[0]) == "pb/gsm8k"


def test_a_by_task_csv_without_its_columns_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "bad.csv").write_text("dataset,task\npb,gsm8k\n")
    with pytest.raises(DataError, match=r"bad\.csv: column 'n_error' is missing"):
        report.read_by_task_csv(tmp_path / "bad.csv")


HEADER = ("dataset,task,n_error,n_correct,error_accuracy_pct,correct_accuracy_pct,f1_pct,unanimous_pct,"
          "unparsable_pct\n")


@pytest.mark.parametrize(("text", "refusal"), [
    ("", r"bad\.csv: cannot read the critique scores by task"),
    (HEADER + "pb,gsm8k,two,1,50.00,100.00,66.67,0.00,0.00\n", r"bad\.csv: row 2: not a count or a share"),
    (HEADER + "pb,gsm8k,2,1,50.00,100.00,66.67,0.00,0.00\npb,math,1\n", r"bad\.csv: row 3: not a count or a share"),
])
def test_a_by_task_csv_that_is_not_counts_and_shares_is_refused_naming_its_row(text: str, refusal: str,
                                                                               tmp_path: Path) -> None:
    (tmp_path / "bad.csv").write_text(text)
    with pytest.raises(DataError, match=refusal):
        report.read_by_task_csv(tmp_path / "bad.csv")


def test_a_blank_line_in_the_by_task_csv_is_no_row(tmp_path: Path) -> None:
    (tmp_path / "by_task.csv").write_text(HEADER + "pb,gsm8k,2,1,50.00,,66.67,0.00,0.00\n\n")
    assert report.read_by_task_csv(tmp_path / "by_task.csv") == [
        {"dataset": "pb", "task": "gsm8k", "n_error": 2, "n_correct": 1, "error_accuracy_pct": 50.0,
         "correct_accuracy_pct": None, "f1_pct": 66.67, "unanimous_pct": 0.0, "unparsable_pct": 0.0}]


def test_the_table_shows_an_empty_subset_as_a_dash() -> None:
    rows = by_task_rows(results())
    table = report.render_markdown(rows, critique_metrics(results(), simulated=True), simulated=True)
    assert table.startswith("**SIMULATED MODEL")
    assert "| db | math | 1 | 0 | 100.00 | - | - | 0.00 | 50.00 |" in table
    assert "| **all** | | 4 | 1 | 50.00 | 100.00 | 66.67 | 60.00 | 10.00 |" in table


def test_the_heat_map_counts_true_against_predicted_steps_with_a_capped_last_step() -> None:
    labels, predictions = [-1, 0, 2, 14, 3], [-1, 1, 2, 12, None]
    cap = report.position_cap(labels, predictions)
    assert cap == report.POSITION_CAP
    counts = report.position_matrix(labels, predictions, cap)
    assert counts.shape == (cap + 2, cap + 3) and counts.sum() == 5
    assert counts[0, 0] == 1 and counts[1, 2] == 1 and counts[3, 3] == 1
    assert counts[cap + 1, cap + 1] == 1, "steps 12 and 14 both fall in the last row and column"
    assert counts[4, cap + 2] == 1, "no vote has its own column"
    assert report.position_cap([-1, 1], [2, None]) == 2


def test_a_step_file_with_a_label_outside_its_steps_is_refused_naming_the_line(tmp_path: Path) -> None:
    good = {"id": "a", "problem": "p", "steps": ["s0", "s1"], "label": 1, "task": "t"}
    (tmp_path / "steps.jsonl").write_text(json.dumps(good) + "\n" + json.dumps({**good, "id": "b", "label": 2}) + "\n")
    with pytest.raises(DataError, match=r"steps\.jsonl: line 2: field 'label': 2 does not index its 2 steps"):
        load_step_records(tmp_path / "steps.jsonl")
