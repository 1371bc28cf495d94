"""The report stage's core: the headline table (printed, CSV, Markdown), flat metrics, per-problem results."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tracevote.core.csvtext import csv_text
from tracevote.core.errors import ConfigError
from tracevote.core.mdtext import md_text
from tracevote.core.simulated import SIMULATED_BANNER
from tracevote.datasets.problems import Problem
from tracevote.deepconf.results import AggregateResult, PairedComparison, WorkingSets
from tracevote.report.auroc import auroc_lines

TIE_RULES = {"smallest": "the smallest answer wins", "first": "the answer met first in the working set wins",
             "fractional": "a t-way tie holding the gold scores 1/t"}
# One unit per quantity in every table, file and plot: accuracy (and its spread, interval and tie-rule share) in
# percent with two decimals, a difference of accuracies in points, tokens as completion tokens per problem; a key
# or column names its unit (_pct, _pts, _per_problem).
TABLE_COLUMNS = ("method", "label", "accuracy_pct", "std_pct", "fractional_pct", "tie_rule_pts", "ci_low_pct",
                 "ci_high_pct", "vs_cons_pts", "vs_cons_low_pts", "vs_cons_high_pts", "vs_cons_p", "working_sets")
ONLINE_COLUMNS = ("k", "method", "label", "percentile", "accuracy_pct", "std_pct", "ci_low_pct", "ci_high_pct",
                  "tokens_per_problem", "cons_tokens_per_problem", "saved_pct", "generated", "stopped",
                  "vs_cons_pts", "vs_cons_p")


@dataclass(frozen=True)
class Row:
    label: str
    method: str
    mean: float
    std: float
    fractional: float  # accuracy with ties scored 1/t (a uniform random tie-break's expectation)
    ci_low: float | None = None  # bootstrap interval of mean
    ci_high: float | None = None
    vs_cons: PairedComparison | None = None  # the method minus Cons@K on the same working sets

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
    if method.startswith("online_"):
        return f"DeepConf-{method.removeprefix('online_')} online@{k}"
    measure, _, top = method.partition("_top")
    return f"{measure}+top-{top}%@{k}" if top else f"{measure}@{k}"


def headline_rows(result: AggregateResult, k: int) -> list[Row]:
    if k not in result.k:
        raise ConfigError(f"report.k: {k} is not one of eval.k {list(result.k)}")
    rows = []
    for method in result.methods:
        accuracy = result.accuracy_at(method, k)
        rows.append(Row(method_label(method, k), method, accuracy.mean, accuracy.std, accuracy.fractional,
                        accuracy.ci_low, accuracy.ci_high, result.paired_at(method, k)))
    return rows


def online_rows(result: AggregateResult) -> list[dict[str, Any]]:
    """Every online method at every K it ran, as records with ONLINE_COLUMNS (accuracies in percent)."""
    records = []
    for row in result.online:
        versus = result.paired_at(row.method, row.k)
        records.append({"k": row.k, "method": row.method, "label": method_label(row.method, row.k),
                        "percentile": row.percentile, "accuracy_pct": pct(row.mean), "std_pct": pct(row.std),
                        "ci_low_pct": pct(row.ci_low), "ci_high_pct": pct(row.ci_high),
                        "tokens_per_problem": row.tokens, "cons_tokens_per_problem": row.cons_tokens,
                        "saved_pct": pct(row.savings), "generated": row.generated, "stopped": row.stopped,
                        "vs_cons_pts": None if versus is None else pct(versus.difference),
                        "vs_cons_p": None if versus is None else versus.p_value})
    return records


def pct(share: float | None) -> float | None:
    """A share (0.4567) in percent (45.67); None stays None. Unrounded: each writer rounds as it shows it."""
    return None if share is None else 100 * share


def percent(share: float | None) -> float | None:
    """A share in percent, to the two decimals every table shows (never -0.0): 0.456789 -> 45.68; None (a share of
    nothing) stays None."""
    return None if share is None else unsigned_zero(100 * share, 2)


def unsigned_zero(value: float, digits: int) -> float:
    """`value` rounded to `digits`, with -0.0 as 0.0: a difference of two equal accuracies can come out as
    -1e-17, which would print "-0.0 pts" and make `dvc exp show --only-changed` list an unchanged column."""
    return round(value, digits) + 0.0


def render(result: AggregateResult, k: int, *, simulated: bool, model: str | None = None) -> str:
    """The printed report: the pool's model, accuracy table at K, validity, ties, confidence summaries and AUROC."""
    lines = [f"*** {SIMULATED_BANNER} ***", ""] if simulated else []
    if model is not None:
        lines.append(f"Pool of {model}" + (" (simulated)" if simulated else ""))
    lines.append(f"Accuracy at K={k} over {result.validity.n_problems} problems, mean ± std over "
                 f"{result.repeat} repeats ({set_count(result.working_sets_at(k))} per problem); ties: "
                 f"{TIE_RULES[result.tie_break]} (eval.tie_break)")
    if result.bootstrap:
        lines.append(f"[{100 * result.ci_level:.0f}% bootstrap interval over problems (each with its mean over "
                     f"working sets), {result.bootstrap} resamples]; vs Cons@{k}: paired difference in points, its "
                     "interval and two-sided p (paired bootstrap)")
    lines += working_set_warnings(result)
    lines += _accuracy_lines(headline_rows(result, k))
    lines += _online_lines(result, k)
    lines += ["", *_validity_lines(result), f"Cons@{k} tie rate: {100 * result.tie_rate_at(k):.1f}% of working sets"]
    lines += ["", "Confidence (valid samples)    correct: mean [p10 p50 p90]  |  incorrect: mean [p10 p50 p90]"]
    lines += [_confidence_line(result, measure) for measure in result.measures]
    lines += ["", *auroc_lines(result, _num)]
    return "\n".join(lines)


