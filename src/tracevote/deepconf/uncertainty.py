"""How sure an accuracy is: bootstrap intervals, and paired comparisons against Cons@K.

The data at one K is a cube correct[method, problem, repeat]: a method's correctness on repeat r (one
working set) of problem p. Accuracy is its mean. The data were drawn in two stages, problems and then
working sets within each problem, and the bootstrap resamples problems with replacement, each carrying the
mean over its working sets. That one stage captures the variance of both: a problem's mean already varies
with its working sets. Resampling the working sets again inside each drawn problem would count their
variance twice (Davison & Hinkley 1997, §3.8). We measured this: with both stages resampled, the paired
test's p-values under two alike methods were far from uniform (KS distance 0.19 in
tests/deepconf/test_uncertainty.py's setting) and the intervals were too wide. Every method at one K sees
the same resamples, so differences between methods are paired.

Paired comparison of a method with Cons@K at the same K, on the same working sets: the mean difference
d of correct[method] - correct[cons], its percentile interval, and a two-sided paired-bootstrap p-value:
the share of resampled differences at least |d| away from d (the bootstrap distribution shifted to the
null of no difference; Efron & Tibshirani 1993, §16.4), counted as (1 + hits) / (1 + resamples).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BOOTSTRAP_STREAM = 0xB0  # spawn_key component that keeps the bootstrap's draws apart from the working sets'


@dataclass(frozen=True, eq=False)
class Interval:
    mean: np.ndarray  # float64 [methods]
    low: np.ndarray  # float64 [methods]
    high: np.ndarray


@dataclass(frozen=True, eq=False)
class Paired:
    difference: np.ndarray  # float64 [methods]: mean of method - baseline
    low: np.ndarray
    high: np.ndarray
    p_value: np.ndarray


def resample_weights(n_problems: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """float64 [resamples, problems]: how often each problem is drawn in each resample (rows sum to problems)."""
    return rng.multinomial(n_problems, np.full(n_problems, 1 / n_problems), size=resamples).astype(np.float64)


def bootstrap_rng(seed: int, k: int) -> np.random.Generator:
    """The bootstrap's generator at K, independent of the working sets' generators (seeded by eval.seed)."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(BOOTSTRAP_STREAM, k)))


def intervals(correct: np.ndarray, weights: np.ndarray, level: float) -> Interval:
    """Mean and percentile interval of each method's accuracy; correct is [methods, problems, repeats]."""
    flat = correct.mean(axis=2)  # [methods, problems]
    resampled = weights @ flat.T / flat.shape[1]  # [resamples, methods]
    low, high = _percentiles(resampled, level)
    return Interval(mean=flat.mean(axis=1), low=low, high=high)


def paired(correct: np.ndarray, baseline: np.ndarray, weights: np.ndarray, level: float) -> Paired:
    """Each method of `correct` [methods, problems, repeats] against `baseline` [problems, repeats]."""
    differences = (correct - baseline[None]).mean(axis=2)
    observed = differences.mean(axis=1)
    resampled = weights @ differences.T / differences.shape[1]
    low, high = _percentiles(resampled, level)
    # subtle: the tolerance keeps an exact 0 difference from losing hits to rounding in the matmul
    hits = (np.abs(resampled - observed) >= np.abs(observed) - 1e-12).sum(axis=0)
    return Paired(difference=observed, low=low, high=high, p_value=(1 + hits) / (1 + len(weights)))


def _percentiles(resampled: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(resampled, [tail, 100 - tail], axis=0)
    return low, high
