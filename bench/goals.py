"""The regression guard: each headline figure's goal, and whether a run missed it by more than its noise.

Most goals are missed only when even the best repetition misses them (for "at least": the max is below the goal;
for "below": the min is at or above it), so a noisy run on a busy machine does not fail by bad luck while a
real slow-down does. A goal its issue states for the median (grade against the plain loop) is judged by the
median. `make bench` runs the guard; `make test` never does (timings are never asserted).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bench.figures import Figure
from bench.measure import Spread


@dataclass(frozen=True)
class Goal:
    figure: str  # a Figure's name
    on: Literal["ratio", "value"]  # the figure's per-round ratio to its baseline, or its own values
    at_least: bool  # True: met at >= target; False: met below target
    target: float
    why: str
    judged_by: Literal["best", "median"] = "best"  # which repetition must meet the target


GOALS: tuple[Goal, ...] = (
    # The score stage is what re-scoring a pool costs; the official offline analysis is what users had.
    Goal("score stage, marginal rate, 1 worker", "ratio", True, 10.0,
         "issue 24: the score stage at >= 10x the official offline analysis, same statistic"),
    Goal("score stage, marginal rate, 2 workers", "ratio", True, 10.0,
         "issue 24: also with the default two workers"),
    # grade must not cost more than the plain main-thread Math-Verify loop it replaces.
    Goal("grade, GSM8K (1,319)", "ratio", True, 1.0, "issue 24: grade no slower than a plain loop, by the median",
         "median"),
    Goal("grade, MATH-500", "ratio", True, 1.0, "issue 24: grade no slower than a plain loop, by the median",
         "median"),
    # Paper scale (30 x 4096 x ~3,000 tokens), measured with --paper only.
    Goal("paper scale: aggregate, warm", "value", False, 8.0,
         "issue 24: aggregate with online replay and 1,000 resamples under 8 s"),
    Goal("paper scale: score + aggregate + report, warm", "value", False, 30.0,
         "issue 24: the three stages a re-analysis runs, under 30 s with the pool in the page cache"),
)


@dataclass(frozen=True)
class Verdict:
    goal: Goal
    measured: Spread | None  # None: the figure was not produced by this run

    @property
    def missed(self) -> bool:
        if self.measured is None:
            return False
        if self.goal.judged_by == "median":
            value = self.measured.median
            return value < self.goal.target if self.goal.at_least else value >= self.goal.target
        if self.goal.at_least:
            return self.measured.high < self.goal.target
        return self.measured.low >= self.goal.target

    def line(self) -> str:
        sign = ">=" if self.goal.at_least else "<"
        unit = "x" if self.goal.on == "ratio" else " s"
        goal = f"goal {sign} {self.goal.target:g}{unit}" + (" by the median" if self.goal.judged_by == "median" else "")
        if self.measured is None:
            return f"  not measured  {self.goal.figure}: {goal} (not in this run)"
        spread = f"median {self.measured.median:.3g}{unit}, min {self.measured.low:.3g}, max {self.measured.high:.3g}"
        state = "MISSED" if self.missed else "met"
        return f"  {state:<12}  {self.goal.figure}: {goal}; measured {spread} over {self.measured.count} runs"


def measured(goal: Goal, figure: Figure) -> Spread:
    if goal.on == "value":
        return figure.spread
    spread = figure.speedup_spread
    if spread is None:
        raise ValueError(f"goal on the ratio of {figure.name!r}, which has no baseline")
    # The headline is the ratio of medians; min and max are the per-round ratios' (the noise).
    return Spread(figure.speedup or 0.0, spread.low, spread.high, spread.count)


def verdicts(figures: list[Figure], goals: tuple[Goal, ...] = GOALS) -> list[Verdict]:
    by_name = {figure.name: figure for figure in figures}
    return [Verdict(goal, measured(goal, by_name[goal.figure]) if goal.figure in by_name else None)
            for goal in goals]
