"""The study: several models' DeepConf runs on one dataset as points of accuracy against dollars per problem, the
frontier of the cheapest way to each accuracy, and each model against a reference model on the same problems.

A point is one (model, method, K). Voting at K pays for K traces of the model: K prompts and K traces' completion
tokens (the mean over problems of each problem's mean, as report.compare counts); DeepConf's offline filtering keeps
a share of traces already paid for, so it costs what Cons@K costs; Pass@1 is one trace; online DeepConf (replayed on
the pool) pays for the traces it started and the tokens they wrote before they stopped. Dollars are at the model's
endpoint pricing, every input token at the cache-miss price (core.costs.usd), as the estimate prices a build.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tracevote.core.config_endpoints import PricingConfig
from tracevote.core.costs import usd
from tracevote.deepconf.results import AggregateResult
from tracevote.deepconf.uncertainty import bootstrap_rng, paired, resample_weights


@dataclass(frozen=True)
class ModelRun:
    """One model's DeepConf run on the dataset, as the study reads it."""

    endpoint: str  # the key of endpoints:
    result: AggregateResult
    tokens_per_trace: float  # completion tokens
    prompt_tokens: float  # what one trace's prompt was billed, the mean over problems
    pricing: PricingConfig
    simulated: bool

    def usd_per_problem(self, traces: float, completion_tokens: float) -> float:
        """Dollars per problem for `traces` traces that wrote `completion_tokens` in all."""
        return usd(traces * self.prompt_tokens, completion_tokens, self.pricing)  # type: ignore[arg-type]


@dataclass(frozen=True)
class StudyPoint:
    """One (model, method, K) of the study's table; accuracy as a fraction, costs per problem."""

    model: str
    method: str
    k: int | None  # None for the debate (no K)
    accuracy: float
    ci_low: float | None  # the bootstrap interval at eval.ci_level; None where there is none
    ci_high: float | None
    tokens: float  # completion tokens per problem
    usd: float  # dollars per problem
    problems: int


@dataclass(frozen=True)
class ModelDifference:
    """`model` minus `reference` for one method at K, on the problems both ran: accuracy difference (a fraction),
    its bootstrap interval over problems and the two-sided paired-bootstrap p-value (deepconf.uncertainty)."""

    model: str
    reference: str
    method: str
    k: int
    problems: int
    difference: float
    ci_low: float
    ci_high: float
    p_value: float


def run_points(run: ModelRun, ks: Sequence[int]) -> list[StudyPoint]:
    """Pass@1 (one trace, its estimate over the largest K, which uses the most of the pool), every other voting
    method at each of `ks` above 1, and every online method at each of `ks` it ran at (K >= online.warmup)."""
    result = run.result
    problems = result.validity.n_problems
    pass1 = result.accuracy_at("pass1", max(result.k))
    points = [StudyPoint(run.endpoint, "pass1", 1, pass1.mean, pass1.ci_low, pass1.ci_high, run.tokens_per_trace,
                         run.usd_per_problem(1, run.tokens_per_trace), problems)]
    for k in ks:
        tokens = k * run.tokens_per_trace
        # subtle: at K 1 every vote is one trace's answer, which Pass@1 already counts (over the whole pool)
        for method in (m for m in result.methods if m != "pass1" and k > 1):
            row = result.accuracy_at(method, k)
            points.append(StudyPoint(run.endpoint, method, k, row.mean, row.ci_low, row.ci_high, tokens,
                                     run.usd_per_problem(k, tokens), problems))
        for method in result.online_methods:
            online = result.online_at(method, k)
            if online is not None:
                points.append(StudyPoint(run.endpoint, method, k, online.mean, online.ci_low, online.ci_high,
                                         online.tokens, run.usd_per_problem(online.generated, online.tokens),
                                         problems))
    return points


# subtle: two methods with the same right answers can differ in the last bit (0.8385416666666667 from a mean over
# working sets, 0.8385416666666666 from online's): closer than this they are the same accuracy
SAME_ACCURACY = 1e-9


def frontier(dollars: np.ndarray, accuracy: np.ndarray) -> np.ndarray:
    """bool [points]: the cheapest way to each accuracy. A point is on it when every cheaper point is less accurate;
    of points at one price the most accurate, and of equal points the first.

    >>> frontier(np.array([1.0, 2.0, 3.0, 2.0]), np.array([0.5, 0.4, 0.7, 0.6]))
    array([ True, False,  True,  True])
    """
    order = np.lexsort((np.arange(len(dollars)), -accuracy, dollars))  # by price, then best first, then first met
    ordered = accuracy[order]
    best_before = np.maximum.accumulate(np.concatenate(([-np.inf], ordered[:-1])))
    on = np.zeros(len(dollars), dtype=bool)
    on[order] = ordered > best_before + SAME_ACCURACY
    return on


def paired_differences(runs: Sequence[ModelRun], reference: str, ks: Sequence[int], *, resamples: int, seed: int,
                       level: float) -> list[ModelDifference]:
    """Each model but `reference` against it, per voting method at each of `ks` above 1 (Pass@1 once, at K 1, from the
    largest K's per-problem figures), on the problems both ran; every method at one K sees the same resamples."""
    base = next(run for run in runs if run.endpoint == reference)
    differences = []
    for run in (run for run in runs if run.endpoint != reference):
        voting = [m for m in run.result.methods if m in base.result.methods and m != "pass1"]
        differences += _paired_at(run, base, ["pass1"], max(run.result.k), 1, resamples, seed, level)
        for k in (k for k in ks if k > 1):
            differences += _paired_at(run, base, voting, k, k, resamples, seed, level)
    return differences


def _paired_at(run: ModelRun, base: ModelRun, methods: Sequence[str], k: int, label: int, resamples: int,
               seed: int, level: float) -> list[ModelDifference]:
    if not methods or k not in base.result.k:
        return []
    own, theirs = per_problem(run.result, methods, k), per_problem(base.result, methods, k)
    shared = sorted(set(own) & set(theirs))
    if not shared:
        return []
    diff = np.array([[own[p][i] - theirs[p][i] for p in shared] for i in range(len(methods))])[:, :, None]
    weights = resample_weights(len(shared), resamples, bootstrap_rng(seed, label))
    test = paired(diff, np.zeros((len(shared), 1)), weights, level)
    return [ModelDifference(run.endpoint, base.endpoint, method, label, len(shared), float(test.difference[i]),
                            float(test.low[i]), float(test.high[i]), float(test.p_value[i]))
            for i, method in enumerate(methods)]


def per_problem(result: AggregateResult, methods: Sequence[str], k: int) -> dict[str, list[float]]:
    """problem id -> each method's accuracy at K on it (the mean over its working sets)."""
    index = {method: i for i, method in enumerate(methods)}
    table: dict[str, list[float]] = {}
    for row in result.problems:
        if row.k == k and row.method in index:
            table.setdefault(row.problem_id, [np.nan] * len(methods))[index[row.method]] = row.accuracy
    return table
