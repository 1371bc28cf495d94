"""A study planned from a pilot: each method's accuracy and interval width at a larger K, and the problems needed to
tell two methods apart, predicted by resampling the pilot's traces.

The pilot is a score table of P problems and n traces each. A study at K builds a pool of K traces a problem and
votes once on all of them (the aggregate's whole-pool set at K = pool.n_pool). One draw stands in for that pool: K of
the problem's n pilot traces drawn with replacement (a bootstrap of its traces: the pilot's answers stand in for the
model's), each given a fresh confidence (plan_confidence.ConfidenceModel, fitted within problems), on which every
method votes with the aggregate's own rules (evaluate.vote_sets).

- accuracy at K: the mean over problems and draws.
- interval at K on the pilot's P problems: each draw index is one simulated study (one draw a problem), its
  interval bootstrapped as the aggregate bootstraps its own (uncertainty.intervals, eval.bootstrap resamples of the
  problems, eval.ci_level); the mean low and high ends over studies (plan_validation widens them by the plan's
  error on held-out problems). At N problems the width is that times sqrt(P / N), as a
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
from tracevote.deepconf.plan_confidence import ConfidenceModel, ProblemConfidence
from tracevote.deepconf.uncertainty import bootstrap_rng, intervals, resample_weights

PLAN_STREAM = 0x91A  # spawn_key component that keeps the plan's draws apart from the working sets' and bootstrap's


@dataclass(frozen=True, eq=False)
class Projection:
    """Every method at K, from `draws` simulated studies on the pilot's problems."""

    k: int
    methods: tuple[str, ...]
    correct: np.ndarray  # float64 [methods, problems, draws]: a method's outcome on one draw of K traces
    low: np.ndarray  # float64 [methods]: mean low end of a study's interval on the pilot's problems
    high: np.ndarray  # float64 [methods]: and its mean high end

    @property
    def width(self) -> np.ndarray:
        """float64 [methods]: the mean interval width of a study on the pilot's problems."""
        return self.high - self.low

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
    correct = np.stack([draw_outcomes(problem, model.for_problem(problem), k, cfg, draws, measures)
                        for problem in problems], axis=1)
    weights = resample_weights(len(problems), cfg.bootstrap, bootstrap_rng(cfg.seed, k))
    studies = [intervals(correct[:, :, [d]], weights, cfg.ci_level) for d in range(draws)]
    return Projection(k=k, methods=method_names(measures, cfg.etas), correct=correct,
                      low=np.mean([study.low for study in studies], axis=0),
                      high=np.mean([study.high for study in studies], axis=0))


def draw_outcomes(problem: ProblemScores, confidence: ProblemConfidence, k: int, cfg: EvalConfig, draws: int,
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
