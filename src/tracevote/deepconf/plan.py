"""A study planned from a pilot: each method's accuracy and interval width at a larger K, and the problems needed to
tell two methods apart, predicted by resampling the pilot's traces.

The pilot is a score table of P problems and n traces each. A study at K builds a pool of K traces a problem and
votes once on all of them (the aggregate's whole-pool set at K = pool.n_pool). One draw stands in for that pool: K of
the problem's n pilot traces drawn with replacement (a bootstrap of its traces: the pilot's answers stand in for the
model's), each given a fresh confidence (ConfidenceModel), on which every method votes with the aggregate's own rules
(evaluate.vote_sets).

- accuracy at K: the mean over problems and draws.
- interval width at K on the pilot's P problems: each draw index is one simulated study (one draw a problem), its
  interval bootstrapped as the aggregate bootstraps its own (uncertainty.intervals, eval.bootstrap resamples of the
  problems, eval.ci_level); the mean width over studies. At N problems the width is that times sqrt(P / N), as a
  percentile interval of a mean over N problems narrows.
- problems to tell methods a and b apart by δ with power 1-β at two-sided level α = 1 - eval.ci_level, paired over
  problems: N = ((z(1-α/2) + z(1-β)) σ / δ)², σ the standard deviation of one problem's difference of outcomes in
  one study, over the pilot's problems and draws (both how problems differ and how a pool's vote varies).

Widths are for the whole-pool vote: an aggregate at K below the pool size averages over working sets, which narrows
the interval a little; the plan leaves that out (it errs wide). docs/planning.md has the calibration.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from tracevote.core.config_deepconf import EvalConfig
from tracevote.core.errors import ConfigError
from tracevote.deepconf.evaluate import ProblemScores, method_names, vote_sets
from tracevote.deepconf.uncertainty import bootstrap_rng, intervals, resample_weights

PLAN_STREAM = 0x91A  # spawn_key component that keeps the plan's draws apart from the working sets' and bootstrap's


@dataclass(frozen=True, eq=False)
class Projection:
    """Every method at K, from `draws` simulated studies on the pilot's problems."""

    k: int
    methods: tuple[str, ...]
    correct: np.ndarray  # float64 [methods, problems, draws]: a method's outcome on one draw of K traces
    width: np.ndarray  # float64 [methods]: mean interval width of a study on the pilot's problems

    @property
    def problems(self) -> int:
        return self.correct.shape[1]

    @property
    def accuracy(self) -> np.ndarray:
        """float64 [methods]: the mean outcome over problems and draws."""
        return self.correct.mean(axis=(1, 2))

    def index(self, method: str) -> int:
        if method not in self.methods:
            raise ConfigError(f"method {method!r}: not one the aggregate reports (there are: "
                              f"{', '.join(self.methods)})")
        return self.methods.index(method)

    def width_at(self, method: str, n_problems: int) -> float:
        """The interval width of `method` in a study of `n_problems` problems."""
        return float(self.width[self.index(method)] * math.sqrt(self.problems / n_problems))

    def problems_for_width(self, method: str, target: float) -> int | None:
        """The fewest problems whose interval of `method` is at most `target` wide; None when the pilot's never
        varies (every study alike: no count of problems changes it)."""
        width = float(self.width[self.index(method)])
        if width == 0:
            return None
        return max(1, math.ceil(self.problems * (width / target) ** 2))

    def difference_sd(self, a: str, b: str) -> float:
        """The standard deviation of one problem's outcome of `a` minus `b` in one study."""
        return float((self.correct[self.index(a)] - self.correct[self.index(b)]).std())

    def problems_to_detect(self, a: str, b: str, difference: float, power: float, level: float) -> int | None:
        """Problems a paired test at two-sided level 1 - `level` needs to find `a` and `b` apart by `difference`
        (accuracy, 0.05 for 5 points) with chance `power`; None when they never disagree on the pilot."""
        sd = self.difference_sd(a, b)
        if sd == 0:
            return None
        normal = NormalDist()
        z = normal.inv_cdf(1 - (1 - level) / 2) + normal.inv_cdf(power)
        return max(2, math.ceil((z * sd / difference) ** 2))


def project(problems: list[ProblemScores], k: int, cfg: EvalConfig, draws: int,
            measures: tuple[str, ...]) -> Projection:
    """Every method at `k` from `draws` draws of each pilot problem (module docstring)."""
    if draws < 2:
        raise ConfigError(f"draws: {draws} is too few to bootstrap a width (at least 2)")
    model = ConfidenceModel.fit(problems, len(measures))
    correct = np.stack([_draw_outcomes(problem, model.for_problem(p), k, cfg, draws, measures)
                        for p, problem in enumerate(problems)], axis=1)
    weights = resample_weights(len(problems), cfg.bootstrap, bootstrap_rng(cfg.seed, k))
    studies = [intervals(correct[:, :, [d]], weights, cfg.ci_level) for d in range(draws)]
    widths = np.stack([study.high - study.low for study in studies], axis=1)  # [methods, draws]
    return Projection(k=k, methods=method_names(measures, cfg.etas), correct=correct,
                      width=widths.mean(axis=1))


