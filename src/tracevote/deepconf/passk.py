"""pass@k and avg@k, as lm-evaluation-harness reports them beside its AIME tasks, from each problem's pool.

A problem's pool holds n samples, c of them correct (an invalid sample is a wrong one, as in Pass@1). For each K of
eval.k (every K is at most the smallest pool: the aggregate refuses a larger one first):

- pass@K = 1 - C(n-c, K)/C(n, K), the unbiased estimator of Chen et al. 2021 ("Evaluating Large Language Models
  Trained on Code", eq. 1): the chance that a working set of K distinct samples holds at least one correct one.
  Computed as 1 - prod_{i=n-c+1..n} (1 - K/i), their numerically stable product (no factorials), as
  lm-evaluation-harness's `_pass_at_k` (lm_eval/tasks/cruxeval/utils.py) and Hugging Face's code_eval compute it.
  `pass_at_k(4, 1, 2)` is 1 - C(3,2)/C(4,2) = 1 - 3/6 = 0.5.
- avg@K = the mean correctness of a working set's K samples (the `avg_at_k` of lm-evaluation-harness's AIME pull
  request below: correct among the K samples, over K). Over the pool's working sets its mean is c/n, Pass@1 over
  the whole pool, whatever K; what K changes is its spread: one working set's avg@K scatters around c/n with std
  sqrt(c/n (1 - c/n) / K * (n-K)/(n-1)) (the hypergeometric draw's, 0 at K = n). lm-evaluation-harness scores its
  avg@k on one set (the first k of its repeats) and reports only the spread over problems (the standard error of
  the mean over documents); we report the mean over all sets and, besides the bootstrap interval over problems, this
  spread over working sets: how far an avg@K from a single set of K samples per problem can land from Pass@1.

Relation to the aggregate's working sets (tracevote.deepconf.evaluate): both are exact means over all C(n, K) working
sets of a problem, where Cons@K and the other methods average over eval.repeat sets drawn at random (independently,
so possibly repeated). The aggregate's own `pass1` at K is avg@K on those drawn sets: its mean estimates avg_at_k and
its std over repeats estimates avg_at_k_std. Over problems, pass@K and avg@K are means of the problems' values, and
their std is that of the mean when each problem contributes one working set drawn independently:
sqrt(sum of the problems' variances) / problems.

Departure from lm-evaluation-harness: its AIME pass@k (pull request #3510, the tasks aime*_pass_avg_32 with
k = 1, 2, 4, 8, 16, 32 and 32 repeats; main's AIME tasks print exact_match of one greedy sample) scores a problem 1
when one of the first k samples is right: one working set, an unbiased but noisier estimate whose mean over orders
of the samples is this estimator (tests/deepconf/test_passk.py checks both by enumeration).
"""

from __future__ import annotations

import math

import numpy as np

from tracevote.core.errors import ConfigError, DataError
from tracevote.deepconf.results import PassAtK, ProblemPassAtK
from tracevote.deepconf.uncertainty import intervals
from tracevote.deepconf.working_sets import pool_too_small


def pass_at_k(n: int, c: int, k: int) -> float:
    """1 - C(n-c, k)/C(n, k): the chance that k of n samples, c of them correct, drawn without replacement hold a
    correct one.

    >>> pass_at_k(4, 1, 2), pass_at_k(4, 0, 2), pass_at_k(4, 3, 2)
    (0.5, 0.0, 1.0)
    """
    _check_counts(n, c, k)
    if n - c < k:  # every set of k holds a correct sample
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1, dtype=np.float64)))


def avg_at_k_std(n: int, c: int, k: int) -> float:
    """Std of the mean correctness of k of n samples (c correct) drawn without replacement; 0.0 at k = n.

    >>> round(avg_at_k_std(4, 2, 2), 4), avg_at_k_std(4, 2, 4)  # sqrt(0.25 / 2 * 2 / 3)
    (0.2887, 0.0)
    """
    _check_counts(n, c, k)
    if n == 1:
        return 0.0
    share = c / n
    return math.sqrt(share * (1 - share) / k * (n - k) / (n - 1))


def _check_counts(n: int, c: int, k: int) -> None:
    if not 0 <= c <= n:
        raise DataError(f"pass@k: {c} correct samples of {n} (the correct ones must number 0 to n)")
    if not 1 <= k <= n:
        raise ConfigError(f"pass@k: k={k} with a pool of n={n} samples; k must be 1 to n (eval.k at most the pool)")


def problem_pass_at_k(problem_id: str, correct: np.ndarray, k: int) -> ProblemPassAtK:
    """pass@k and avg@k of one problem from its pool's correctness (bool [n]); a K above the pool is the aggregate's
    own refusal (eval.k: K=... is larger than the pool of problem ...)."""
    n, c = len(correct), int(np.count_nonzero(correct))
    if k > n:
        raise pool_too_small(k, problem_id, n)
    return ProblemPassAtK(problem_id=problem_id, k=k, samples=n, correct=c, pass_at_k=pass_at_k(n, c, k),
                          avg_at_k=c / n, avg_at_k_std=avg_at_k_std(n, c, k))


def over_problems(rows: list[ProblemPassAtK], weights: np.ndarray, level: float) -> PassAtK:
    """The problems' pass@K and avg@K at one K (rows: every problem's, in the aggregate's order) as means over
    problems, their std over working sets, and the bootstrap interval of the aggregate's `weights` [resamples,
    problems] (the resamples every method at K shares)."""
    passes = np.array([row.pass_at_k for row in rows])
    averages = np.array([row.avg_at_k for row in rows])
    spread = intervals(np.stack([passes, averages])[:, :, None], weights, level) if len(weights) else None
    # subtle: a problem's pass@K over its working sets is a coin of chance pass@K, so its variance is p(1-p)
    pass_variance = np.sum(passes * (1 - passes))
    avg_variance = np.sum(np.square([row.avg_at_k_std for row in rows]))
    return PassAtK(k=rows[0].k, pass_at_k=float(passes.mean()), pass_at_k_std=math.sqrt(pass_variance) / len(rows),
                   avg_at_k=float(averages.mean()), avg_at_k_std=math.sqrt(avg_variance) / len(rows),
                   pass_at_k_ci_low=None if spread is None else float(spread.low[0]),
                   pass_at_k_ci_high=None if spread is None else float(spread.high[0]),
                   avg_at_k_ci_low=None if spread is None else float(spread.low[1]),
                   avg_at_k_ci_high=None if spread is None else float(spread.high[1]))