def set_count(sets: WorkingSets) -> str:
    """"64 distinct working sets" when every problem has as many, "1 distinct working set", or the range
    "60-64 distinct working sets"."""
    count = str(sets.fewest) if sets.fewest == sets.most else f"{sets.fewest}-{sets.most}"
    return f"{count} distinct working {'set' if sets.most == 1 else 'sets'}"


def working_set_warnings(result: AggregateResult) -> list[str]:
    """A line for each K where some problem was voted on one working set only (with the default pool of 512,
    K=512): there the traces add nothing to the spread."""
    lines = []
    for sets in result.working_sets:
        if sets.no_trace_spread:
            lines.append(f"warning: K={sets.k} has one distinct working set per problem: its std is 0, and its "
                         "spread and interval reflect only the problems' resampling, not the traces'")
        elif sets.fewest == 1:
            lines.append(f"warning: K={sets.k} has one distinct working set for some problems: for those, its spread "
                         "and interval reflect only the problems' resampling, not the traces'")
    return lines


def _accuracy_lines(rows: list[Row]) -> list[str]:
    """One line per method; 'tie rule +x.x pts' beside Cons@K and any weighted method that tied."""
    width = max(len(row.label) for row in rows)
    lines = []
    for row in rows:
        line = f"  {row.label:<{width}}  {100 * row.mean:6.2f}%{_spread(row.std, row.ci_low, row.ci_high)}"
        if row.vs_cons is not None:
            line += f"  vs Cons {_versus(row.vs_cons)}"
        if row.shows_tie_rule():
            tie_rule = unsigned_zero(row.tie_rule_pts, 2)
            line += f"   fractional {100 * row.fractional:6.2f}%, tie rule {tie_rule:+.2f} pts"
        lines.append(line)
    return lines


def _spread(std: float, low: float | None, high: float | None) -> str:
    """" ± 1.25  [ 40.00,  60.00]": the std over working sets and the interval, in percent."""
    interval = "" if low is None or high is None else f"  [{100 * low:6.2f}, {100 * high:6.2f}]"
    return f" ± {100 * std:5.2f}{interval}"


def _versus(paired: PairedComparison) -> str:
    return (f"{100 * paired.difference:+6.2f} [{100 * paired.ci_low:+.2f}, {100 * paired.ci_high:+.2f}] "
            f"p={paired.p_value:.3f}")


