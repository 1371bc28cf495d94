"""The planner against the runs it predicts, on tables whose truth is known (SIMULATED: no model).

From each problem's first --pilot traces, the plan predicts every method's accuracy at the pilot's K and each
power of two up to --traces, with its interval; the measured value is the vote on each problem's first K traces
of the full table. The cases: the simulator's outlines of solve traces at model.sim.signal 0, 1 and 2, and a
table where easy problems are surer but confidence says nothing within a problem (`confounded_scores`).

    python -m bench.plan_calibration --problems 40 --pilot 16 --traces 64 --draws 48 --seed 0
prints one table a case and how many predictions fell inside their interval.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
from tabulate import tabulate

from tracevote.core.config_deepconf import MEASURES, EvalConfig
from tracevote.core.config_endpoints import SimConfig
from tracevote.deepconf.evaluate import split_problems
from tracevote.deepconf.plan import project
from tracevote.deepconf.plan_validation import Checked, check_against, cross_validate
from tracevote.sim.model import SimModel

EVAL = EvalConfig(k=(64,), repeat=1, seed=0, etas=(0.1, 0.9))
SHOWN = ("cons", "avg", "avg_top10", "avg_top90", "tail_top10", "lowest_top10")  # the table's rows; all are checked


def outline_scores(signal: float, problems: int, traces: int, seed: int = 0) -> pd.DataFrame:
    """A score table of `traces` simulated traces on each of `problems` problems. Each row is the simulator's own
    outline of a solve trace (its answer, correctness, length and latent confidence z, SimModel.draw_outlines), every
    confidence measure exp(z): confidence that tracks correctness as strongly as `signal` says, ~0.1 ms a trace where
    the full tokens take ~4 ms (the point here is the planner, not the scorer)."""
    model = SimModel(SimConfig(seed=seed, signal=signal, accuracy=0.45, mean_tokens=40))
    rows = []
    for p in range(problems):
        outlines = model.draw_outlines(f"Problem {p}: find the answer.", [str(s) for s in range(traces)], "sim")
        rows += [{"problem_id": f"sim-{p:02d}", "sample_id": s, "answer": t.answer,
                  "answer_source": "none" if t.answer is None else "boxed", "correct": t.correct,
                  "valid": t.answer is not None, "n_tokens": t.length, "finish_reason": "stop",
                  **dict.fromkeys(MEASURES, float(np.exp(t.z)))} for s, t in enumerate(outlines)]
    return pd.DataFrame(rows).astype({"answer": "Int64"})


def confounded_scores(problems: int, traces: int, seed: int = 0) -> pd.DataFrame:
    """Problem p is right with chance q_p (5% to 95% over the problems), else one of three wrong answers, the first
    the most common; every trace's confidence is 1 + 2 q_p + noise whatever its answer: pooled over problems right
    traces are much surer than wrong ones, within a problem not at all."""
    rng = np.random.default_rng(seed)
    rows = []
    for p, chance in enumerate(np.linspace(0.05, 0.95, problems)):
        right = rng.random(traces) < chance
        wrong = rng.choice([1, 2, 3], size=traces, p=[0.6, 0.25, 0.15])
        confidence = np.maximum(1 + 2 * chance + rng.normal(0, 0.3, traces), 0.01)
        rows += [{"problem_id": f"conf-{p:02d}", "sample_id": s, "answer": 0 if right[s] else int(wrong[s]),
                  "answer_source": "boxed", "correct": bool(right[s]), "valid": True, "n_tokens": 40,
                  "finish_reason": "stop", **dict.fromkeys(MEASURES, float(confidence[s]))} for s in range(traces)]
    return pd.DataFrame(rows).astype({"answer": "Int64"})


def calibration(full: pd.DataFrame, pilot: int, ks: tuple[int, ...], draws: int) -> list[Checked]:
    """Every prediction from the table's first `pilot` traces at each of `ks`, against the table's vote at K."""
    problems = split_problems(full[full["sample_id"] < pilot])
    projections = [project(problems, k, EVAL, draws, MEASURES) for k in ks]
    validation = cross_validate(problems, EVAL, draws, MEASURES)
    return check_against(split_problems(full), projections, validation, EVAL, MEASURES)


def cases(problems: int, traces: int, seed: int = 0) -> dict[str, pd.DataFrame]:
    tables = {f"simulator, signal {s:g}": outline_scores(s, problems, traces, seed) for s in (0.0, 1.0, 2.0)}
    return {**tables, "easy problems surer": confounded_scores(problems, traces, seed)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", type=int, default=40)
    parser.add_argument("--pilot", type=int, default=16, help="traces a problem in the pilot")
    parser.add_argument("--traces", type=int, default=64, help="traces a problem in the full table")
    parser.add_argument("--draws", type=int, default=48)
    parser.add_argument("--seed", type=int, default=0, help="the simulator's and the confounded table's seed")
    args = parser.parse_args(argv)
    ks = (args.pilot, *(2 ** j for j in range(1, args.traces.bit_length()) if args.pilot < 2 ** j <= args.traces))
    for name, table in cases(args.problems, args.traces, args.seed).items():
        rows = calibration(table, args.pilot, ks, args.draws)
        errors = 100 * np.array([r.predicted - r.measured for r in rows])
        print(f"{name} (SIMULATED): {sum(r.inside for r in rows)} of {len(rows)} inside their interval; error "
              f"(predicted - measured) {errors.min():+.1f} to {errors.max():+.1f} points, mean {errors.mean():+.1f}, "
              f"mean size {np.abs(errors).mean():.1f}")
        cells = [[r.method, r.k, f"{100 * r.predicted:.1f}", f"[{100 * r.low:.1f}, {100 * r.high:.1f}]",
                  f"{100 * r.measured:.1f}", f"{100 * (r.predicted - r.measured):+.1f}"]
                 for r in rows if r.method in SHOWN]
        print(tabulate(cells, headers=["method", "K", "predicted", "interval", "measured", "error"],
                       tablefmt="github"), end="\n\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
