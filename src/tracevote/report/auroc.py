"""The report's AUROC table: how well each trace measure of each token signal tells right from wrong traces."""

from __future__ import annotations

from collections.abc import Callable

from tracevote.deepconf.results import AggregateResult

WITHIN = "within problems: mean over the (N) problems with both right and wrong traces"
POOLED = "pooled over all traces"


def auroc_lines(result: AggregateResult, number: Callable[[float | None], str]) -> list[str]:
    """Per token signal and measure, the within-problem and the pooled AUROC side by side; the signal the votes
    use (confidence.token) first and marked *. Within problems says whether the measure ranks a problem's right
    traces above its wrong ones; pooled mixes problems, so easy problems' surer traces count too."""
    k = "all kept" if result.top_k is None else result.top_k
    lines = [f"AUROC, correct vs incorrect valid traces; * the token signal the votes use (confidence.token: "
             f"{result.token_signal}, top_k {k})", f"  {WITHIN}  |  {POOLED}",
             f"  {'signal':<10} {'measure':<10} within (N)  |  pooled"]
    for a in result.auroc:
        mark = "*" if a.signal == result.token_signal else " "
        lines.append(f"  {a.signal + ' ' + mark:<10} {a.measure:<10} {number(a.per_problem_mean)} ({a.n_problems})"
                     f"  |  {number(a.pooled)}")
    return lines
