"""The planner: its arithmetic on hand-made outcomes, and its calibration on the simulator (docs/planning.md):
a plan from a 32-trace pilot against the 512-trace run of the same problems, at three settings of model.sim.signal."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tracevote.core.config_deepconf import MEASURES, EvalConfig
from tracevote.core.config_endpoints import SimConfig
from tracevote.core.errors import ConfigError
from tracevote.deepconf.evaluate import ProblemScores, aggregate, split_problems
from tracevote.deepconf.plan import ConfidenceModel, Projection, bayesian_bootstrap, project
from tracevote.sim.model import SimModel

EVAL = EvalConfig(k=(512,), repeat=1, seed=0, etas=(0.1, 0.9))
PROBLEMS, FULL, PILOT = 30, 512, 32
# The stated tolerance (docs/planning.md#how-close-the-plan-comes), predicted minus measured; over 16 simulator
# seeds the errors stayed inside each with 1.2 to 2.8 points to spare.
MAJORITY_TOLERANCE = 0.04  # width, cons at every signal
NO_SIGNAL_TOLERANCE = 0.06  # width, every method at signal 0, where confidence says nothing
CONFIDENCE_RANGE = (-0.06, 0.20)  # width, the confidence-weighted votes at signal 1 and 2: the plan errs wide
CONFIDENCE_ACCURACY = (-0.15, 0.06)  # accuracy, the same votes (the plan before the confidence model: to -0.28)


def outline_scores(signal: float, problems: int = PROBLEMS, traces: int = FULL) -> pd.DataFrame:
    """A score table of `traces` simulated traces on each of `problems` problems. Each row is the simulator's own
    outline of a solve trace (its answer, correctness, length and latent confidence z, SimModel.draw_outlines), every
    confidence measure exp(z): confidence that tracks correctness as strongly as `signal` says, ~0.1 ms a trace where
    the full tokens take ~4 ms (the point here is the planner, not the scorer)."""
    model = SimModel(SimConfig(seed=0, signal=signal, accuracy=0.45, mean_tokens=40))
    rows = []
    for p in range(problems):
        outlines = model.draw_outlines(f"Problem {p}: find the answer.", [str(s) for s in range(traces)], "sim")
        rows += [{"problem_id": f"sim-{p:02d}", "sample_id": s, "answer": t.answer,
                  "answer_source": "none" if t.answer is None else "boxed", "correct": t.correct,
                  "valid": t.answer is not None, "n_tokens": t.length, "finish_reason": "stop",
                  **dict.fromkeys(MEASURES, float(np.exp(t.z)))} for s, t in enumerate(outlines)]
    return pd.DataFrame(rows).astype({"answer": "Int64"})


@pytest.mark.parametrize("signal", [0.0, 1.0, 2.0])
def test_a_32_trace_pilot_predicts_the_width_of_the_512_trace_run(signal: float) -> None:
    full = outline_scores(signal)
    pilot = full[full["sample_id"] < PILOT]  # the first 32 of the same traces, as a top-up would keep them
    plan = project(split_problems(pilot), FULL, EVAL, draws=48, measures=MEASURES)
    measured = aggregate(full, EVAL)
    runs = {m: measured.accuracy_at(m, FULL) for m in plan.methods if m != "pass1"}
    errors = {m: plan.width[plan.index(m)] - (run.ci_high - run.ci_low) for m, run in runs.items()}
    assert abs(errors["cons"]) <= MAJORITY_TOLERANCE, errors
    if signal == 0:
        assert max(abs(e) for e in errors.values()) <= NO_SIGNAL_TOLERANCE, errors
    else:
        assert all(CONFIDENCE_RANGE[0] <= e <= CONFIDENCE_RANGE[1] for e in errors.values()), errors
        accuracy = {m: plan.accuracy[plan.index(m)] - run.mean for m, run in runs.items() if m != "cons"}
        assert all(CONFIDENCE_ACCURACY[0] <= e <= CONFIDENCE_ACCURACY[1] for e in accuracy.values()), accuracy


@pytest.mark.parametrize(("n", "k", "draws"), [(4, 3, 2), (32, 512, 5), (1, 8, 3)])
def test_the_bayesian_bootstrap_draws_positions_of_the_pilot(n: int, k: int, draws: int) -> None:
    sets = bayesian_bootstrap(np.random.default_rng(1), n, k, draws)
    assert sets.shape == (draws, k) and sets.min() >= 0 and sets.max() < n


def test_the_bayesian_bootstrap_weighs_each_draw_differently() -> None:
    sets = bayesian_bootstrap(np.random.default_rng(2), 2, 4000, 200)
    shares = (sets == 0).mean(axis=1)  # Dirichlet(1, 1): the share of trace 0 is uniform on [0, 1]
    assert abs(shares.mean() - 0.5) < 0.06 and shares.std() > 0.2  # plain resampling: std ~0.008


def hand_problem(problem_id: str, confidence: list[float], correct: list[bool]) -> ProblemScores:
    """A problem whose one confidence measure is `confidence` (NaN: an invalid trace, which never votes)."""
    n = len(confidence)
    valid = ~np.isnan(confidence)
    return ProblemScores(problem_id=problem_id, sample_ids=np.arange(n), codes=np.where(valid, 0, -1),
                         values=np.array([7]), gold_code=0, correct=np.array(correct), valid=valid,
                         confidence=np.array([confidence]), n_tokens=np.full(n, 10), lowest=np.full(n, 1.0))


def test_the_confidence_model_splits_the_pilot_into_problem_and_class_effects() -> None:
    # confidence = problem (0 or +1) + class (2 wrong, 5 right) + residual (+-0.5); one invalid trace
    pilot = [hand_problem("a", [1.5, 2.5, 4.5, 5.5, np.nan], [False, False, True, True, False]),
             hand_problem("b", [2.5, 3.5, 5.5, 6.5], [False, False, True, True])]
    model = ConfidenceModel.fit(pilot, 1)
    assert model.class_effect[0] == pytest.approx([2.5, 5.5])
    assert model.problem_effect[0] == pytest.approx([-0.5, 0.5])
    wrong, right = model.residuals[0]
    assert sorted(wrong) == pytest.approx([-0.5, -0.5, 0.5, 0.5]) and sorted(right) == pytest.approx(sorted(wrong))
    assert model.for_problem(1).mean[0] == pytest.approx([3.0, 6.0])


def test_fresh_confidences_follow_the_trace_s_class_and_never_vote_from_nothing() -> None:
    pilot = [hand_problem("a", [0.1, 0.2, 9.0, 9.5, np.nan], [False, False, True, True, False])]
    fresh = ConfidenceModel.fit(pilot, 1).for_problem(0).draw(
        np.array([[0.1, 9.0, np.nan] * 200]), np.array([False, True, False] * 200), np.random.default_rng(3))
    wrong, right, invalid = fresh[0, 0::3], fresh[0, 1::3], fresh[0, 2::3]
    assert set(np.round(wrong, 6)) == {0.1, 0.2} and set(np.round(right, 6)) == {9.0, 9.5}
    assert np.isnan(invalid).all()


def test_a_fresh_confidence_is_never_below_zero() -> None:
    pilot = [hand_problem("a", [0.0, 4.0, 1.0], [False, False, True]), hand_problem("b", [0.0, 0.0], [False, True])]
    fresh = ConfidenceModel.fit(pilot, 1).for_problem(1).draw(np.ones((1, 500)), np.zeros(500, dtype=bool),
                                                               np.random.default_rng(4))
    assert fresh.min() == 0.0 and fresh.max() > 0


def hand_projection(a: list[list[float]], b: list[list[float]], width: tuple[float, float]) -> Projection:
    """Two methods' outcomes [problems][draws], and their widths."""
    return Projection(k=64, methods=("cons", "avg"), correct=np.array([a, b], dtype=float),
                      width=np.array(width))


