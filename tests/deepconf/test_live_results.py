"""Scoring a live run (deepconf.live_results) on hand-made traces: the vote the replay would cast, the consensus stop
read in trace order (traces after it counted and paid, never voting), the billing the client counted, and Cons@K and
the replay on the same traces."""

from __future__ import annotations

import numpy as np
import pytest

from tracevote.core.config_datasets import AnswersConfig
from tracevote.deepconf.confidence import StopProfiles
from tracevote.deepconf.live import LiveAnswers
from tracevote.deepconf.live_results import same_traces, score_problem
from tracevote.deepconf.online import OnlineTrace
from tracevote.store.live import LiveTrace, StopReason
from tracevote.store.records import Sample

ANSWERS = LiveAnswers(AnswersConfig(fallback="none", truncated_fallback=False), {"p": 7}, None)


def trace(index: int, confidence: list[float], answer: int | None, reason: StopReason = "finished", *,
          server_usage: bool = True, received: int | None = None) -> LiveTrace:
    text = "" if answer is None else f"so \\boxed{{{answer}}}"
    sample = Sample(problem_id="p", sample_id=index, text=text, tokens=["t"] * len(confidence),
                    token_logprobs=np.zeros(len(confidence), dtype=np.float32), top_logprobs=None, top_tokens=None,
                    token_confidence=np.array(confidence, dtype=np.float32), answer=None,
                    finish_reason="stop" if reason == "finished" else reason, prompt_tokens=10,
                    completion_tokens=len(confidence), latency_s=0.0)
    arrived = len(confidence) if received is None else received
    return LiveTrace(sample=sample, stop_reason=reason, received=arrived,
                     prompt_tokens=10 if server_usage else None, completion_tokens=arrived,
                     usage_source="server" if server_usage else "client", threshold=None, usd=1e-6 * arrived)


def test_the_vote_keeps_traces_at_or_above_the_warmups_percentile_and_a_stopped_trace_never_votes() -> None:
    traces = [trace(0, [5, 5, 5], 7), trace(1, [1, 1, 1], 3), trace(2, [6, 6, 6], 7),
              trace(3, [0.5, 0.5], 3, "confidence", server_usage=False, received=4), trace(4, [0.9, 0.9, 0.9], 3)]
    # warmup 2: lowest 5 and 1; the 90th percentile is 4.6, so only traces with lowest >= 4.6 vote: 0 and 2
    scored = score_problem("p", "low", 90.0, traces, warmup=2, group_size=2, consensus=None, answers=ANSWERS,
                           tie_break="smallest")
    assert scored.threshold == pytest.approx(4.6)
    assert (scored.correct, scored.answered, scored.voted) == (1.0, True, 2)
    assert (scored.started, scored.stopped, scored.cancelled, scored.after_decision) == (5, 1, 0, 0)
    assert (scored.received, scored.kept, scored.billed) == (3 + 3 + 3 + 4 + 3, 14, 16)
    assert (scored.counted_by_client, scored.prompts_unknown, scored.prompt_tokens) == (4, 1, 40)
    assert scored.usd == pytest.approx(16e-6)


def test_traces_after_the_consensus_check_that_ended_sampling_are_paid_and_never_vote() -> None:
    # warmup 2 both answer 3 (weight 2 each); check after trace 1: 3 holds all the weight >= 0.9, sampling ends
    traces = [trace(0, [2, 2], 3), trace(1, [2, 2], 3), trace(2, [9, 9], 7), trace(3, [9, 9], 7),
              trace(4, [9, 9], 7, "consensus-cancelled")]
    scored = score_problem("p", "high", 10.0, traces, warmup=2, group_size=2, consensus=0.9, answers=ANSWERS,
                           tie_break="smallest")
    assert (scored.after_decision, scored.cancelled, scored.voted) == (3, 1, 2)
    assert (scored.correct, scored.answered) == (0.0, True)  # 7 would win if the later traces voted
    unchecked = score_problem("p", "high", 10.0, traces, warmup=2, group_size=2, consensus=None, answers=ANSWERS,
                              tie_break="smallest")
    assert unchecked.correct == 1.0 and unchecked.after_decision == 0


def test_cons_and_the_replay_on_the_same_traces() -> None:
    # three traces of 4 tokens; no stop records (none falls below any threshold): the replay spends every token
    online = OnlineTrace(codes=np.array([1, 0, 1]), gold_code=1, lowest=np.array([3.0, 2.0, 1.0]),
                         n_tokens=np.array([4, 4, 4]),
                         stops=StopProfiles(offsets=np.zeros(4, dtype=np.int64), spent=np.zeros(0, dtype=np.int64),
                                            value=np.zeros(0)))
    same = same_traces(online, "p", 3, {"low": 90.0}, 2, None, "smallest")
    assert (same.cons_correct, same.cons_tokens) == (1.0, 12)
    assert same.replay_tokens == {"low": 12.0}
    assert same.replay_correct == {"low": 1.0}  # threshold 2.9: trace 0 alone votes, for 1
