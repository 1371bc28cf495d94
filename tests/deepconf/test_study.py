"""The study's computation (tracevote.deepconf.study): the frontier of the cheapest way to each accuracy, each point's
dollars per problem, and a model against the reference on the problems both ran. Expected values are worked out
here by hand, never taken from the program."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tracevote.core.config_deepconf import MEASURES, EvalConfig, OnlineConfig
from tracevote.core.config_endpoints import PricingConfig
from tracevote.deepconf.evaluate import aggregate
from tracevote.deepconf.score import SCORE_COLUMNS, STOP_COLUMNS
from tracevote.deepconf.study import ModelRun, frontier, paired_differences, run_points
from tracevote.report.study import study_table


@pytest.mark.parametrize(("dollars", "accuracy", "on"), [
    # by price: 1 (50%) opens the frontier; 2 (40%) is worse than a cheaper one; 2 (60%) beats 50%; 3 (70%) too
    ([1.0, 2.0, 3.0, 2.0], [0.5, 0.4, 0.7, 0.6], [True, False, True, True]),
    # a dearer point no more accurate than a cheaper one is off it, an equal one included
    ([1.0, 5.0, 2.0], [0.8, 0.8, 0.3], [True, False, False]),
    # at one price only the most accurate; of two equal points only the first
    ([2.0, 2.0, 2.0, 2.0], [0.3, 0.9, 0.9, 0.1], [False, True, False, False]),
    # every step up in price buys accuracy: all on it, whatever the order given
    ([8.0, 1.0, 4.0, 2.0], [0.9, 0.2, 0.7, 0.5], [True, True, True, True]),
    ([3.0], [0.0], [True]),
    # the same accuracy but for the last bit (a mean over working sets and online's) buys nothing dearer
    ([0.00080684, 0.00081034], [0.8385416666666666, 0.8385416666666667], [True, False]),
])
def test_the_frontier_is_the_cheapest_way_to_each_accuracy(dollars: list[float], accuracy: list[float],
                                                           on: list[bool]) -> None:
    assert frontier(np.array(dollars), np.array(accuracy)).tolist() == on


# Per problem: gold 1; `right` of its traces answer 1, the rest 2; every trace writes TOKENS tokens.
TOKENS = 100
PRICING = PricingConfig(checked="2026-07", input_cache_miss=2.0, input_cache_hit=0.5, output=10.0)


def scores(right: dict[str, int], traces: int = 4) -> pd.DataFrame:
    rows = [{"problem_id": problem, "sample_id": i, "answer": 1 if i < count else 2, "answer_source": "boxed",
             "correct": i < count, "valid": True, "n_tokens": TOKENS, "finish_reason": "stop",
             **dict.fromkeys(MEASURES, 1.0)} for problem, count in right.items() for i in range(traces)]
    frame = pd.DataFrame(rows, columns=list(SCORE_COLUMNS))
    frame["answer"] = frame["answer"].astype("Int64")
    return frame


def run(endpoint: str, right: dict[str, int]) -> ModelRun:
    result = aggregate(scores(right), EvalConfig(k=(1, 4), repeat=4, seed=0, etas=(0.1,), bootstrap=200))
    return ModelRun(endpoint, result, tokens_per_trace=TOKENS, prompt_tokens=20.0, pricing=PRICING, simulated=True)


def test_voting_at_k_pays_for_k_prompts_and_k_traces() -> None:
    points = {(p.method, p.k): p for p in run_points(run("a", {"p0": 4, "p1": 0}), [1, 4])}
    one_trace = (20 * 2.0 + 100 * 10.0) / 1e6  # prompt at the cache-miss price, completion at the output price
    assert points["pass1", 1].usd == pytest.approx(one_trace)
    assert points["cons", 4].usd == pytest.approx(4 * one_trace)
    assert points["avg_top10", 4].usd == pytest.approx(4 * one_trace)  # filtering keeps traces already paid for
    assert points["cons", 4].tokens == 4 * TOKENS
    assert (points["cons", 4].accuracy, points["pass1", 1].accuracy) == (0.5, 0.5)
    assert ("cons", 1) not in points  # at K 1 a vote is one trace: Pass@1 stands for it


def test_online_deepconf_pays_for_the_traces_it_started_not_for_k() -> None:
    # every trace of a problem gives the same answer, so the consensus stop (tau 0.95) ends sampling right after the
    # 2 warmup traces: at K=4 online DeepConf starts 2 traces, and with no record lows (an empty stop table) none
    # stops early, so each writes its TOKENS
    online = OnlineConfig(warmup=2, percentiles={"low": 90}, consensus=0.95)
    no_stops = pd.DataFrame({column: pd.Series(dtype="int64") for column in STOP_COLUMNS}).astype({
        "problem_id": "str", "value": "float64"})
    result = aggregate(scores({"p0": 4, "p1": 0}), EvalConfig(k=(1, 4), repeat=4, seed=0, etas=(0.1,), bootstrap=200),
                       online=online, stops=no_stops)
    model = ModelRun("a", result, tokens_per_trace=TOKENS, prompt_tokens=20.0, pricing=PRICING, simulated=True)
    points = {(p.method, p.k): p for p in run_points(model, [1, 4])}
    started = points["online_low", 4]
    assert result.online_at("online_low", 4).generated == 2  # the replay's own count, before the dollars
    assert started.tokens == 2 * TOKENS
    assert started.usd == pytest.approx((2 * 20 * 2.0 + 2 * TOKENS * 10.0) / 1e6)  # 2 prompts, not K = 4
    assert started.usd < points["cons", 4].usd
    assert started.accuracy == 0.5  # p0's answer holds all the weight and is right; p1's is wrong
    assert ("online_low", 1) not in points  # below the warmup online DeepConf does not run
    row = study_table(list(points.values())).set_index("label").loc["DeepConf-low online@4"]  # the report's row
    assert (row["usd_per_problem"], row["tokens_per_problem"]) == (started.usd, 2 * TOKENS)


def test_a_model_against_the_reference_on_the_problems_both_ran() -> None:
    reference = run("ref", {"p0": 4, "p1": 4, "p2": 4, "p3": 0})
    other = run("other", {"p0": 4, "p1": 0, "p2": 0, "p3": 0, "p9": 4})  # p9: the reference never ran it
    differences = {(d.method, d.k): d for d in paired_differences([reference, other], "ref", [1, 4], resamples=200,
                                                                 seed=0, level=0.95)}
    cons = differences["cons", 4]
    assert (cons.model, cons.reference, cons.problems) == ("other", "ref", 4)
    assert cons.difference == pytest.approx(-0.5)  # wrong where the reference was right on p1 and p2, of 4
    assert cons.ci_low <= -0.5 <= cons.ci_high <= 0.0
    assert differences["pass1", 1].difference == pytest.approx(-0.5)
    assert ("cons", 1) not in differences
