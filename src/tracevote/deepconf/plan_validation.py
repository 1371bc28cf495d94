"""How far the plan's predictions are off, measured on problems the confidence model never saw.

The pilot's problems are split into folds. For each fold the confidence model is fitted on the other folds' problems
and the plan predicts the held-out problems' accuracy at the pilot's K and below (K = n, n/2, n/4, down to 2: each
problem's traces drawn with the Bayesian bootstrap and given fresh confidences, as at a larger K); what it is
compared with is the held-out problems' own vote on their real traces with their real confidences (at K = n the
whole pilot, below it random subsets of K traces). Each (fold, K) is one error, predicted minus measured, of each
method's accuracy over the fold's problems. A prediction's margin is the `level` quantile of those errors' size;
the difference between two methods has its own margin from the errors of the difference.

The errors are of a mean over one fold's problems, so they carry that fold's own luck: the margin is wider than the
error of a mean over all the pilot's problems (docs/planning.md#how-close-the-plan-comes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracevote.core.config_deepconf import EvalConfig
from tracevote.core.errors import ConfigError
from tracevote.deepconf.evaluate import ProblemScores, method_names, vote_sets
from tracevote.deepconf.plan import Projection, draw_outcomes
from tracevote.deepconf.plan_confidence import ConfidenceModel

VALIDATION_STREAM = 0xCF  # spawn_key component of the folds' and the measured subsets' draws
FOLDS = 5


@dataclass(frozen=True, eq=False)
class Validation:
    methods: tuple[str, ...]
    ks: tuple[int, ...]  # the K each error was measured at
    folds: int
    level: float
    errors: np.ndarray  # float64 [methods, folds * len(ks)]: predicted minus measured, a fold's mean accuracy

    def margin(self, method: str) -> float:
        """How far one method's prediction may be off: the `level` quantile of its errors' size."""
        return float(np.quantile(np.abs(self.errors[self.methods.index(method)]), self.level))

    def difference_margin(self, a: str, b: str) -> float:
        """How far the predicted difference `b` - `a` may be off."""
        errors = self.errors[self.methods.index(b)] - self.errors[self.methods.index(a)]
        return float(np.quantile(np.abs(errors), self.level))


def validation_ks(traces: int) -> tuple[int, ...]:
    """The pilot's K and two halvings, none below 2: validation_ks(16) -> (16, 8, 4); validation_ks(2) -> (2,)."""
    return tuple(k for k in (traces, traces // 2, traces // 4) if k >= 2) or (traces,)


def cross_validate(problems: list[ProblemScores], cfg: EvalConfig, draws: int, measures: tuple[str, ...],
                   folds: int = FOLDS) -> Validation:
    """The plan's errors on held-out problems (module docstring)."""
    if len(problems) < 2:
        raise ConfigError(f"the pilot has {len(problems)} problem: holding problems out to measure the plan's error "
                          "needs at least 2")
    folds = min(folds, len(problems))
    order = np.random.default_rng(np.random.SeedSequence(cfg.seed, spawn_key=(VALIDATION_STREAM,))).permutation(
        len(problems))
    ks = validation_ks(min(len(problem) for problem in problems))
    errors = []
    for fold in range(folds):
        held = set(order[fold::folds].tolist())
        model = ConfidenceModel.fit([p for i, p in enumerate(problems) if i not in held], len(measures))
        out = [problems[i] for i in sorted(held)]
        for k in ks:
            predicted = np.mean([draw_outcomes(p, model.for_problem(p), k, cfg, draws, measures).mean(axis=1)
                                 for p in out], axis=0)
            measured = np.mean([_subset_outcomes(p, k, cfg, draws, measures) for p in out], axis=0)
            errors.append(predicted - measured)
    return Validation(methods=method_names(measures, cfg.etas), ks=ks, folds=folds, level=cfg.ci_level,
                      errors=np.stack(errors, axis=1))


def _subset_outcomes(problem: ProblemScores, k: int, cfg: EvalConfig, draws: int,
                     measures: tuple[str, ...]) -> np.ndarray:
    """float64 [methods]: each method's mean outcome on the problem's real traces, all of them at K = n, else
    `draws` random subsets of K."""
    n = len(problem)
    if k >= n:
        sets = np.arange(n)[None]
    else:
        seed = np.random.SeedSequence(cfg.seed, spawn_key=(VALIDATION_STREAM, k, *problem.problem_id.encode("utf-8")))
        sets = np.random.default_rng(seed).permuted(np.tile(np.arange(n), (draws, 1)), axis=1)[:, :k]
    return vote_sets(problem, sets, cfg.etas, measures, cfg.tie_break).correct.mean(axis=1)


def predicted_interval(low: float, high: float, margin: float) -> tuple[float, float]:
    """A study's interval widened by the cross-validated margin on each side, within 0 to 1."""
    return max(0.0, low - margin), min(1.0, high + margin)


def first_traces_vote(problems: list[ProblemScores], k: int, cfg: EvalConfig,
                      measures: tuple[str, ...]) -> np.ndarray:
    """float64 [methods]: each method's accuracy over `problems` when each votes once on its first `k` traces (the
    pool a study at pool.n_pool = k keeps: a top-up keeps the first traces)."""
    return np.mean([vote_sets(p, np.arange(k)[None], cfg.etas, measures, cfg.tie_break).correct[:, 0]
                    for p in problems], axis=0)


@dataclass(frozen=True)
class Checked:
    """One prediction against the run it predicts."""

    method: str
    k: int
    predicted: float
    low: float
    high: float
    measured: float

    @property
    def inside(self) -> bool:
        return self.low <= self.measured <= self.high


def check_against(measured: list[ProblemScores], projections: list[Projection], validation: Validation, cfg: EvalConfig,
                  measures: tuple[str, ...]) -> list[Checked]:
    """Each projection at a K every measured problem holds, method by method, against the vote on each problem's
    first K traces."""
    fewest = min(len(problem) for problem in measured)
    rows = []
    for projection in (p for p in projections if p.k <= fewest):
        votes = first_traces_vote(measured, projection.k, cfg, measures)
        for i, method in enumerate(projection.methods):
            low, high = predicted_interval(float(projection.low[i]), float(projection.high[i]),
                                           validation.margin(method))
            rows.append(Checked(method, projection.k, float(projection.accuracy[i]), low, high, float(votes[i])))
    return rows
