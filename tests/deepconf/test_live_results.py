"""Scoring a live run (deepconf.live_results) on hand-made traces: the vote the replay would cast, the consensus stop
read in trace order (traces after it counted and paid, never voting), the billing the client counted, and Cons@K and
the replay on the same traces."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import orjson
import pytest

from tests.deepconf.test_online import small_online_aggregate
from tracevote.core.config_datasets import AnswersConfig
from tracevote.core.errors import DataError
from tracevote.deepconf.confidence import StopProfiles
from tracevote.deepconf.live import LiveAnswers
from tracevote.deepconf.live_results import pool_beside, same_traces, score_problem, score_run
from tracevote.deepconf.online import OnlineTrace
from tracevote.report.headline import live_headlines
from tracevote.report.live import (
    RECEIVED_NOTE,
    Comparison,
    repeated_replay,
    summarize,
    summary_json,
    table_csv,
    table_markdown,
)
from tracevote.store.live import LiveLedger, LiveManifest, LiveTrace, StopReason, decode, encode, open_ledger
from tracevote.store.records import Sample

ANSWERS = LiveAnswers(AnswersConfig(fallback="none", truncated_fallback=False), {"p": 7}, None)


def trace(index: int, confidence: list[float], answer: int | None, reason: StopReason = "finished", *,
          server_usage: bool = True, received: int | None = None, server_finished: bool | None = False) -> LiveTrace:
    text = "" if answer is None else f"so \\boxed{{{answer}}}"
    sample = Sample(problem_id="p", sample_id=index, text=text, tokens=["t"] * len(confidence),
                    token_logprobs=np.zeros(len(confidence), dtype=np.float32), top_logprobs=None, top_tokens=None,
                    token_confidence=np.array(confidence, dtype=np.float32), answer=None,
                    finish_reason="stop" if reason == "finished" else reason, prompt_tokens=10,
                    completion_tokens=len(confidence), latency_s=0.0)
    arrived = len(confidence) if received is None else received
    return LiveTrace(sample=sample, stop_reason=reason, received=arrived,
                     prompt_tokens=10 if server_usage else None, completion_tokens=arrived,
                     usage_source="server" if server_usage else "client", threshold=None, usd=1e-6 * arrived,
                     server_finished=server_finished)


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


def manifest(dataset: str) -> LiveManifest:
    return LiveManifest(dataset=dataset, warmup_ledger="w", method_ledgers={"low": "l"}, problems=["p"], warmup=2,
                        budget=5, percentiles={"low": 90.0}, group_size=2, consensus=None, traces=5, simulated=True,
                        setting={"model": "m", "backend": "sim"}, answers={})


def test_without_a_pool_no_saving_is_reported_and_the_reason_is_given(tmp_path: Path) -> None:
    same, absent = pool_beside(tmp_path / "toy.parquet", manifest("toy"), "smallest")
    assert same == [] and absent is not None and "add toy to deepconf.datasets" in absent
    traces = [trace(0, [5, 5, 5], 7), trace(1, [1, 1, 1], 3), trace(2, [6, 6, 6], 7)]
    scored = score_problem("p", "low", 90.0, traces, warmup=2, group_size=2, consensus=None, answers=ANSWERS,
                           tie_break="smallest")
    live = summarize([scored], ["low"], bootstrap=50, seed=0, level=0.95, budget=5)
    table = table_markdown(live, None, absent, budget=5, simulated=True)
    assert f"No saving is reported: {absent}." in table and "fewer completion tokens" not in table
    assert table.startswith("SIMULATED") and "$ / problem (SIMULATED: list prices, nothing spent)" in table
    header, row = table_csv(live, None, None, budget=5, simulated=True).splitlines()
    assert dict(zip(header.split(","), row.split(","), strict=True))["saved_vs_cons_pct"] == ""
    assert row.startswith("live online_low,") and row.endswith(",SIMULATED")
    headline = live_headlines(live, None, problems=1, budget=5, simulated=True)["online_low"]
    assert headline["tokens_per_problem"] == 9 and not {"saved_pct", "cons_tokens_per_problem"} & set(headline)
    summary = summary_json(live, None, absent, {"simulated": True}, None, absent)
    assert summary["same_traces"] is None and summary["same_traces_absent"] == absent


def test_a_pool_with_scores_but_no_stop_table_is_no_pool(tmp_path: Path) -> None:
    (tmp_path / "toy.parquet").write_bytes(b"not read")
    same, absent = pool_beside(tmp_path / "toy.parquet", manifest("toy"), "smallest")
    assert same == [] and absent is not None and "toy.stops.parquet is missing" in absent


def stored_run(folder: Path, warmup: list[LiveTrace], streamed: list[LiveTrace], *, consensus: float | None,
               percentile: float) -> tuple[Path, LiveManifest]:
    """A live run of problem "p" on disk: the warmup's traces on one ledger, the method's on another, encoded as
    build_online stores them, and the manifest that names both."""
    setting = {"model": "m", "backend": "sim"}
    ledgers = {"warmup": open_ledger(folder / "online", "warmup", {"part": "warmup", **setting}, simulated=True),
               "high": open_ledger(folder / "online", "high", {"part": "stream", **setting}, simulated=True)}
    for name, traces in (("warmup", warmup), ("high", streamed)):
        with ledgers[name].writer("p") as writer:
            for stored in traces:
                writer.append(stored.index, encode(stored, simulated=True))
    relative = {name: str(ledger.root.relative_to(folder)) for name, ledger in ledgers.items()}
    manifest = LiveManifest(dataset="toy", warmup_ledger=relative["warmup"], method_ledgers={"high": relative["high"]},
                            problems=["p"], warmup=len(warmup), budget=len(warmup) + len(streamed),
                            percentiles={"high": percentile}, group_size=2, consensus=consensus,
                            traces=len(warmup) + len(streamed), simulated=True, setting=setting, answers={})
    return folder / "toy.json", manifest


def test_a_run_read_from_its_ledgers_is_scored_as_the_traces_themselves(tmp_path: Path) -> None:
    warmup = [trace(0, [2, 2], 3), trace(1, [2, 2], 3)]
    streamed = [trace(2, [9, 9], 7, server_usage=False, received=3), trace(3, [9, 9], 7),
                trace(4, [9, 9], 7, "consensus-cancelled", server_usage=False)]
    path, manifest = stored_run(tmp_path, warmup, streamed, consensus=0.9, percentile=10.0)
    [scored] = score_run(path, manifest, ANSWERS, "smallest")
    assert scored == score_problem("p", "high", 10.0, warmup + streamed, warmup=2, group_size=2, consensus=0.9,
                                   answers=ANSWERS, tie_break="smallest")
    assert (scored.after_decision, scored.cancelled, scored.voted, scored.correct) == (3, 1, 2, 0.0)
    assert (scored.billed, scored.counted_by_client, scored.prompts_unknown) == (2 + 2 + 3 + 2 + 2, 3 + 2, 2)


def test_stops_the_server_had_already_finished_are_counted_and_said_per_method(tmp_path: Path) -> None:
    """A stop whose stream had brought the server's finish_reason saved the server nothing: read back from the
    ledgers, counted among the stops and cancels, and said in live.md with the traces stored before it was kept."""
    warmup = [trace(0, [2, 2], 3), trace(1, [2, 2], 3)]
    streamed = [trace(2, [1, 1], 7, "confidence", server_usage=False, server_finished=True),
                trace(3, [1, 1], 7, "confidence", server_usage=False, server_finished=False),
                trace(4, [1, 1], 7, "confidence", server_usage=False, server_finished=None),
                trace(5, [9, 9], 7), trace(6, [9, 9], 7, "consensus-cancelled", server_usage=False,
                                           server_finished=True)]
    path, manifest = stored_run(tmp_path, warmup, streamed, consensus=None, percentile=10.0)
    [scored] = score_run(path, manifest, ANSWERS, "smallest")
    assert (scored.stopped, scored.cancelled, scored.closed_after_finish, scored.closed_unrecorded) == (3, 1, 2, 1)
    live = summarize([scored], ["high"], bootstrap=50, seed=0, level=0.95, budget=7)
    comparison = Comparison(cons_accuracy_pct=100.0, cons_tokens=20.0, replay_accuracy_pct={"high": 100.0},
                            replay_tokens={"high": 14.0}, saving_vs_cons_pct={"high": 30.0})
    table = table_markdown(live, comparison, None, budget=7, simulated=True)
    said = ("live high: 2 of 4 stops came after the server had finished the trace (its finish_reason arrived "
            "before the client closed the stream), saving it nothing (1 of them stored before tracevote recorded it).")
    assert said in table.splitlines()
    assert RECEIVED_NOTE in table.splitlines()  # the saving is on tokens received: the client counted some
    assert summary_json(live, comparison, None, {})["live"]["high"]["closed_after_finish"] == 2
    header, row = table_csv(live, comparison, None, budget=7, simulated=True).splitlines()[:2]
    assert dict(zip(header.split(","), row.split(","), strict=True))["closed_after_finish"] == "2"


def test_without_a_stop_or_a_client_count_neither_note_is_written() -> None:
    traces = [trace(0, [5, 5, 5], 7), trace(1, [1, 1, 1], 3), trace(2, [6, 6, 6], 7)]
    scored = score_problem("p", "low", 90.0, traces, warmup=2, group_size=2, consensus=None, answers=ANSWERS,
                           tie_break="smallest")
    live = summarize([scored], ["low"], bootstrap=50, seed=0, level=0.95, budget=3)
    comparison = Comparison(cons_accuracy_pct=100.0, cons_tokens=9.0, replay_accuracy_pct={"low": 100.0},
                            replay_tokens={"low": 9.0}, saving_vs_cons_pct={"low": 0.0})
    table = table_markdown(live, comparison, None, budget=3, simulated=True)
    assert "stops came after" not in table and RECEIVED_NOTE not in table and "fewer completion tokens" in table


def test_a_run_with_a_gap_in_its_traces_is_refused_naming_the_problem(tmp_path: Path) -> None:
    path, manifest = stored_run(tmp_path, [trace(0, [2, 2], 3), trace(1, [2, 2], 3)], [trace(3, [9, 9], 7)],
                                consensus=None, percentile=10.0)
    with pytest.raises(DataError, match=r"problem 'p' .* lacks traces"):
        score_run(path, manifest, ANSWERS, "smallest")


def test_the_replays_mean_over_working_sets_is_read_only_under_the_live_runs_settings() -> None:
    result = small_online_aggregate()[0]  # warmup 4, low 90 and high 10, no consensus, K 2, 4, 8, 12
    settings = {"percentiles": {"low": 90.0}, "warmup": 4, "consensus": None}
    repeated, absent = repeated_replay(result, budget=8, **settings)
    low = result.online_at("online_low", 8)
    assert absent is None and repeated is not None and repeated.repeat == 6
    assert (repeated.accuracy_pct["low"], repeated.tokens["low"]) == (100 * low.mean, low.tokens)
    assert repeated_replay(result, budget=6, **settings) == (None, "the budget 6 is not one of eval.k [2, 4, 8, 12]")
    for other in ({"warmup": 8}, {"consensus": 0.95}, {"percentiles": {"low": 80.0}}):
        repeated, absent = repeated_replay(result, budget=8, **(settings | other))
        assert repeated is None and absent is not None


def test_broken_attempts_stored_with_their_traces_are_billed_and_said_in_live_md(tmp_path: Path) -> None:
    """A trace asked again after its stream broke carries those attempts on its ledger: read back, their tokens are
    billed (counted by the client) and their count is said per method; a trace stored before retries reads as none."""
    warmup = [dataclasses.replace(trace(0, [2, 2], 3), failed_attempts=2, failed_tokens=9), trace(1, [2, 2], 3)]
    streamed = [dataclasses.replace(trace(2, [9, 9], 7), failed_attempts=1, failed_tokens=4), trace(3, [9, 9], 7)]
    path, manifest = stored_run(tmp_path, warmup, streamed, consensus=None, percentile=10.0)
    stored = LiveLedger(manifest.root(path, manifest.warmup_ledger)).traces("p")
    assert (stored[0].failed_attempts, stored[0].failed_tokens, stored[1].failed_attempts) == (2, 9, 0)
    [scored] = score_run(path, manifest, ANSWERS, "smallest")
    assert (scored.failed_attempts, scored.billed, scored.counted_by_client) == (3, 4 * 2 + 9 + 4, 9 + 4)
    live = summarize([scored], ["high"], bootstrap=50, seed=0, level=0.95, budget=4)
    assert summary_json(live, None, "no pool", {})["live"]["high"]["failed_attempts"] == 3
    said = ("live high: 3 stream attempts broke after tokens arrived and were asked again from the start; the tokens "
            "received on them are in the billed tokens and dollars above.")
    assert said in table_markdown(live, None, "no pool", budget=4, simulated=True).splitlines()


def test_a_live_trace_stored_before_retries_reads_as_one_without_broken_attempts() -> None:
    stored = trace(0, [2, 2], 3)
    payload = encode(stored, simulated=True)
    size = int.from_bytes(payload[4:8], "little")
    header = orjson.loads(payload[8:8 + size])
    old = {key: value for key, value in header.items() if key not in ("failed_attempts", "failed_tokens")}
    written = orjson.dumps(old)
    read = decode(payload[:4] + len(written).to_bytes(4, "little") + written + payload[8 + size:], "old trace")
    assert (read.failed_attempts, read.failed_tokens, read.sample.tokens) == (0, 0, stored.sample.tokens)