@dataclass(frozen=True, eq=False)
class ConfidenceModel:
    """Each measure's confidence of a trace as problem effect + class effect + residual, the class being right or
    wrong, fitted on the whole pilot (an additive model, least squares in the effects' means).

    Why: a resampled pool repeats the pilot's few traces, so its most confident tenth at K = 512 is copies of the
    pilot's top 3 traces, while a real pool's is 51 different traces, almost all right where confidence tracks
    correctness; a vote on the copies is as unsure as the 3 traces are, and the plan underrated the top-10% votes'
    accuracy by 14 points on average (docs/planning.md#how-close-the-plan-comes). Drawing each resampled trace a
    fresh confidence (its problem's effect and its class's effect plus a residual drawn from every pilot trace of
    its class) makes the top tail of K draws many traces whose share of right answers is what the pilot's problems
    together show.
    """

    class_effect: np.ndarray  # float64 [measures, 2]: mean confidence of the wrong (0) and the right (1) traces
    problem_effect: np.ndarray  # float64 [measures, problems]: each problem's mean departure from its classes' means
    residuals: tuple[tuple[np.ndarray, np.ndarray], ...]  # per measure: the wrong traces' and the right traces'

    @classmethod
    def fit(cls, problems: list[ProblemScores], n_measures: int) -> ConfidenceModel:
        confidence = np.concatenate([problem.confidence[:n_measures] for problem in problems], axis=1)
        right = np.concatenate([problem.correct for problem in problems]).astype(np.intp)
        owner = np.repeat(np.arange(len(problems)), [len(problem) for problem in problems])
        effects = [_additive_fit(row, right, owner, len(problems)) for row in confidence]
        return cls(class_effect=np.stack([e[0] for e in effects]), problem_effect=np.stack([e[1] for e in effects]),
                   residuals=tuple(e[2] for e in effects))

    def for_problem(self, p: int) -> ProblemConfidence:
        return ProblemConfidence(self.class_effect + self.problem_effect[:, [p]], self.residuals)


@dataclass(frozen=True, eq=False)
class ProblemConfidence:
    """The confidence model of one problem: fresh confidences for its resampled traces."""

    mean: np.ndarray  # float64 [measures, 2]: the problem's mean confidence of a wrong (0) and a right (1) trace
    residuals: tuple[tuple[np.ndarray, np.ndarray], ...]

    def draw(self, confidence: np.ndarray, right: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """float64 [measures, n]: for traces with these confidences and classes, fresh confidences; NaN (a trace
        that never votes) stays NaN, and a confidence is never below 0 (a vote's weight)."""
        fresh = np.full(confidence.shape, np.nan)
        for m, pools in enumerate(self.residuals):
            for klass, pool in enumerate(pools):
                where = np.isfinite(confidence[m]) & (right == klass)
                if where.any():  # then its pool is not empty: the trace itself is in it
                    fresh[m, where] = self.mean[m, klass] + pool[rng.integers(len(pool), size=int(where.sum()))]
        return np.maximum(fresh, 0.0)


def _additive_fit(confidence: np.ndarray, right: np.ndarray, owner: np.ndarray,
                  n_problems: int) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """One measure's class effects [2], problem effects [problems] and residual pools (wrong, right), from the
    pilot's traces with a confidence."""
    voting = np.isfinite(confidence)
    values, klass, problem = confidence[voting], right[voting], owner[voting]
    counts = np.bincount(klass, minlength=2)
    class_effect = np.bincount(klass, values, minlength=2) / np.maximum(counts, 1)
    departure = values - class_effect[klass]
    problem_effect = (np.bincount(problem, departure, minlength=n_problems)
                      / np.maximum(np.bincount(problem, minlength=n_problems), 1))
    residual = departure - problem_effect[problem]
    return class_effect, problem_effect, (residual[klass == 0], residual[klass == 1])


def _draw_outcomes(problem: ProblemScores, confidence: ProblemConfidence, k: int, cfg: EvalConfig, draws: int,
                   measures: tuple[str, ...]) -> np.ndarray:
    """float64 [methods, draws]: each method's outcome on `draws` pools of K of the problem's traces, drawn with
    replacement and each given a fresh confidence, from a generator of its own (problem, K), as the working sets
    have."""
    seed = np.random.SeedSequence(cfg.seed, spawn_key=(PLAN_STREAM, k, *problem.problem_id.encode("utf-8")))
    rng = np.random.default_rng(seed)
    drawn = bayesian_bootstrap(rng, len(problem), k, draws).ravel()
    pools = dataclasses.replace(
        problem, sample_ids=problem.sample_ids[drawn], codes=problem.codes[drawn], correct=problem.correct[drawn],
        valid=problem.valid[drawn], n_tokens=problem.n_tokens[drawn], lowest=problem.lowest[drawn],
        confidence=confidence.draw(problem.confidence[:len(measures), drawn], problem.correct[drawn], rng))
    sets = np.arange(draws * k).reshape(draws, k)  # pool d is the drawn traces d*k .. (d+1)*k - 1
    return vote_sets(pools, sets, cfg.etas, measures, cfg.tie_break).correct


def bayesian_bootstrap(rng: np.random.Generator, n: int, k: int, draws: int) -> np.ndarray:
    """int [draws, k]: per row, k positions in 0..n-1 drawn with chances w ~ Dirichlet(1, ..., 1) of the row's own
    (Rubin's Bayesian bootstrap). Plain resampling would give each trace 1/n and so, at k >> n, the same vote every
    time: the pilot's own. Drawing w first keeps what n traces cannot tell, so a problem split 14 to 18 between two
    answers wins sometimes one and sometimes the other at K=512 as the model's true pool may.

    >>> bayesian_bootstrap(np.random.default_rng(0), 4, 3, 2).shape
    (2, 3)
    """
    chances = rng.dirichlet(np.ones(n), size=draws)
    rows = np.arange(draws)[:, None]
    cumulative = (np.cumsum(chances, axis=1) + rows).ravel()  # row r's cumulative chances shifted into [r, r + 1]
    wanted = (rng.random((draws, k)) + rows).ravel()
    positions = np.searchsorted(cumulative, wanted, side="right").reshape(draws, k) - rows * n
    return positions.clip(0, n - 1)
