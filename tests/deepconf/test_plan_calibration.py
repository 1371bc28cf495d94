"""The planner held to the runs it predicts (docs/planning.md#how-close-the-plan-comes): from a 16-trace pilot, each
method's accuracy at 16, 32 and 64 traces a problem lies within its printed interval of the vote on the full table's
first K traces, on the simulator at three settings of model.sim.signal and on a table where easy problems are surer
(confidence that separates problems, not the traces of one problem)."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from bench.plan_calibration import calibration as bench_calibration
from bench.plan_calibration import confounded_scores, main, outline_scores
from tracevote.deepconf.plan_validation import Checked

PROBLEMS, FULL, PILOT, DRAWS = 40, 64, 16, 24


def calibration(full: pd.DataFrame) -> list[Checked]:
    return bench_calibration(full, PILOT, (PILOT, 32, FULL), DRAWS)


def outside(rows: list[Checked]) -> list[str]:
    return [f"{r.method}@{r.k}: {100 * r.predicted:.1f} [{100 * r.low:.1f}, {100 * r.high:.1f}] measured "
            f"{100 * r.measured:.1f}" for r in rows if not r.inside]


@pytest.mark.parametrize("signal", [0.0, 1.0, 2.0])
def test_on_the_simulator_each_prediction_lies_within_its_interval(signal: float) -> None:
    rows = calibration(outline_scores(signal, PROBLEMS, FULL))
    assert len(rows) == 3 * 14 and not outside(rows), outside(rows)


def test_where_easy_problems_are_surer_each_prediction_lies_within_its_interval() -> None:
    rows = calibration(confounded_scores(PROBLEMS, FULL))
    assert len(rows) == 3 * 14 and not outside(rows), outside(rows)
    # confidence says nothing within a problem: a vote on the most confident tenth is a vote on a tenth of the
    # traces, below the majority of all of them, and the plan says so
    top10 = {r.k: r for r in rows if r.method == "avg_top10"}
    cons = {r.k: r for r in rows if r.method == "cons"}
    assert top10[FULL].predicted < cons[FULL].predicted - 0.03


def test_the_calibration_script_prints_each_case(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--problems", "6", "--pilot", "4", "--traces", "8", "--draws", "4"]) == 0
    out = capsys.readouterr().out
    assert "simulator, signal 2 (SIMULATED): " in out and "easy problems surer (SIMULATED): " in out
    assert re.search(r"\| avg_top10 +\| +8 \|", out), out
