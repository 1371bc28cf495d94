"""The report's text, flat metrics and results tables: tie-rule points, validity by source, CSV/Markdown."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from tests.deepconf.test_working_sets import pools_table
from tracevote.core.config_deepconf import MEASURES, EvalConfig
from tracevote.datasets.problems import Problem
from tracevote.deepconf.evaluate import aggregate
from tracevote.deepconf.results import AggregateResult
from tracevote.report.tables import (
    SIMULATED_BANNER,
    TABLE_COLUMNS,
    problem_results,
    render,
    results_table,
    summary_metrics,
    table_csv,
    table_markdown,
)

# problem p: gold 3 ties 5 (5 met first); problem q: 4 of 5 say the gold 3, one a fallback; r: truncated
ROWS = [("p", 5, "boxed", "stop"), ("p", 3, "boxed", "stop"), ("p", 5, "boxed", "stop"), ("p", 3, "boxed", "stop"),
        ("q", 3, "boxed", "stop"), ("q", 3, "fallback", "stop"), ("q", 3, "boxed", "length"), ("q", 8, "boxed", "stop"),
        ("q", None, "none", "length")]


def result(tie_break: str) -> AggregateResult:
    table = pd.DataFrame({
        "problem_id": [r[0] for r in ROWS], "sample_id": range(len(ROWS)),
        "answer": pd.array([r[1] for r in ROWS], dtype="Int64"), "answer_source": [r[2] for r in ROWS],
        "correct": [r[1] == 3 for r in ROWS], "valid": [r[1] is not None for r in ROWS], "n_tokens": 10,
        "finish_reason": [r[3] for r in ROWS], **dict.fromkeys(MEASURES, 1.0)})
    return aggregate(table, EvalConfig(k=(4,), repeat=2, seed=0, etas=(0.9,), tie_break=tie_break))  # type: ignore[arg-type]


@pytest.mark.parametrize(("tie_break", "cons", "points"), [("smallest", 1.0, 25.0), ("first", 0.5, -25.0),
                                                           ("fractional", 0.75, 0.0)])
def test_summary_shows_what_the_tie_rule_adds(tie_break: str, cons: float, points: float) -> None:
    # q's K=4 sets vary, but 3 always wins there; p is a 2-way tie holding the gold
    summary = summary_metrics(result(tie_break), 4, simulated=False)
    assert (summary["tie_break"], summary["cons"], summary["cons_fractional"]) == (tie_break, cons, 0.75)
    assert summary["cons_tie_rule_pts"] == pytest.approx(points)
    assert summary["avg_tie_rule_pts"] == pytest.approx(points)  # equal weights: the weighted vote ties too
    assert "pass1_tie_rule_pts" not in summary


def test_summary_and_text_count_answers_by_source_and_finish_reason() -> None:
    aggregated = result("smallest")
    summary = summary_metrics(aggregated, 4, simulated=False)
    expected = {"source_boxed": 7, "source_fallback": 1, "source_none": 1, "finish_stop": 7, "finish_length": 2,
                "fallback_votes": 1, "fallback_votes_correct": 1, "invalid_truncated": 1, "invalid_no_answer": 0,
                "invalid_no_tokens": 0, "n_valid": 8, "n_samples": 9}
    assert {key: summary[key] for key in expected} == expected
    text = render(aggregated, 4, simulated=False)
    assert "ties: the smallest answer wins (eval.tie_break)" in text
    assert "Answer source: 7 boxed, 1 fallback, 1 none; finish reason: 7 stop, 2 length" in text
    assert "Votes from fallback answers (no \\boxed{}): 1 valid samples, 1 of them correct" in text
    assert "1 truncated at max_tokens" in text
    cons_line = next(line for line in text.splitlines() if line.strip().startswith("Cons@4"))
    assert cons_line.endswith("fractional  75.00%, tie rule +25.0 pts")


def test_results_csv_round_trips_and_markdown_has_every_method() -> None:
    aggregated = result("first")
    records = results_table(aggregated, 4)
    back = pd.read_csv(io.StringIO(table_csv(records)))
    assert tuple(back.columns) == TABLE_COLUMNS
    assert back["method"].tolist() == list(aggregated.methods)
    expected = pd.DataFrame(records).fillna(np.nan).infer_objects().round(6)
    pd.testing.assert_frame_equal(back, expected, check_exact=False, atol=1e-6)
    assert back.loc[back["method"] == "cons", "vs_cons"].isna().all()  # no comparison with itself
    markdown = table_markdown(records, 4, "first", 0.95).splitlines()
    assert markdown[0].startswith("Accuracy at K=4 (%), ties: the answer met first in the working set wins")
    assert markdown[2] == ("| method | label | mean | std | 95% interval | fractional | tie_rule_pts | "
                           "vs Cons@4 (pts) | p | working sets |")
    cons = next(line for line in markdown if line.startswith("| cons |"))
    low, high = (100 * records[1][side] for side in ("ci_low", "ci_high"))
    # p's pool is 4 samples: one working set at K=4
    assert cons == f"| cons | Cons@4 | 50.00 | 0.00 | [{low:.2f}, {high:.2f}] | 75.00 | -25.00 |  |  | 1 |"
    assert len(markdown) == 4 + len(aggregated.methods)
    simulated = table_markdown(records, 4, "first", 0.95, simulated=True).splitlines()
    assert simulated[0] == f"**{SIMULATED_BANNER}**" and simulated[2:] == markdown


def test_aggregate_json_round_trip_keeps_tie_rule_and_sources() -> None:
    aggregated = result("fractional")
    assert AggregateResult.from_json(aggregated.to_json()) == aggregated


NO_SPREAD = "has one distinct working set per problem: its std is 0, and its spread and interval reflect only the " \
            "problems' resampling, not the traces'"
SOME = "has one distinct working set for some problems: for those, its spread and interval reflect only the " \
       "problems' resampling, not the traces'"
WARNINGS = [
    # (pool sizes, eval.k, eval.repeat, the warning after each K that gets one)
    ({"p": 4, "q": 4}, (2, 4), 8, {4: NO_SPREAD}),  # K=4 is every pool: one set each (K=512 of the default pool)
    ({"p": 4, "q": 5}, (4,), 8, {4: SOME}),  # p's pool is K, q's is not
    ({"p": 6}, (1, 3), 1, {1: NO_SPREAD, 3: NO_SPREAD}),  # one repeat: one set at every K
    ({"p": 8, "q": 8}, (2, 4), 8, {}),
]


@pytest.mark.parametrize(("pools", "ks", "repeat", "warned"), WARNINGS)
def test_the_report_warns_of_each_k_without_spread_from_traces(pools: dict[str, int], ks: tuple[int, ...],
                                                               repeat: int, warned: dict[int, str]) -> None:
    result = aggregate(pools_table(pools), EvalConfig(k=ks, repeat=repeat, seed=0, etas=(0.9,)))
    lines = render(result, ks[-1], simulated=False).splitlines()
    assert [line for line in lines if line.startswith("warning:")] == [f"warning: K={k} {text}"
                                                                      for k, text in warned.items()]


def test_the_headline_k_carries_its_count_of_working_sets_into_text_summary_table_and_results() -> None:
    # pools of 4 and 5 at K=4: p has one working set, q at most C(5, 4) = 5 of its 8 draws
    result = aggregate(pools_table({"p": 4, "q": 5}), EvalConfig(k=(4,), repeat=8, seed=0, etas=(0.9,)))
    sets = result.working_sets_at(4)
    assert sets.fewest == 1 and 1 < sets.most <= 5
    assert f"over 8 repeats (1-{sets.most} distinct working sets per problem)" in render(result, 4, simulated=False)
    whole = aggregate(pools_table({"p": 4}), EvalConfig(k=(4,), repeat=8, seed=0, etas=(0.9,)))
    assert "over 8 repeats (1 distinct working set per problem)" in render(whole, 4, simulated=False)
    assert summary_metrics(result, 4, simulated=False)["working_sets"] == 1
    assert {record["working_sets"] for record in results_table(result, 4)} == {1}
    problems = [Problem(id=name, problem="?", answer=1) for name in ("p", "q")]
    assert problem_results(result, 4, problems, simulated=False)["working_sets"] == 1


@pytest.mark.parametrize(("mean", "fractional", "digits", "shown"), [
    # (accuracy, fractional accuracy, digits, the tie rule's points as reported): never -0.0
    (0.3, 0.1 + 0.2, 4, "+0.0000"),  # equal accuracies by two float paths: -5.6e-15 pts, -0.0 once rounded
    (0.5, 0.5000004, 1, "+0.0"),  # -0.00004 pts rounds to -0.0 without the fix
    (0.5, 0.500004, 4, "-0.0004"),  # a real negative at that precision is kept
    (0.52, 0.5, 1, "+2.0"),
    (0.5, 0.52, 1, "-2.0"),
])
def test_a_tie_rule_that_adds_nothing_reads_as_zero_never_minus_zero(mean: float, fractional: float, digits: int,
                                                                     shown: str) -> None:
    from tracevote.report.tables import Row, unsigned_zero

    value = unsigned_zero(Row("Cons@K", "cons", mean, 0.0, fractional).tie_rule_pts, digits)
    assert f"{value:+.{digits}f}" == shown
    assert str(value) != "-0.0"
