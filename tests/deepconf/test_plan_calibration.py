"""The planner held to the runs it predicts (docs/planning.md#how-close-the-plan-comes): from a 16-trace pilot, each
method's accuracy at 16, 32 and 64 traces a problem lies within its printed interval of the vote on the full table's
first K traces, on the simulator at three settings of model.sim.signal and on a table where easy problems are surer
(confidence that separates problems, not the traces of one problem)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.deepconf.test_plan import outline_scores
from tracevote.core.config_deepconf import MEASURES, EvalConfig
from tracevote.deepconf.evaluate import split_problems
from tracevote.deepconf.plan import project
from tracevote.deepconf.plan_validation import Checked, check_against, cross_validate

EVAL = EvalConfig(k=(64,), repeat=1, seed=0, etas=(0.1, 0.9))
PROBLEMS, FULL, PILOT, DRAWS = 40, 64, 16, 24


def confounded_scores(problems: int = PROBLEMS, traces: int = FULL, seed: int = 0) -> pd.DataFrame:
    """Problem p is right with chance q_p (from 5% to 95%), else one of three wrong answers, the first the most
    common; every trace's confidence is 2 q_p + noise, whatever its answer: pooled over problems, right traces are
    much surer than wrong ones (AUROC ~0.8), within a problem not at all (0.5)."""
    rng = np.random.default_rng(seed)
    rows = []
    for p, chance in enumerate(np.linspace(0.05, 0.95, problems)):
        right = rng.random(traces) < chance
        wrong = rng.choice([1, 2, 3], size=traces, p=[0.6, 0.25, 0.15])
        confidence = 1 + 2 * chance + rng.normal(0, 0.3, traces)
        rows += [{"problem_id": f"conf-{p:02d}", "sample_id": s, "answer": 0 if right[s] else int(wrong[s]),
                  "answer_source": "boxed", "correct": bool(right[s]), "valid": True, "n_tokens": 40,
                  "finish_reason": "stop", **dict.fromkeys(MEASURES, float(max(confidence[s], 0.01)))}
                 for s in range(traces)]
    return pd.DataFrame(rows).astype({"answer": "Int64"})


def calibration(full: pd.DataFrame) -> list[Checked]:
    """Every prediction from the table's first 16 traces at K = 16, 32, 64, against the table's vote at K."""
    pilot = split_problems(full[full["sample_id"] < PILOT])
    projections = [project(pilot, k, EVAL, DRAWS, MEASURES) for k in (PILOT, 32, FULL)]
    validation = cross_validate(pilot, EVAL, DRAWS, MEASURES)
    return check_against(split_problems(full), projections, validation, EVAL, MEASURES)


def outside(rows: list[Checked]) -> list[str]:
    return [f"{r.method}@{r.k}: {100 * r.predicted:.1f} [{100 * r.low:.1f}, {100 * r.high:.1f}] measured "
            f"{100 * r.measured:.1f}" for r in rows if not r.inside]


@pytest.mark.parametrize("signal", [0.0, 1.0, 2.0])
def test_on_the_simulator_each_prediction_lies_within_its_interval(signal: float) -> None:
    rows = calibration(outline_scores(signal, PROBLEMS, FULL))
    assert len(rows) == 3 * 14 and not outside(rows), outside(rows)


def test_where_easy_problems_are_surer_each_prediction_lies_within_its_interval() -> None:
    rows = calibration(confounded_scores())
    assert len(rows) == 3 * 14 and not outside(rows), outside(rows)
    # confidence says nothing within a problem: a vote on the most confident tenth is a vote on a tenth of the
    # traces, below the majority of all of them, and the plan says so
    top10 = {r.k: r for r in rows if r.method == "avg_top10"}
    cons = {r.k: r for r in rows if r.method == "cons"}
    assert top10[FULL].predicted < cons[FULL].predicted - 0.03