def _online_lines(result: AggregateResult, k: int) -> list[str]:
    """Online DeepConf at K beside Cons@K: accuracy, tokens per problem, savings, early stops."""
    rows = [row for row in result.online if row.k == k]
    if not rows:
        if result.online_warmup is not None and k < result.online_warmup:
            return ["", f"Online DeepConf: no result at K={k}, below online.warmup ({result.online_warmup})"]
        return []
    consensus = "off" if result.online_consensus is None else f"tau {result.online_consensus}"
    cons = result.accuracy_at("cons", k)
    labels = [f"Cons@{k}", *(f"{method_label(row.method, k)} (p{row.percentile:g})" for row in rows)]
    width = max(len(label) for label in labels)
    spread = _spread(rows[0].std, rows[0].ci_low, rows[0].ci_high)  # every online row's is as wide
    lines = ["", f"Online DeepConf replayed on the pool at K={k} (warmup {result.online_warmup}, consensus stop "
                 f"{consensus}); tokens: completion tokens per problem",
             f"  {labels[0]:<{width}}  {100 * cons.mean:6.2f}%{'':<{len(spread)}}  tokens "
             f"{rows[0].cons_tokens:>10,.0f}"]
    for label, row in zip(labels[1:], rows, strict=True):
        versus = result.paired_at(row.method, k)
        line = (f"  {label:<{width}}  {100 * row.mean:6.2f}%{_spread(row.std, row.ci_low, row.ci_high)}  tokens "
                f"{row.tokens:>10,.0f}  {unsigned_zero(100 * row.savings, 1):5.1f}% saved, {row.stopped:.1f} of "
                f"{row.generated:.1f} traces stopped early")
        if versus is not None:
            line += f"  vs Cons {_versus(versus)}"
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
    """Every figure at K, flat: accuracies (`<method>_pct`, their std, interval and tie rule), the online methods'
    tokens and savings, tie rate, validity, AUROC. The short headline `dvc metrics show` reads is
    report.headline's."""
    summary: dict[str, Any] = {"simulated": simulated, "k": k, "repeat": result.repeat,
                               "working_sets": result.working_sets_at(k).fewest, "tie_break": result.tie_break}
    for row in headline_rows(result, k):
        summary.update(_accuracy_metrics(row.method, row.mean, row.std, row.ci_low, row.ci_high, row.vs_cons))
        if row.method != "pass1":
            summary[f"{row.method}_fractional_pct"] = percent(row.fractional)
            summary[f"{row.method}_tie_rule_pts"] = unsigned_zero(row.tie_rule_pts, 2)
    for online in (row for row in result.online if row.k == k):
        summary.update(_accuracy_metrics(online.method, online.mean, online.std, online.ci_low, online.ci_high,
                                         result.paired_at(online.method, k)))
        summary[f"{online.method}_tokens_per_problem"] = round(online.tokens, 1)
        summary[f"{online.method}_saved_pct"] = percent(online.savings)
        summary["cons_tokens_per_problem"] = round(online.cons_tokens, 1)
    summary["cons_tie_rate_pct"] = percent(result.tie_rate_at(k))
    summary.update(_validity_metrics(result))
    summary["token_signal"], summary["token_top_k"] = result.token_signal, result.top_k
    for a in result.auroc:
        name = f"auroc_{a.measure}" if a.signal == result.token_signal else f"auroc_{a.signal}_{a.measure}"
        summary[name] = None if a.per_problem_mean is None else round(a.per_problem_mean, 6)
        summary[f"{name}_pooled"] = None if a.pooled is None else round(a.pooled, 6)
    return summary




def _accuracy_metrics(method: str, mean: float, std: float, low: float | None, high: float | None,
                      versus: PairedComparison | None) -> dict[str, Any]:
    metrics: dict[str, Any] = {f"{method}_pct": percent(mean), f"{method}_std_pct": percent(std)}
    if low is not None and high is not None:
        metrics.update({f"{method}_ci_low_pct": percent(low), f"{method}_ci_high_pct": percent(high)})
    if versus is not None:
        metrics.update({f"{method}_vs_cons_pts": percent(versus.difference),
                        f"{method}_vs_cons_p": round(versus.p_value, 6)})
    return metrics


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
    """The headline table as records with TABLE_COLUMNS; accuracies in percent, differences in points; interval
    and comparison cells None where there are none (Cons@K against itself); working_sets the fewest distinct
    working sets of a problem at K (the same on every row)."""
    records = []
    sets = result.working_sets_at(k).fewest
    for row in headline_rows(result, k):
        versus = row.vs_cons
        records.append({"method": row.method, "label": row.label, "accuracy_pct": pct(row.mean),
                        "std_pct": pct(row.std), "fractional_pct": pct(row.fractional),
                        "tie_rule_pts": unsigned_zero(row.tie_rule_pts, 12), "ci_low_pct": pct(row.ci_low),
                        "ci_high_pct": pct(row.ci_high),
                        "vs_cons_pts": None if versus is None else pct(versus.difference),
                        "vs_cons_low_pts": None if versus is None else pct(versus.ci_low),
                        "vs_cons_high_pts": None if versus is None else pct(versus.ci_high),
                        "vs_cons_p": None if versus is None else versus.p_value, "working_sets": sets})
    return records


def table_csv(records: list[dict[str, Any]], columns: tuple[str, ...] = TABLE_COLUMNS) -> str:
    """CSV with a header of `columns`; floats with 6 decimals, None as an empty cell (core.csvtext: safe to open
    in a spreadsheet)."""
    return csv_text(columns, ([_cell(record[c], 6) for c in columns] for record in records))


