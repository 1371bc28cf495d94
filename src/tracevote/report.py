"""The report stage's core: the headline table, flat metrics, per-problem results, curves and plots."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tracevote.datasets import Problem
from tracevote.errors import ConfigError
from tracevote.results import AggregateResult

SIMULATED_BANNER = "SIMULATED MODEL: these numbers test the pipeline, not a real LLM"


@dataclass(frozen=True)
class Row:
    label: str
    method: str
    mean: float
    std: float


def method_label(method: str, k: int | str) -> str:
    """"pass1" -> "Pass@1"; "cons" -> "Cons@64"; "tail" -> "tail@64"; "tail_top10" -> "tail+top-10%@64"."""
    if method == "pass1":
        return "Pass@1"
    if method == "cons":
        return f"Cons@{k}"
    measure, _, top = method.partition("_top")
    return f"{measure}+top-{top}%@{k}" if top else f"{measure}@{k}"


def headline_rows(result: AggregateResult, k: int) -> list[Row]:
    if k not in result.k:
        raise ConfigError(f"report.k: {k} is not one of eval.k {list(result.k)}")
    rows = []
    for method in result.methods:
        accuracy = result.accuracy_at(method, k)
        rows.append(Row(method_label(method, k), method, accuracy.mean, accuracy.std))
    return rows


def render(result: AggregateResult, k: int, *, simulated: bool) -> str:
    """The printed report: accuracy table at K, validity, ties, confidence summaries and AUROC."""
    lines = [f"*** {SIMULATED_BANNER} ***", ""] if simulated else []
    lines.append(f"Accuracy at K={k} over {result.validity.n_problems} problems, mean ± std over "
                 f"{result.repeat} repeats")
    rows = headline_rows(result, k)
    width = max(len(row.label) for row in rows)
    lines += [f"  {row.label:<{width}}  {100 * row.mean:6.2f}% ± {100 * row.std:5.2f}" for row in rows]
    validity = result.validity
    tie = result.tie_rate_at(k)
    lines += ["", f"Valid samples per problem: mean {validity.valid_per_problem_mean:.1f}, "
                  f"min {validity.valid_per_problem_min} ({validity.n_valid} of {validity.n_samples} valid; "
                  f"invalid: {validity.no_answer} no answer, {validity.truncated} truncated at max_tokens, "
                  f"{validity.no_tokens} no tokens)",
              f"Cons@{k} tie rate: {100 * tie:.1f}% of working sets"]
    lines += ["", "Confidence (valid samples)    correct: mean [p10 p50 p90]  |  incorrect: mean [p10 p50 p90]"]
    lines += [_confidence_line(result, measure) for measure in result.measures]
    lines += ["", "AUROC, correct vs incorrect    per-problem mean (problems)  |  pooled"]
    lines += [f"  {a.measure:<10} {_num(a.per_problem_mean)} ({a.n_problems})  |  {_num(a.pooled)}"
              for a in result.auroc]
    return "\n".join(lines)


def _confidence_line(result: AggregateResult, measure: str) -> str:
    parts = []
    for correct in (True, False):
        s = next(c for c in result.confidence if c.measure == measure and c.correct == correct)
        parts.append(f"{_num(s.mean)} [{_num(s.p10)} {_num(s.p50)} {_num(s.p90)}] n={s.count}")
    return f"  {measure:<10} {parts[0]}  |  {parts[1]}"


def _num(value: float | None) -> str:
    return "  n/a" if value is None or not np.isfinite(value) else f"{value:.3f}"


def summary_metrics(result: AggregateResult, k: int, *, simulated: bool) -> dict[str, Any]:
    """Flat and small, for `dvc metrics show/diff`: accuracies at K, tie rate, validity, AUROC."""
    summary: dict[str, Any] = {"simulated": simulated, "k": k, "repeat": result.repeat}
    for row in headline_rows(result, k):
        summary[row.method] = round(row.mean, 6)
        summary[f"{row.method}_std"] = round(row.std, 6)
    summary["cons_tie_rate"] = round(result.tie_rate_at(k), 6)
    summary["valid_per_problem_mean"] = round(result.validity.valid_per_problem_mean, 3)
    summary["valid_per_problem_min"] = result.validity.valid_per_problem_min
    for a in result.auroc:
        summary[f"auroc_{a.measure}"] = None if a.per_problem_mean is None else round(a.per_problem_mean, 6)
    return summary


def problem_results(result: AggregateResult, k: int, problems: list[Problem], *, simulated: bool) -> dict[str, Any]:
    """Per problem at K: gold answer, and per method its accuracy over repeats and usual prediction."""
    by_problem: dict[str, dict[str, Any]] = {p.id: {"id": p.id, "gold": p.answer, "methods": {}} for p in problems}
    for row in result.problems:
        if row.k == k and row.problem_id in by_problem:
            by_problem[row.problem_id]["methods"][row.method] = {
                "accuracy": row.accuracy, "prediction": row.prediction, "answered": row.answered}
    return {"simulated": simulated, "k": k, "repeat": result.repeat, "problems": list(by_problem.values())}
