"""Online DeepConf replayed on hand-built traces whose confidences give known stops, tokens and votes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tracevote.answers.extract import answer_candidates
from tracevote.core.config_datasets import AnswersConfig
from tracevote.core.config_deepconf import ConfidenceConfig, EvalConfig, OnlineConfig
from tracevote.core.errors import DataError
from tracevote.deepconf.confidence import StopProfiles, trace_measures
from tracevote.deepconf.evaluate import aggregate
from tracevote.deepconf.online import OnlineTrace, replay
from tracevote.deepconf.results import AggregateResult
from tracevote.deepconf.score import score_and_stops
from tracevote.deepconf.stop_table import problem_stops
from tracevote.store.records import ProblemTraces

GROUP = ConfidenceConfig(group_size=2, bottom_fraction=0.1, tail_tokens=2)
GOLD = 1
# (token confidences, answer code): warmup first. With windows of 2 tokens:
TRACES = [
    ([5, 5, 5, 5], 0),  # warmup, lowest 5
    ([3, 3, 3, 3], 0),  # warmup, lowest 3
    ([5, 5, 1, 1, 5], 0),  # windows 5, 3, 1, 3: record lows 5 (2 tokens), 3 (3 tokens), 1 (4 tokens)
    ([4, 4, 4], 1),  # windows 4, 4: lowest 4
    ([2], 0),  # shorter than a window: never stops early, lowest 2 (its only group)
    ([4.5, 4.5], 1),  # one window, 4.5
]
# warmup lowest [5, 3]: percentile 90 -> s = 4.8 (DeepConf-low), percentile 10 -> s = 3.2 (DeepConf-high)


def problem_traces(problem_id: str, confidences: list) -> ProblemTraces:
    n = len(confidences)
    return ProblemTraces(problem_id, np.arange(n), [answer_candidates(r"\boxed{7}")] * n, ["stop"] * n,
                         np.concatenate(([0], np.cumsum([len(c) for c in confidences]))),
                         np.concatenate([np.asarray(c, dtype=np.float64) for c in confidences]))


def hand_built() -> OnlineTrace:
    lengths = [len(c) for c, _ in TRACES]
    measures = trace_measures(problem_traces("p", [c for c, _ in TRACES]), GROUP)
    return OnlineTrace(codes=np.array([code for _, code in TRACES]), gold_code=GOLD, lowest=measures.lowest,
                       n_tokens=np.array(lengths), stops=measures.stops)


def run(percentile: float, consensus: float | None = None, tie_break: str = "smallest") -> object:
    sets = np.arange(len(TRACES))[None, :]
    return replay(hand_built(), sets, percentile, OnlineConfig(2, {"m": percentile}, consensus), tie_break)


def test_deepconf_low_stops_early_and_keeps_only_the_most_confident() -> None:
    low = run(90)
    assert low.threshold.tolist() == [pytest.approx(4.8)]
    # warmup 4 + 4; trace 2 stops after the window ending at its 3rd token (mean 3 < 4.8); trace 3 after its
    # first window (4 < 4.8); the short trace runs in full (1); trace 5's only window (4.5) stops it at its end
    assert low.tokens.tolist() == [4 + 4 + 3 + 2 + 1 + 2]
    assert low.stopped.tolist() == [3] and low.generated.tolist() == [6]
    # only warmup trace 0 (lowest 5 >= 4.8) votes: answer 0, not the gold
    assert low.correct.tolist() == [0.0] and low.answered.tolist() == [1.0]


def test_deepconf_high_keeps_most_traces_and_the_weighted_vote_decides() -> None:
    high = run(10)
    assert high.threshold.tolist() == [pytest.approx(3.2)]
    assert high.tokens.tolist() == [4 + 4 + 3 + 3 + 1 + 2]  # only trace 2 stops (window 3 < 3.2)
    assert high.stopped.tolist() == [1]
    # votes: trace 0 (answer 0, weight 5); traces 3 and 5 (answer 1, weights 4 + 4.5): the gold wins
    assert high.correct.tolist() == [1.0]


def test_the_consensus_stop_ends_sampling_once_one_answer_holds_tau_of_the_weight() -> None:
    # after the warmup only trace 0 voted (trace 1 is below s), so its answer holds all the weight
    stopped = run(90, consensus=0.95)
    assert stopped.generated.tolist() == [2] and stopped.tokens.tolist() == [8] and stopped.stopped.tolist() == [0]
    assert run(90, consensus=None).generated.tolist() == [6]
    # equal weights, answers 0 1 | 1 1 1 1: shares 1/2 after the warmup, then 2/3, then 3/4 >= 0.75
    no_stops = StopProfiles(np.zeros(7, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0))
    trace = OnlineTrace(codes=np.array([0, 1, 1, 1, 1, 1]), gold_code=1, lowest=np.full(6, 5.0),
                        n_tokens=np.array([10, 20, 30, 40, 50, 60]), stops=no_stops)
    cfg = OnlineConfig(2, {"m": 50}, 0.75)
    sets = np.array([[0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0]])
    voted = replay(trace, sets, 50, cfg, "smallest")
    # the reversed set opens with two votes for answer 1: all the weight after the warmup
    assert voted.generated.tolist() == [4, 2] and voted.tokens.tolist() == [100, 110]
    assert voted.correct.tolist() == [1.0, 1.0]


def test_the_official_tie_rule_counts_warmup_traces_first() -> None:
    trace = hand_built()
    tied = OnlineTrace(codes=np.array([1, 0, 0, 0, 0, 0]), gold_code=1, lowest=np.array([4.0, 4.0, 0, 0, 0, 0]),
                       n_tokens=trace.n_tokens, stops=trace.stops)
    sets = np.array([[0, 1, 2, 3, 4, 5]])
    cfg = OnlineConfig(2, {"m": 0}, None)  # s = 0: nobody stops; the two warmup traces tie 4 : 4
    first = replay(tied, sets, 0, cfg, "first")
    assert first.correct.tolist() == [1.0]  # answer 1 was met first
    assert replay(tied, sets, 0, cfg, "smallest").correct.tolist() == [0.0]
    assert replay(tied, sets, 0, cfg, "fractional").correct.tolist() == [0.5]


def test_the_stop_table_round_trips_through_the_score_stage_rows() -> None:
    scores, stops = score_and_stops(problem_traces("p", [c for c, _ in TRACES]), 7, GROUP,
                                    AnswersConfig("last_integer", False))
    # thresholds lie in [2, 5] (the traces' lowest values): records at 5 and above never stop a trace, and only
    # the first record below 2 can: trace 0 keeps none, trace 2 keeps 3 and 1
    assert stops[["sample_id", "spent", "value"]].values.tolist() == [[1, 2, 3.0], [2, 3, 3.0], [2, 4, 1.0],
                                                                      [3, 2, 4.0], [5, 2, 4.5]]
    profiles = problem_stops(stops.sample(frac=1, random_state=0), "p", np.arange(len(TRACES)),
                             scores["n_tokens"].to_numpy())
    assert profiles.offsets.tolist() == [0, 0, 1, 3, 4, 4, 5]


@pytest.mark.parametrize(("row", "message"), [
    ({"sample_id": 9, "spent": 2, "value": 1.0}, "stop table, problem p: sample_id 9 is not in the score table"),
    ({"sample_id": 3, "spent": 7, "value": 1.0}, "sample_id 3: a stop after 7 tokens, but the sample has 3"),
    ({"sample_id": 3, "spent": 3, "value": 4.5}, "sample_id 3: record lows must fall as tokens advance"),
])
def test_a_broken_stop_table_is_refused(row: dict, message: str) -> None:
    stops = pd.DataFrame([{"problem_id": "p", "sample_id": 3, "spent": 2, "value": 4.0}, {"problem_id": "p", **row}])
    with pytest.raises(DataError, match=message):
        problem_stops(stops, "p", np.arange(6), np.array([4, 4, 5, 3, 1, 2]))


def small_online_aggregate() -> tuple[AggregateResult, pd.DataFrame]:
    """Four problems of 12 traces each, answers 2-4 (gold 3), online DeepConf low and high from K=4: the result
    and the score table."""
    rng = np.random.default_rng(0)
    frames, stop_frames = [], []
    for problem in range(4):
        confidences = [rng.uniform(1, 6, rng.integers(1, 12)) for _ in range(12)]
        scores, stops = score_and_stops(problem_traces(f"p{problem}", confidences), 3, GROUP,
                                        AnswersConfig("last_integer", False))
        scores["answer"] = pd.array(rng.integers(2, 5, 12), dtype="Int64")
        scores["valid"] = True
        scores["correct"] = scores["answer"] == 3
        frames.append(scores)
        stop_frames.append(stops)
    online = OnlineConfig(warmup=4, percentiles={"low": 90, "high": 10}, consensus=None)
    scores = pd.concat(frames)
    return aggregate(scores, EvalConfig(k=(2, 4, 8, 12), repeat=6, seed=0, etas=(0.1,), bootstrap=200),
                     online=online, stops=pd.concat(stop_frames)), scores


def test_aggregate_replays_on_the_working_sets_of_cons_and_skips_k_below_the_warmup() -> None:
    result, everything = small_online_aggregate()
    assert [(row.method, row.k) for row in result.online] == [
        (m, k) for k in (4, 8, 12) for m in ("online_low", "online_high")]
    at_warmup = result.online_at("online_low", 4)
    assert at_warmup.savings == 0.0 and at_warmup.stopped == 0.0  # every trace is a warmup trace
    assert result.online_at("online_low", 12).cons_tokens == everything.groupby("problem_id")["n_tokens"].sum().mean()
    for row in result.online:
        assert row.tokens <= row.cons_tokens and row.ci_low <= row.mean <= row.ci_high
        assert result.paired_at(row.method, row.k) is not None
    assert result.online_at("online_low", 2) is None
