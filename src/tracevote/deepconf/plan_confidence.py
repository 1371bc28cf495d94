"""The planner's confidence model: a fresh confidence for each resampled trace, fitted within problems.

A resampled pool repeats the pilot's few traces, so its most confident tenth at K = 512 would be copies of the
pilot's top 3 traces; drawing each resampled trace a fresh confidence makes the top tail many traces whose share of
right answers is what the pilot shows. What the model must not do is learn that share across problems: when easy
problems are both surer and more often right, right traces are surer than wrong ones over the pilot pooled even
where, within every problem, confidence says nothing about which trace is right, and a confidence vote only ever
compares traces of one problem. So the separation of right from wrong is learned only within problems (a per-problem
offset, the fixed-effects estimator of an additive model), from the problems that have both
(docs/planning.md#the-confidence-model).

In one problem whose valid pilot traces have mean m and a share r of them right, a trace's fresh confidence is

    m + centre of its class + a residual

the centres (1 - r) * gap for a right trace and -r * gap for a wrong one (they average to the problem's mean), gap the
mean within-problem difference of a right trace's confidence from a wrong one's, and the residual drawn from every
pilot trace of the same class, each measured from its own problem's class mean. Scaling each problem by its own
spread as well (standardising) was tried and measured worse: on the simulator its top-10% votes at 64 traces erred
low by 6 more points, as a few traces' spread is a noisy yardstick (docs/planning.md#how-close-the-plan-comes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracevote.deepconf.evaluate import ProblemScores


@dataclass(frozen=True, eq=False)
class ConfidenceModel:
    """Per measure: the within-problem gap and the residual pools (wrong, right)."""

    gap: np.ndarray  # float64 [measures]: a right trace's confidence minus a wrong one's, within problems
    residuals: tuple[tuple[np.ndarray, np.ndarray], ...]  # per measure: the wrong traces' and the right traces'

    @classmethod
    def fit(cls, problems: list[ProblemScores], n_measures: int) -> ConfidenceModel:
        fits = [_fit_measure([p.confidence[m] for p in problems], [p.correct for p in problems])
                for m in range(n_measures)]
        return cls(gap=np.array([f[0] for f in fits]), residuals=tuple(f[1] for f in fits))

    def for_problem(self, problem: ProblemScores) -> ProblemConfidence:
        """The model of one problem, placed at its own pilot traces' mean (a held-out problem's too)."""
        n = len(self.gap)
        location, share = np.zeros(n), np.zeros(n)
        for m in range(n):
            values, right = _voting(problem.confidence[m], problem.correct)
            location[m] = values.mean() if len(values) else 0.0
            share[m] = right.mean() if len(values) else 0.0
        centres = np.stack([-share * self.gap, (1 - share) * self.gap], axis=1)  # [measures, 2]
        return ProblemConfidence(location=location, centre=centres, residuals=self.residuals)


@dataclass(frozen=True, eq=False)
class ProblemConfidence:
    """The confidence model of one problem: fresh confidences for its resampled traces."""

    location: np.ndarray  # float64 [measures]: the problem's mean confidence
    centre: np.ndarray  # float64 [measures, 2]: a wrong (0) and a right (1) trace's mean, from the problem's
    residuals: tuple[tuple[np.ndarray, np.ndarray], ...]

    def draw(self, confidence: np.ndarray, right: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """float64 [measures, n]: for traces with these confidences and classes, fresh confidences; NaN (a trace
        that never votes) stays NaN, and a confidence is never below 0 (a vote's weight)."""
        fresh = np.full(confidence.shape, np.nan)
        for m, pools in enumerate(self.residuals):
            for klass, pool in enumerate(pools):
                where = np.isfinite(confidence[m]) & (right == klass)
                if not where.any():
                    continue
                # subtle: a class no pilot problem had (every trace right, say) has no residuals: its centre alone
                drawn = pool[rng.integers(len(pool), size=int(where.sum()))] if len(pool) else 0.0
                fresh[m, where] = self.location[m] + self.centre[m, klass] + drawn
        return np.maximum(fresh, 0.0)


def _voting(confidence: np.ndarray, correct: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    finite = np.isfinite(confidence)
    return confidence[finite], correct[finite].astype(bool)


def _fit_measure(confidences: list[np.ndarray], corrects: list[np.ndarray]
                 ) -> tuple[float, tuple[np.ndarray, np.ndarray]]:
    """One measure's gap and residual pools over the pilot's problems.

    The gap is the within-problem estimator: each problem with right and wrong traces contributes its difference of
    class means, weighted by n_right * n_wrong / n (the weight least squares with a per-problem offset gives it); a
    problem with one class says nothing about the gap."""
    gaps, weights, wrong, right = [], [], [], []
    for confidence, correct in zip(confidences, corrects, strict=True):
        values, klass = _voting(confidence, correct)
        for is_right, pool in ((False, wrong), (True, right)):
            members = values[klass == is_right]
            pool.append(members - members.mean() if len(members) else members)
        n_right, n_wrong = int(klass.sum()), int((~klass).sum())
        if n_right and n_wrong:
            gaps.append(values[klass].mean() - values[~klass].mean())
            weights.append(n_right * n_wrong / len(values))
    gap = float(np.average(gaps, weights=weights)) if gaps else 0.0
    return gap, (_joined(wrong), _joined(right))


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0)
