"""From replayed debates to metrics/debate.json: accuracy per dataset and contest, stop shares, costs."""

from __future__ import annotations

import dataclasses

import pytest

from tests.debate.scripted import CFG, PROBLEM, answers_script, boxed, run_scripted, with_importance
from tracevote.datasets.problems import Problem
from tracevote.debate.results import contest_of, debate_metrics, debate_totals, problem_result
from tracevote.debate.table import debate_markdown, problem_rows


def result(dataset: str, contest: str | None, script: dict[str, str], gold: int = 42, cfg=CFG):
    transcript, _ = run_scripted(script, cfg)
    return problem_result(dataset, contest, dataclasses.replace(PROBLEM, answer=gold), transcript, cfg)


ROUND0_RIGHT = answers_script(r0=[42, 42, 42])
ROUND1_WRONG = answers_script(r0=[1, 2, 3, 4], r1=[7, 7, 7])
RANKED = {**answers_script(r0=[1, 2, 3, 4], r1=[42, 6, 42, 8]), "rank": "[1, 3]"}
ROUND2 = {**answers_script(r0=[1, 2, 3, 4], r1=[5, 6, 7, 8]), "rank": "none", "r2/pick1": boxed(None),
          "r2/pick2": boxed(None)}


def test_contests_come_from_meta_or_from_halves() -> None:
    halves = dataclasses.replace(CFG, datasets=("aime_2025", "aime_2024"), contest_halves=("aime_2025",))
    plain = Problem("p", "x", 1)
    assert contest_of(plain, 14, 30, "aime_2025", halves) == "aime_2025_I"
    assert contest_of(plain, 15, 30, "aime_2025", halves) == "aime_2025_II"
    assert contest_of(plain, 15, 30, "aime_2024", halves) is None
    assert contest_of(Problem("p", "x", 1, {"contest": "II"}), 0, 30, "aime_2024", halves) == "aime_2024_II"


def test_metrics_pool_datasets_and_contests_and_count_every_stop() -> None:
    results = [result("aime_2024", None, ROUND0_RIGHT), result("aime_2024", None, ROUND1_WRONG),
               result("aime_2025", "aime_2025_I", RANKED), result("aime_2025", "aime_2025_II", ROUND2)]
    metrics = debate_metrics(results, CFG, simulated=True)
    assert list(metrics)[:6] == ["accuracy_pct", "problems", "accuracy_aime_2024_pct", "accuracy_aime_2025_pct",
                                 "accuracy_aime_2025_I_pct", "accuracy_aime_2025_II_pct"]
    assert (metrics["accuracy_pct"], metrics["accuracy_aime_2024_pct"], metrics["accuracy_aime_2025_I_pct"],
            metrics["accuracy_aime_2025_II_pct"]) == (50.0, 50.0, 100.0, 0.0)  # percent
    assert (metrics["stop_round0_pct"], metrics["stop_round1_pct"], metrics["stop_ranking_pct"],
            metrics["stop_round2_pct"], metrics["stop_rounds_pct"]) == (25.0, 25.0, 25.0, 25.0, 0.0)
    assert metrics["consensus_pct"] == 75.0
    assert not [key for key in metrics if key.startswith(("accuracy", "stop_", "consensus")) and
                not key.endswith("_pct")], "every share names its unit"
    assert metrics["api_calls_per_problem"] == (3 + 7 + 9 + 11) / 4
    assert metrics["completion_tokens_per_problem"] == 50 * (3 + 7 + 9 + 11) / 4  # 50 per scripted reply
    assert (metrics["judge_calls"], metrics["judge_fallbacks"], metrics["unanswered"]) == (2, 1, 1)
    assert (metrics["total_calls"], metrics["correct"], metrics["wrong"]) == (30, 2, 2)
    assert metrics["simulated"] is True and "importance_agent1" not in metrics


def test_importance_means_appear_per_agent_when_enabled() -> None:
    cfg = with_importance()
    results = [result("toy", None, answers_script(r0=[42, 42, 42]), cfg=cfg),
               result("toy", None, answers_script(r0=[42, 9, 42, 42]), cfg=cfg)]
    metrics = debate_metrics(results, cfg, simulated=False)
    assert [metrics[f"importance_agent{i}"] for i in range(1, 5)] == pytest.approx(
        [(1 / 3 + 1 / 3) / 2, (1 / 3 + 0) / 2, (1 / 3 + 1 / 3) / 2, (0 + 1 / 3) / 2], abs=1e-6)  # 6 decimals
    assert metrics["rating_fallbacks"] == 0 and metrics["simulated"] is False


def four_results() -> list:
    return [result("aime_2024", None, ROUND0_RIGHT), result("aime_2024", None, ROUND1_WRONG),
            result("aime_2025", "aime_2025_I", RANKED), result("aime_2025", "aime_2025_II", ROUND2)]


def test_totals_list_the_failed_problems_and_count_the_calls() -> None:
    results = [dataclasses.replace(r, problem_id=f"p{i}") for i, r in enumerate(four_results(), start=1)]
    totals = debate_totals(results)
    assert (totals.problems, totals.correct, totals.failed, totals.calls, totals.calls_per_problem) == (
        4, 2, ["p2", "p4"], 30, 7.5)
    assert debate_totals([]).calls_per_problem == 0.0


def test_each_problem_is_a_row_with_gold_final_answer_right_calls_and_where_it_stopped() -> None:
    assert problem_rows(four_results()) == [
        ("aime_2024", "toy-01", "42", "42", "yes", "3", "round 0 (consensus)"),
        ("aime_2024", "toy-01", "42", "7", "no", "7", "round 1 (consensus)"),
        ("aime_2025", "toy-01", "42", "42", "yes", "9", "ranking (top 2 agree)"),
        ("aime_2025", "toy-01", "42", "—", "no", "11", "round 2"),
    ]


def test_the_markdown_report_holds_the_totals_the_failed_and_the_table() -> None:
    results = four_results()
    metrics = debate_metrics(results, CFG, simulated=True)
    text = debate_markdown(results, metrics, debate_totals(results), banner="SIMULATED")
    assert text.startswith("# Debate (DyLAN): per problem\n\n**SIMULATED**\n")
    assert "Problems: 4. Right: 2 (50.00%). Calls: 30 in all, 7.50 per problem." in text
    assert "- accuracy, aime_2025_II: 0.00%" in text and "Failed (wrong or unanswered): toy-01, toy-01." in text
    table = [line for line in text.splitlines() if line.startswith("|")]
    assert table[0] == "| dataset | problem | gold | final answer | right | calls | stopped after |"
    assert len(table) == 2 + 4 and table[-1] == "| aime_2025 | toy-01 | 42 | — | no | 11 | round 2 |"