def table_markdown(records: list[dict[str, Any]], k: int, tie_break: str, ci_level: float, *,
                   simulated: bool = False) -> str:
    """A Markdown table in percent, with a caption naming K, the tie rule and the intervals (after the SIMULATED
    banner for a simulated pool's)."""
    header = ("method", "label", "accuracy (%)", "std (%)", f"{100 * ci_level:.0f}% interval (%)", "fractional (%)",
              "tie rule (pts)", f"vs Cons@{k} (pts)", "p", "working sets")
    lines = [f"**{SIMULATED_BANNER}**", ""] if simulated else []
    lines += [f"Accuracy at K={k} (%), ties: {TIE_RULES[tie_break]}; fractional scores a t-way tie 1/t. Intervals: "
              "bootstrap over problems, each with its mean over working sets; vs Cons: paired difference [interval], "
              "paired bootstrap p; working sets: the fewest distinct working sets of a problem.",
              "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for record in records:
        versus = "" if record["vs_cons_pts"] is None else (f"{record['vs_cons_pts']:+.2f} "
                                                            f"[{record['vs_cons_low_pts']:+.2f}, "
                                                            f"{record['vs_cons_high_pts']:+.2f}]")
        cells = [md_text(record["method"]), md_text(record["label"]), f"{record['accuracy_pct']:.2f}",
                 f"{record['std_pct']:.2f}",
                 _interval(record["ci_low_pct"], record["ci_high_pct"]), f"{record['fractional_pct']:.2f}",
                 f"{record['tie_rule_pts']:+.2f}", versus,
                 "" if record["vs_cons_p"] is None else f"{record['vs_cons_p']:.3f}",
                 "all" if record["working_sets"] is None else str(record["working_sets"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def online_markdown(records: list[dict[str, Any]], result: AggregateResult, *, simulated: bool) -> str:
    """The paper's online table layout: per K, Cons@K's accuracy and tokens, then each online method's
    accuracy, tokens and token savings. Tokens per problem, as every other table gives them (the paper sums
    them over the dataset: multiply by the problem count the caption gives)."""
    methods = list(result.online_methods)
    header = ["K", "Cons@K accuracy (%)", "Cons@K tokens / problem"]
    for method in methods:
        name = method_label(method, "K")
        header += [f"{name} accuracy (%) [{100 * result.ci_level:.0f}% interval]", f"{name} tokens / problem",
                   f"{name} saved (%)"]
    consensus = "off" if result.online_consensus is None else f"tau {result.online_consensus}"
    lines = [f"**{SIMULATED_BANNER}**", ""] if simulated else []
    lines += [f"Online DeepConf replayed on the pool: warmup {result.online_warmup}, consensus stop {consensus}; "
              f"accuracy (%) mean over {result.repeat} working sets per problem of {result.validity.n_problems} "
              "problems; tokens: completion tokens per problem (mean over working sets).", "",
              "| " + " | ".join(header) + " |", "|" + "---:|" * len(header)]
    for k in sorted({r["k"] for r in records}):
        at_k = {r["method"]: r for r in records if r["k"] == k}
        cons = result.accuracy_at("cons", k)
        cells = [str(k), f"{100 * cons.mean:.2f}", _tokens(next(iter(at_k.values()))["cons_tokens_per_problem"])]
        for method in methods:
            row = at_k[method]
            cells += [f"{row['accuracy_pct']:.2f} {_interval(row['ci_low_pct'], row['ci_high_pct'])}",
                      _tokens(row["tokens_per_problem"]), f"{unsigned_zero(row['saved_pct'], 1):.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _tokens(value: float) -> str:
    return f"{value:,.0f}"


def _interval(low_pct: float | None, high_pct: float | None) -> str:
    return "" if low_pct is None or high_pct is None else f"[{low_pct:.2f}, {high_pct:.2f}]"


def _cell(value: Any, decimals: int) -> str:
    if value is None:
        return ""
    return f"{value:.{decimals}f}" if isinstance(value, float) else str(value)


def problem_results(result: AggregateResult, k: int, problems: list[Problem], *, simulated: bool) -> dict[str, Any]:
    """Per problem at K: gold answer, and per method its accuracy over repeats (in percent) and usual prediction."""
    by_problem: dict[str, dict[str, Any]] = {p.id: {"id": p.id, "gold": p.answer, "methods": {}} for p in problems}
    for row in result.problems:
        if row.k == k and row.problem_id in by_problem:
            by_problem[row.problem_id]["methods"][row.method] = {
                "accuracy_pct": pct(row.accuracy), "prediction": row.prediction, "answered": row.answered}
    return {"simulated": simulated, "k": k, "repeat": result.repeat,
            "working_sets": result.working_sets_at(k).fewest, "problems": list(by_problem.values())}
