"""The scorer's printed lines (grading.summary) and the report's counts of critic replies without a score."""

from __future__ import annotations

from typing import Any

import pytest

from tracevote.grading.summary import render_run
from tracevote.report.grading import grading_metrics, render_table

EVALUATING_3 = ["Evaluating 1/3", "Evaluating 2/3", "Evaluating 3/3"]


def record(**critic: Any) -> dict[str, Any]:
    """A run of 10 gold items, 7 right, 9 predictions, whose critic asked about as many items as `critic` says."""
    return {"run": "r", "dataset": "gsm8k", "predictions_path": "p.jsonl", "source": "predictions file",
            "simulated": False, "gold_items": 10, "accuracy": 0.7, "correct": 7, "total": 10, "missing": 1,
            "string_fallbacks": 0, "unjudged": 0, "avg_word_count": 205.375, "avg_word_count_correct": 100.0,
            "avg_word_count_incorrect": 300.0, "predictions": 9, "unmatched": 0, "first_unmatched": None,
            "critic_score": None, "critic_scored": 0, "critic_unparsable": 0, "critic_usd": 0.0, **critic}


HEAD = ["Loaded 10 gold samples!", "Accuracy: 0.7000  (7/10)", "Average word count: 205.38"]
NOTE = ["note: 1 gold items have no prediction (counted wrong)"]


@pytest.mark.parametrize(("enabled", "critic", "lines"), [
    (False, {}, ["LLM critic disabled."]),
    (True, {"critic_score": 4.0 + 2 / 3, "critic_scored": 3}, [*EVALUATING_3, "LLM Critic avg score: 4.67"]),
    (True, {"critic_score": 4.5, "critic_scored": 2, "critic_unparsable": 1},
     [*EVALUATING_3, "LLM Critic avg score: 4.50",
      "LLM Critic unparsable replies: 1/3 (no score; left out of the average)"]),
    (True, {"critic_unparsable": 3},  # no score at all: not a mean of 0 or 1
     [*EVALUATING_3, "LLM Critic avg score: n/a",
      "LLM Critic unparsable replies: 3/3 (no score; left out of the average)"]),
    (True, {}, ["LLM Critic avg score: n/a (nothing to score: no gold item with a reference solution has a "
                "prediction)"]),
])
def test_the_scorers_lines_then_the_critics_then_notes(enabled: bool, critic: dict[str, Any],
                                                       lines: list[str]) -> None:
    assert render_run(record(**critic), critic_enabled=enabled).splitlines() == [*HEAD, *lines, *NOTE]


@pytest.mark.parametrize(("critic", "counts", "footer"), [
    ({}, (0, 0), "r = p.jsonl (predictions file, 7/10 correct)."),
    ({"critic_score": 3.0, "critic_scored": 47, "critic_unparsable": 3}, (47, 3),
     "r = p.jsonl (predictions file, 7/10 correct, critic: 3 of 50 replies gave no score)."),
])
def test_the_report_counts_critic_replies_without_a_score(critic: dict[str, Any], counts: tuple[int, int],
                                                           footer: str) -> None:
    metrics = grading_metrics([record(**critic)])
    assert (metrics["r.gsm8k.critic_scored"], metrics["r.gsm8k.critic_unparsable"]) == counts
    assert render_table([record(**critic)]).rstrip().endswith(footer)
