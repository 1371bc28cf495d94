"""The report stage's core: the headline table (printed, CSV, Markdown), flat metrics, per-problem results."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tracevote.core.errors import ConfigError
from tracevote.datasets.problems import Problem
from tracevote.deepconf.results import AggregateResult

SIMULATED_BANNER = "SIMULATED MODEL: these numbers test the pipeline, not a real LLM"
TIE_RULES = {"smallest": "the smallest answer wins", "first": "the answer met first in the working set wins",
             "fractional": "a t-way tie holding the gold scores 1/t"}
TABLE_COLUMNS = ("method", "label", "mean", "std", "fractional", "tie_rule_pts")


@dataclass(frozen=True)
class Row:
    label: str
    method: str
    mean: float
    std: float
    fractional: float  # accuracy with ties scored 1/t (a uniform random tie-break's expectation)

    @property
    def tie_rule_pts(self) -> float:
        """Points (of 100) the chosen tie rule adds over the fractional accuracy; may be negative."""
        return 100 * (self.mean - self.fractional)

    def shows_tie_rule(self) -> bool:
        """Cons@K always shows what its tie rule adds; a weighted method only when it tied."""
        return self.method == "cons" or abs(self.tie_rule_pts) >= 0.005


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
        rows.append(Row(method_label(method, k), method, accuracy.mean, accuracy.std, accuracy.fractional))
    return rows


def render(result: AggregateResult, k: int, *, simulated: bool) -> str:
    """The printed report: accuracy table at K, validity, ties, confidence summaries and AUROC."""
    lines = [f"*** {SIMULATED_BANNER} ***", ""] if simulated else []
    lines.append(f"Accuracy at K={k} over {result.validity.n_problems} problems, mean ± std over "
                 f"{result.repeat} repeats; ties: {TIE_RULES[result.tie_break]} (eval.tie_break)")
    lines += _accuracy_lines(headline_rows(result, k))
    lines += ["", *_validity_lines(result), f"Cons@{k} tie rate: {100 * result.tie_rate_at(k):.1f}% of working sets"]
    lines += ["", "Confidence (valid samples)    correct: mean [p10 p50 p90]  |  incorrect: mean [p10 p50 p90]"]
    lines += [_confidence_line(result, measure) for measure in result.measures]
    lines += ["", "AUROC, correct vs incorrect    per-problem mean (problems)  |  pooled"]
    lines += [f"  {a.measure:<10} {_num(a.per_problem_mean)} ({a.n_problems})  |  {_num(a.pooled)}"
              for a in result.auroc]
    return "\n".join(lines)


def _accuracy_lines(rows: list[Row]) -> list[str]:
    """One line per method; 'tie rule +x.x pts' beside Cons@K and any weighted method that tied."""
    width = max(len(row.label) for row in rows)
    lines = []
    for row in rows:
        line = f"  {row.label:<{width}}  {100 * row.mean:6.2f}% ± {100 * row.std:5.2f}"
        if row.shows_tie_rule():
            line += f"   fractional {100 * row.fractional:6.2f}%, tie rule {row.tie_rule_pts:+.1f} pts"
        lines.append(line)
    return lines


def _validity_lines(result: AggregateResult) -> list[str]:
    v = result.validity
    sources = ", ".join(f"{count} {name}" for name, count in v.by_source.items())
    reasons = ", ".join(f"{count} {name}" for name, count in v.by_finish_reason.items())
    return [f"Valid samples per problem: mean {v.valid_per_problem_mean:.1f}, min {v.valid_per_problem_min} "
            f"({v.n_valid} of {v.n_samples} valid; invalid: {v.no_answer} no answer, {v.truncated} truncated at "
            f"max_tokens, {v.no_tokens} no tokens)",
            f"Answer source: {sources}; finish reason: {reasons}",
            f"Votes from fallback answers (no \\boxed{{}}): {v.fallback_votes} valid samples, "
            f"{v.fallback_votes_correct} of them correct"]


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
    summary: dict[str, Any] = {"simulated": simulated, "k": k, "repeat": result.repeat,
                               "tie_break": result.tie_break}
    for row in headline_rows(result, k):
        summary[row.method] = round(row.mean, 6)
        summary[f"{row.method}_std"] = round(row.std, 6)
        if row.method != "pass1":
            summary[f"{row.method}_fractional"] = round(row.fractional, 6)
            summary[f"{row.method}_tie_rule_pts"] = round(row.tie_rule_pts, 4)
    summary["cons_tie_rate"] = round(result.tie_rate_at(k), 6)
    summary.update(_validity_metrics(result))
    for a in result.auroc:
        summary[f"auroc_{a.measure}"] = None if a.per_problem_mean is None else round(a.per_problem_mean, 6)
    return summary


def _validity_metrics(result: AggregateResult) -> dict[str, Any]:
    v = result.validity
    metrics: dict[str, Any] = {"valid_per_problem_mean": round(v.valid_per_problem_mean, 3),
                               "valid_per_problem_min": v.valid_per_problem_min, "n_samples": v.n_samples,
                               "n_valid": v.n_valid, "invalid_no_answer": v.no_answer,
                               "invalid_truncated": v.truncated, "invalid_no_tokens": v.no_tokens}
    metrics.update({f"source_{name}": count for name, count in v.by_source.items()})
    metrics.update({f"finish_{name}": count for name, count in v.by_finish_reason.items()})
    metrics["fallback_votes"] = v.fallback_votes
    metrics["fallback_votes_correct"] = v.fallback_votes_correct
    return metrics


def results_table(result: AggregateResult, k: int) -> list[dict[str, Any]]:
    """The headline table as records with TABLE_COLUMNS; accuracies as fractions, tie_rule_pts in points."""
    return [{"method": row.method, "label": row.label, "mean": row.mean, "std": row.std,
             "fractional": row.fractional, "tie_rule_pts": row.tie_rule_pts} for row in headline_rows(result, k)]


def table_csv(records: list[dict[str, Any]]) -> str:
    """CSV with a header of TABLE_COLUMNS; floats with 6 decimals."""
    lines = [",".join(TABLE_COLUMNS)]
    lines += [",".join(_cell(record[c], 6) for c in TABLE_COLUMNS) for record in records]
    return "\n".join(lines) + "\n"


def table_markdown(records: list[dict[str, Any]], k: int, tie_break: str) -> str:
    """A Markdown table in percent, with a caption naming K and the tie rule."""
    lines = [f"Accuracy at K={k} (%), ties: {TIE_RULES[tie_break]}; fractional scores a t-way tie 1/t.", "",
             "| " + " | ".join(TABLE_COLUMNS) + " |", "|" + "---|" * len(TABLE_COLUMNS)]
    for record in records:
        cells = [record["method"], record["label"], *(f"{100 * record[c]:.2f}" for c in ("mean", "std", "fractional")),
                 f"{record['tie_rule_pts']:+.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _cell(value: Any, decimals: int) -> str:
    return f"{value:.{decimals}f}" if isinstance(value, float) else str(value)


def problem_results(result: AggregateResult, k: int, problems: list[Problem], *, simulated: bool) -> dict[str, Any]:
    """Per problem at K: gold answer, and per method its accuracy over repeats and usual prediction."""
    by_problem: dict[str, dict[str, Any]] = {p.id: {"id": p.id, "gold": p.answer, "methods": {}} for p in problems}
    for row in result.problems:
        if row.k == k and row.problem_id in by_problem:
            by_problem[row.problem_id]["methods"][row.method] = {
                "accuracy": row.accuracy, "prediction": row.prediction, "answered": row.answered}
    return {"simulated": simulated, "k": k, "repeat": result.repeat, "problems": list(by_problem.values())}
