"""What score_debate and score_critiques print: one labelled, rounded line per figure of their flat metrics
(the JSON keeps every digit). A label comes from the first pattern that matches the key; a key no pattern knows
is shown by its name, so a new figure is never dropped from the log."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from tracevote.core.costs import money

Labels = Sequence[tuple[str, str]]  # (a regular expression matching a whole key, its label, which may use \1)

DEBATE_LABELS: Labels = (
    (r"accuracy_pct", "accuracy"),
    (r"problems", "problems debated"),
    (r"accuracy_(.+)_pct", r"accuracy on \1"),
    (r"api_calls_per_problem", "calls per problem"),
    (r"prompt_tokens_per_problem", "prompt tokens per problem"),
    (r"cached_prompt_tokens_per_problem", "cached prompt tokens per problem"),
    (r"completion_tokens_per_problem", "completion tokens per problem"),
    (r"usd_per_problem", "cost per problem"),
    (r"total_calls", "calls in all"),
    (r"correct", "problems right"),
    (r"wrong", "problems wrong or unanswered"),
    (r"consensus_pct", "stopped early on consensus"),
    (r"stop_rounds_pct", "stopped when debate.rounds ran out"),
    (r"stop_(.+)_pct", r"stopped after \1"),
    (r"judge_calls", "debates that reached the judge"),
    (r"judge_fallbacks", "judge rankings not parsed (fallback order)"),
    (r"unanswered", "problems with no final answer"),
    (r"context_failed_calls", "calls longer than the model's context window"),
    (r"rating_fallbacks", "importance ratings not parsed"),
    (r"importance_agent(\d+)", r"importance of agent \1"),
)

_CRITIQUE_SCORES = {"n_error": "solutions with an error", "n_correct": "solutions without an error",
                    "error_accuracy": "error accuracy (first wrong step found)",
                    "correct_accuracy": "correct accuracy (no wrong step claimed)", "f1": "F1",
                    "unanimous": "solutions whose votes agree", "unparsable": "critiques with no step number"}
CRITIQUE_LABELS: Labels = (
    (r"solutions", "solutions"),
    *((rf"{key}(?:_pct)?", label) for key, label in _CRITIQUE_SCORES.items()),
    (r"f1_mean_pct", "F1, mean over datasets"),
    (r"calls", "critiques"),
    (r"context_failed", "critiques longer than the model's context window"),
    (r"truncated", "critiques cut at max_tokens"),
    (r"prompt_tokens", "prompt tokens"),
    (r"completion_tokens", "completion tokens"),
    (r"completion_tokens_per_call", "completion tokens per critique"),
    (r"usd", "cost"),
    *((rf"{key}_(.+?)(?:_pct)?", rf"{label}, \1") for key, label in _CRITIQUE_SCORES.items()),
)


def figure_lines(metrics: Mapping[str, Any], labels: Labels) -> list[str]:
    """One line per figure but `simulated` (the banner says it): its label, then its value rounded in its unit."""
    rows = [(label_of(key, labels), formatted(key, value)) for key, value in metrics.items() if key != "simulated"]
    width = max((len(label) for label, _ in rows), default=0)
    return [f"  {label:<{width}}  {value}" for label, value in rows]


def label_of(key: str, labels: Labels) -> str:
    for pattern, label in labels:
        match = re.fullmatch(pattern, key)
        if match:
            return match.expand(label)
    return key


def formatted(key: str, value: Any) -> str:
    """45.678 -> "45.68%" for a `_pct` key; dollars for a `usd` key; 1234.56 -> "1,234.6"; 12 -> "12"."""
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if key.endswith("_pct"):
        return f"{value:.2f}%"
    if key.startswith("usd"):
        return money(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.1f}" if key.endswith(("_per_problem", "_per_call")) else f"{value:,.2f}"
    return str(value)
