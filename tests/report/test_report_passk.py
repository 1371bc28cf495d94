"""pass@K and avg@K in the report (tracevote.report.passk): the results table's rows, summary.json's keys, the printed
lines, and an aggregate written before them."""

from __future__ import annotations

import io
from dataclasses import replace

import pandas as pd
import pytest

from tests.deepconf.test_passk import pools
from tracevote.deepconf.results import AggregateResult
from tracevote.report import passk, tables


@pytest.fixture(scope="module")
def result() -> AggregateResult:
    return pools()  # pools of 4: one correct, none, three; K 1, 2, 4


def test_the_results_table_gets_a_row_each_after_the_methods_in_csv_and_markdown(result: AggregateResult) -> None:
    records = tables.results_table(result, 2) + passk.table_records(result, 2)
    back = pd.read_csv(io.StringIO(tables.table_csv(records)))
    assert back["method"].tolist() == [*result.methods, "pass_at_k", "avg_at_k"]
    pass_row, avg_row = back.iloc[-2], back.iloc[-1]
    assert (pass_row["label"], pass_row["accuracy_pct"]) == ("pass@2", pytest.approx(50.0))  # (0.5 + 0 + 1) / 3
    assert (avg_row["label"], avg_row["accuracy_pct"]) == ("avg@2", pytest.approx(100 / 3, abs=1e-6))
    assert pass_row["std_pct"] == pytest.approx(100 * 0.5 / 3, abs=1e-6)  # sqrt(0.25) / 3 problems
    assert pd.isna(pass_row["working_sets"]) and pd.isna(pass_row["vs_cons_pts"])
    markdown = tables.table_markdown(records, 2, "smallest", 0.95).splitlines()
    row = next(line for line in markdown if line.startswith("| pass_at_k |"))
    assert row.startswith("| pass_at_k | pass@2 | 50.00 | 16.67 | [") and row.endswith("| 50.00 | +0.00 |  |  | all |")


def test_summary_keys_name_their_unit_and_hold_the_exact_figures(result: AggregateResult) -> None:
    summary = passk.summary_metrics(result, 4)
    assert set(summary) == {f"{name}_{part}pct" for name in ("pass_at_k", "avg_at_k")
                            for part in ("", "std_", "ci_low_", "ci_high_")}
    assert (summary["pass_at_k_pct"], summary["pass_at_k_std_pct"]) == (66.67, 0.0)  # K = n: one set, no spread
    assert summary["avg_at_k_pct"] == 33.33
    assert all(0 <= value <= 100 for value in summary.values())


def test_the_printed_report_gives_every_k(result: AggregateResult) -> None:
    lines = passk.report_lines(result)
    assert lines[1].startswith("pass@K and avg@K (lm-evaluation-harness's)")
    assert lines[1].endswith("[bootstrap interval]")
    assert [line.split()[0] for line in lines[2:]] == ["pass@1", "pass@2", "pass@4"]
    assert "pass@2  50.00% ± 16.67  [" in lines[3] and "avg@2  33.33% ± " in lines[3]


def test_an_aggregate_written_before_them_reports_without_them(result: AggregateResult) -> None:
    older = replace(result, pass_at_k=(), pass_at_k_problems=())
    assert passk.table_records(older, 2) == [] and passk.summary_metrics(older, 2) == {}
    assert passk.report_lines(older) == []
