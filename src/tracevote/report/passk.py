"""pass@K and avg@K in the report (tracevote.deepconf.passk computes them): two rows after the methods in the results
table at report.k, their figures in summary.json, and a line per K of eval.k in the printed report.

They are not votes: pass@K is the chance that one of K samples is right (what a perfect verifier would reach), avg@K
their mean correctness. Each is an exact mean over every working set of K samples, so their `std` is over working
sets (one per problem) by formula, and their `working_sets` cell is empty: all of them.
"""

from __future__ import annotations

from typing import Any

from tracevote.deepconf.results import AggregateResult, PassAtK
from tracevote.report.tables import pct, percent

TABLE_NOTE = ("pass@K, avg@K (lm-evaluation-harness's; not votes): exact means over every working set of K samples "
              "of each problem's pool of n, c right: pass@K = 1 - C(n-c, K)/C(n, K), the chance one of K is right; "
              "avg@K = c/n, their mean correctness (Pass@1 over the whole pool), its std what one working set per "
              "problem scatters it by.")


def figures(row: PassAtK) -> dict[str, tuple[float, float, float | None, float | None]]:
    """{name: (mean, std, ci_low, ci_high)} of pass@K and avg@K, as shares."""
    return {"pass_at_k": (row.pass_at_k, row.pass_at_k_std, row.pass_at_k_ci_low, row.pass_at_k_ci_high),
            "avg_at_k": (row.avg_at_k, row.avg_at_k_std, row.avg_at_k_ci_low, row.avg_at_k_ci_high)}


def label(name: str, k: int) -> str:
    """"pass_at_k" -> "pass@64"; "avg_at_k" -> "avg@64"."""
    return f"{name.removesuffix('_at_k')}@{k}"


def table_records(result: AggregateResult, k: int) -> list[dict[str, Any]]:
    """The results table's rows (tables.TABLE_COLUMNS) of pass@K and avg@K at K; none for an aggregate without
    them. No tie and no comparison with Cons@K: fractional is the accuracy, the tie rule 0 points."""
    row = result.pass_at_k_at(k)
    if row is None:
        return []
    return [{"method": name, "label": label(name, k), "accuracy_pct": pct(mean), "std_pct": pct(std),
             "fractional_pct": pct(mean), "tie_rule_pts": 0.0, "ci_low_pct": pct(low), "ci_high_pct": pct(high),
             "vs_cons_pts": None, "vs_cons_low_pts": None, "vs_cons_high_pts": None, "vs_cons_p": None,
             "working_sets": None}
            for name, (mean, std, low, high) in figures(row).items()]


def summary_metrics(result: AggregateResult, k: int) -> dict[str, float | None]:
    """pass_at_k_pct, pass_at_k_std_pct, pass_at_k_ci_low_pct, pass_at_k_ci_high_pct, and the same for avg_at_k."""
    row = result.pass_at_k_at(k)
    if row is None:
        return {}
    metrics: dict[str, float | None] = {}
    for name, (mean, std, low, high) in figures(row).items():
        metrics |= {f"{name}_pct": percent(mean), f"{name}_std_pct": percent(std)}
        if low is not None and high is not None:
            metrics |= {f"{name}_ci_low_pct": percent(low), f"{name}_ci_high_pct": percent(high)}
    return metrics


def report_lines(result: AggregateResult) -> list[str]:
    """The printed report's block: pass@K and avg@K at every K, mean ± std over working sets [interval]."""
    if not result.pass_at_k:
        return []
    lines = ["", "pass@K and avg@K (lm-evaluation-harness's), exact over every working set of K samples per "
                 "problem: mean ± std over working sets" + (" [bootstrap interval]" if result.bootstrap else "")]
    for row in result.pass_at_k:
        cells = [f"{label(name, row.k):>9} {_figure(mean, std, low, high)}"
                 for name, (mean, std, low, high) in figures(row).items()]
        lines.append("  " + "   ".join(cells))
    return lines


def _figure(mean: float, std: float, low: float | None, high: float | None) -> str:
    interval = "" if low is None or high is None else f"  [{100 * low:6.2f}, {100 * high:6.2f}]"
    return f"{100 * mean:6.2f}% ± {100 * std:5.2f}{interval}"