@pytest.mark.parametrize(("width", "target", "problems"), [
    (0.30, 0.10, 36),  # 4 problems x (0.30 / 0.10)^2
    (0.30, 0.30, 4),
    (0.30, 0.60, 1),
    (0.0, 0.10, None),  # never varies: no count of problems narrows it
])
def test_problems_for_a_width_scale_as_the_square(width: float, target: float, problems: int | None) -> None:
    plan = hand_projection([[1, 0]] * 4, [[1, 1]] * 4, (width, width))
    assert plan.problems_for_width("cons", target) == problems
    if problems:
        assert plan.width_at("cons", 16) == pytest.approx(width / 2)


def test_problems_to_detect_a_difference_follow_the_paired_normal_formula() -> None:
    # differences avg - cons over (problem, draw): 0, 1, 0, 1, ... so sd 0.5; (1.96 + 0.8416) * 0.5 / 0.1 = 14.0 -> 197
    plan = hand_projection([[1, 0], [0, 0]] * 2, [[1, 1], [0, 1]] * 2, (0.2, 0.2))
    assert plan.difference_sd("avg", "cons") == pytest.approx(0.5)
    assert plan.problems_to_detect("avg", "cons", 0.10, 0.80, 0.95) == 197
    assert plan.problems_to_detect("cons", "cons", 0.10, 0.80, 0.95) is None


def test_a_method_the_aggregate_does_not_report_is_named() -> None:
    plan = hand_projection([[1, 0]], [[1, 1]], (0.2, 0.2))
    with pytest.raises(ConfigError, match=r"method 'top10': not one the aggregate reports \(there are: cons, avg\)"):
        plan.index("top10")
