"""The live online run (sampling.live) against the simulator over real HTTP streams: trace by trace the same
stops as the replay (deepconf.online) on the same traces sampled in full, also when streams break and are asked
again, the consensus stop decided in trace order whatever the concurrency (the streams still in flight then
cancelled), and a rerun that rebuilds everything from
its ledgers and streams nothing."""

from __future__ import annotations

import collections
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.sampling.test_client import make_client, messages, stats
from tests.sim_servers import holding_server
from tracevote.answers.extract import answer_candidates, resolve_answer
from tracevote.core.config_datasets import AnswersConfig
from tracevote.core.config_deepconf import ConfidenceConfig, DecodingConfig, OnlineConfig
from tracevote.core.config_endpoints import PricingConfig, SimConfig
from tracevote.deepconf.confidence import trace_measures
from tracevote.deepconf.live import LiveAnswers, WindowStop
from tracevote.deepconf.online import OnlineTrace, consensus_checks, replay, spent_tokens
from tracevote.deepconf.voting import row_percentile
from tracevote.sampling.client import ChatClient
from tracevote.sampling.live import missing_traces, run_live
from tracevote.sampling.live_rules import LiveRules
from tracevote.sampling.live_summary import LiveSummary
from tracevote.sampling.stream import stream_completion
from tracevote.sim.faults import parse_faults
from tracevote.sim.model import SimModel
from tracevote.sim.server import SimServer, start_server, stop_server
from tracevote.store.live import LiveLedger, LiveTrace
from tracevote.store.records import ProblemTraces, Sample
from tracevote.store.token_signals import trace_signal

# traces of ~120 tokens hold several windows of 24: the replay stops 37-38 of the 64 method traces on each signal
# (38-42 at 260 tokens), the consensus stop fires on two problems and cancels traces it would not stop on one
SIM = SimConfig(seed=3, signal=1.0, accuracy=0.5, mean_tokens=100, critique_noise=0.3)
DECODING = DecodingConfig(temperature=0.6, top_p=None, max_tokens=900, top_logprobs=20)
CONFIDENCE = ConfidenceConfig(group_size=24, bottom_fraction=0.1, tail_tokens=24)
ANSWERS = AnswersConfig(fallback="last_integer", truncated_fallback=False)
PRICING = PricingConfig(input_cache_miss=0.14, input_cache_hit=0.0028, output=0.28, checked="2026-07",
                        expected_output_fraction=1.0)
GOLDS = {f"q{i}": 100 + 37 * i for i in range(4)}
PERCENTILES = {"low": 90.0, "high": 10.0}


def problem_text(problem_id: str) -> str:
    return f"Problem {problem_id}: find the number."


MESSAGES = {pid: messages(problem_text(pid)) for pid in GOLDS}


@pytest.fixture(scope="module")
def server() -> Iterator[SimServer]:
    sim = SimModel(SIM, answers={problem_text(pid): gold for pid, gold in GOLDS.items()})
    server = start_server(sim)
    try:
        yield server
    finally:
        stop_server(server)


def client_for(server: SimServer, concurrency: int) -> ChatClient:
    return make_client(server.base_url, decoding=DECODING, concurrency=concurrency, timeout_s=60.0)


def rules(budget: int = 12, warmup: int = 4, consensus: float | None = None) -> LiveRules:
    return LiveRules(warmup=warmup, budget=budget, percentiles=PERCENTILES, group_size=CONFIDENCE.group_size,
                     consensus=consensus, max_tokens=DECODING.max_tokens)


def ledgers(root: Path, live: LiveRules) -> tuple[LiveLedger, dict[str, LiveLedger]]:
    warmup = LiveLedger.open_at(root / "warmup", {"part": "warmup"}, simulated=False)
    methods = {name: LiveLedger.open_at(root / name, {"part": name, "budget": live.budget,
                                                      "consensus": live.consensus}, simulated=False)
               for name in live.percentiles}
    return warmup, methods


CODES = LiveAnswers(ANSWERS, GOLDS, None)


def live_run(root: Path, server: SimServer, live: LiveRules, concurrency: int) -> dict[str, dict[str, list[LiveTrace]]]:
    """Every problem's traces by method, warmup traces first, in trace order."""
    warmup, methods = ledgers(root, live)
    with client_for(server, concurrency) as client:
        run_live(client, warmup, methods, MESSAGES, live, CODES, concurrency=concurrency, pricing=PRICING)
    return read_run(warmup, methods)


def read_run(warmup: LiveLedger, methods: dict[str, LiveLedger]) -> dict[str, dict[str, list[LiveTrace]]]:
    runs: dict[str, dict[str, list[LiveTrace]]] = {}
    for name, ledger in methods.items():
        runs[name] = {}
        for pid in GOLDS:
            traces = warmup.traces(pid) | ledger.traces(pid)
            runs[name][pid] = [traces[i] for i in sorted(traces)]
    return runs


@pytest.fixture(scope="module")
def pool(server: SimServer) -> dict[str, list[Sample]]:
    """Traces 0..15 of each problem sampled in full, non-streamed: what a pool holds."""
    with client_for(server, 4) as client:
        return {pid: [client.sample(MESSAGES[pid], problem_id=pid, sample_id=i, keep_top_logprobs=False)
                      for i in range(16)] for pid in GOLDS}


def online_trace(samples: list[Sample], gold: int, token: str = "deepconf", top_k: int | None = None) -> OnlineTrace:
    """The replay's view of streamed-in-full `samples`: `token`'s signal as the score stage reads it from a pool
    (C_i as the pool stores it, float32, for deepconf at the full width)."""
    signal = [trace_signal(token, top_k, s.token_logprobs, s.top_logprobs,
                           np.asarray(s.token_confidence, dtype=np.float32)) for s in samples]
    traces = ProblemTraces("p", np.arange(len(samples)), [], [], np.concatenate(([0], np.cumsum(
        [len(c) for c in signal]))).astype(np.int64), np.concatenate(signal))
    measures = trace_measures(traces, CONFIDENCE)
    codes = [resolve_answer(answer_candidates(s.text), s.finish_reason, ANSWERS)[0] for s in samples]
    return OnlineTrace(codes=np.array([-1 if c is None else c for c in codes], dtype=np.int64), gold_code=gold,
                       lowest=measures.lowest, n_tokens=np.array([s.n_tokens for s in samples], dtype=np.int64),
                       stops=measures.stops, signal=token)


def test_live_traces_stop_at_the_token_the_replay_stops_at_trace_by_trace(
        tmp_path: Path, server: SimServer, pool: dict[str, list[Sample]]) -> None:
    live = rules()
    runs = live_run(tmp_path, server, live, concurrency=3)
    assert stops_where_the_replay_stops(runs, pool, live) > 0, "no trace stopped: the test would prove nothing"


# each kind of stream that breaks after its first tokens; 30% of the attempts in all
BROKEN_STREAMS = "drop=0.06,cut=0.06,malformed=0.06,truncated=0.06,sentinel=0.06,stream_after=5,seed=2"


def test_streams_that_broke_and_were_asked_again_still_stop_where_the_replay_stops(
        tmp_path: Path, pool: dict[str, list[Sample]]) -> None:
    """The same sample key gives the same seed: a trace asked again is the same trace, and its stop rule starts
    afresh on it; each broken attempt is counted on the trace as stored."""
    live = rules()
    faulty = start_server(SimModel(SIM, answers={problem_text(pid): gold for pid, gold in GOLDS.items()}),
                          parse_faults(BROKEN_STREAMS))
    try:
        runs = live_run(tmp_path, faulty, live, concurrency=3)
        requests = stats(faulty)["by_sample"]
    finally:
        stop_server(faulty)
    assert stops_where_the_replay_stops(runs, pool, live) > 0, "no trace stopped: the test would prove nothing"
    # a warmup trace is shared by the methods; a method's trace i has the key of the other's trace i
    stored = {(name if t.index >= live.warmup else "", f"{pid}/{t.index}"): t
              for name, traces in runs.items() for pid, ts in traces.items() for t in ts}
    attempts = collections.Counter()
    for (_, key), trace in stored.items():
        attempts[key] += 1 + trace.failed_attempts
    assert attempts == collections.Counter(requests)
    retried = [t for t in stored.values() if t.failed_attempts]
    assert any(t.index < live.warmup for t in retried) and any(t.index >= live.warmup for t in retried)
    assert all(t.failed_tokens >= 5 * t.failed_attempts for t in retried)  # each broke after stream_after tokens


def stops_where_the_replay_stops(runs: dict[str, dict[str, list[LiveTrace]]], pool: dict[str, list[Sample]],
                                 live: LiveRules) -> int:
    """Checks each live trace against the replay on the pool's traces; how many stopped early."""
    stopped_somewhere = 0
    for name, percentile in PERCENTILES.items():
        for pid, gold in GOLDS.items():
            samples = pool[pid][:live.budget]
            trace = online_trace(samples, gold)
            sets = np.arange(live.budget)[None, :]
            threshold = row_percentile(trace.lowest[None, :live.warmup], percentile)
            spent, stopped = spent_tokens(trace, sets, threshold)
            spent[:, :live.warmup], stopped[:, :live.warmup] = trace.n_tokens[:live.warmup], False
            traces = runs[name][pid]
            assert [t.index for t in traces] == list(range(live.budget))
            for i, (kept, full) in enumerate(zip(traces, samples, strict=True)):
                where = f"{name} {pid} trace {i}"
                assert kept.sample.n_tokens == spent[0, i], where
                assert (kept.stop_reason == "confidence") == stopped[0, i], where
                assert kept.sample.tokens == full.tokens[:spent[0, i]], where
                np.testing.assert_array_equal(kept.sample.token_confidence, full.token_confidence[:spent[0, i]])
                assert kept.received >= kept.sample.n_tokens
                # a closed stream has no usage; one whose last chunk came in the read that stopped it has the server's
                assert kept.usage_source == "server" or kept.stop_reason == "confidence", where
                if kept.usage_source == "server":
                    assert kept.completion_tokens == full.n_tokens == kept.received, where
            stopped_somewhere += int(stopped.sum())
            expected = replay(trace, sets, percentile, OnlineConfig(live.warmup, {name: percentile}, None), "smallest")
            assert sum(t.sample.n_tokens for t in traces) == expected.tokens[0]
    return stopped_somewhere


def test_the_consensus_stop_is_the_sequential_one_at_any_concurrency(
        tmp_path: Path, server: SimServer, pool: dict[str, list[Sample]]) -> None:
    live = replace(rules(budget=16, consensus=0.7), percentiles={"high": 10.0})
    decided = {}
    for concurrency in (1, 4):
        runs = live_run(tmp_path / str(concurrency), server, live, concurrency=concurrency)
        for pid, gold in GOLDS.items():
            traces = runs["high"][pid]
            trace = online_trace(pool[pid][:live.budget], gold)
            expected = replay(trace, np.arange(live.budget)[None, :], 10.0, OnlineConfig(live.warmup, {"high": 10.0},
                                                                                          0.7), "smallest")
            generated = int(expected.generated[0])
            ended = ended_at(pid, traces, live)
            assert ended + 1 == generated, f"{pid} at concurrency {concurrency}"
            assert len(traces) >= generated  # traces started before the check that ended sampling are stored too
            if concurrency == 1:
                assert len(traces) == generated  # one at a time: nothing starts before the check
            decided[pid, concurrency] = ended
    assert any(decided[pid, 1] < live.budget - 1 for pid in GOLDS), "the consensus stop never fired"


def test_once_the_consensus_stop_ends_sampling_the_traces_in_flight_are_cancelled(
        tmp_path: Path, pool: dict[str, list[Sample]]) -> None:
    """Every method trace starts at once, those after the one whose check ends sampling held at the server until
    that check is done (the run has stored every earlier trace): each of them is then closed at its first tokens,
    stored as "consensus-cancelled", whatever the machine's speed."""
    live = replace(rules(budget=16, consensus=0.7), percentiles={"high": 10.0})
    pid, generated, finishes = next(case for case in map(lambda p: consensus_case(p, pool, live), GOLDS) if case[2])
    with holding_server(SimModel(SIM, answers={problem_text(p): gold for p, gold in GOLDS.items()}),
                        held=lambda key: int(key.rsplit("/", 1)[1]) >= generated) as server:
        def release_once_every_earlier_trace_is_in(_: LiveTrace, summary: LiveSummary) -> None:
            if summary.stored == generated:
                server.release()

        warmup, methods = ledgers(tmp_path, live)
        with client_for(server, live.budget - live.warmup) as client:
            run_live(client, warmup, methods, {pid: MESSAGES[pid]}, live, CODES, concurrency=live.budget - live.warmup,
                     pricing=PRICING, on_stored=release_once_every_earlier_trace_is_in)
        held = sorted(int(key.rsplit("/", 1)[1]) for key in server.held_keys)
    assert held == list(range(generated, live.budget))  # all started before the check that ended sampling
    traces = methods["high"].traces(pid)
    assert sorted(traces) == list(range(live.warmup, live.budget))
    stored = warmup.traces(pid) | traces
    assert ended_at(pid, [stored[i] for i in sorted(stored)], live) + 1 == generated  # the check the replay makes
    for index in finishes:  # traces the confidence rule would never stop: only the cancel closes them
        assert traces[index].stop_reason == "consensus-cancelled", index


def consensus_case(pid: str, pool: dict[str, list[Sample]], live: LiveRules) -> tuple[str, int, list[int]]:
    """(the problem, how many traces the consensus stop lets start, those after them the threshold never stops) as
    the replay says of the pool's traces."""
    trace = online_trace(pool[pid][:live.budget], GOLDS[pid])
    sets = np.arange(live.budget)[None, :]
    expected = replay(trace, sets, 10.0, OnlineConfig(live.warmup, {"high": 10.0}, live.consensus), "smallest")
    generated = int(expected.generated[0])
    threshold = row_percentile(trace.lowest[None, :live.warmup], 10.0)
    _, stopped = spent_tokens(trace, sets, threshold)
    finishes = [i for i in range(generated, live.budget) if not stopped[0, i]] if live.warmup < generated else []
    return pid, generated, finishes


def ended_at(pid: str, traces: list[LiveTrace], live: LiveRules) -> int:
    """The trace after which the consensus check ended sampling (the budget's last when none did)."""
    lowest = np.array([lowest_of(t) for t in traces])
    threshold = row_percentile(lowest[None, :live.warmup], 10.0)[0]
    codes = CODES(pid, traces)
    with np.errstate(invalid="ignore"):
        weights = np.where(lowest >= threshold, lowest, np.nan)
    reached = consensus_checks(codes[None, :], weights[None, :], live.warmup, live.consensus or 1.0)[0]
    return int(np.argmax(reached)) if reached.any() else live.budget - 1


def lowest_of(trace: LiveTrace) -> float:
    confidence = np.asarray(trace.sample.token_confidence, dtype=np.float32)
    one = ProblemTraces("p", np.arange(1), [], [], np.array([0, len(confidence)]), confidence)
    return float(trace_measures(one, CONFIDENCE).lowest[0])


def test_a_rerun_rebuilds_the_thresholds_from_its_ledgers_and_streams_nothing(
        tmp_path: Path, server: SimServer) -> None:
    live = replace(rules(budget=8), percentiles={"low": 90.0})
    first = live_run(tmp_path, server, live, concurrency=2)
    before = stats(server)["requests"]
    warmup, methods = ledgers(tmp_path, live)
    assert missing_traces(warmup, methods, list(GOLDS), live, CODES) == 0
    again = live_run(tmp_path, server, live, concurrency=2)
    assert stats(server)["requests"] == before
    assert [[t.sample.tokens for t in ts] for ts in again["low"].values()] == \
        [[t.sample.tokens for t in ts] for ts in first["low"].values()]


def test_window_stop_fed_in_any_batches_stops_where_the_whole_trace_says() -> None:
    rng = np.random.default_rng(0)
    confidence = rng.uniform(1, 10, 500).astype(np.float32)
    confidence[rng.choice(500, 40, replace=False)] = np.nan
    threshold = 4.9
    whole = WindowStop(threshold, 16).feed(confidence)
    assert whole is not None
    for size in (1, 7, 64):
        rule = WindowStop(threshold, 16, capacity=8)
        stops = [rule.feed(confidence[i:i + size]) for i in range(0, len(confidence), size)]
        assert next(s for s in stops if s is not None) == whole


@pytest.mark.parametrize("seed", range(4))
def test_window_stop_never_says_more_tokens_are_safe_than_come_before_its_stop(seed: int) -> None:
    """safe_tokens bounds how many tokens the client may hold back: on random traces with runs of the lowest
    confidence there is (0), fed one token at a time, the stop never comes within the count it gave."""
    rng = np.random.default_rng(seed)
    counts = []
    for _ in range(300):
        width, threshold = int(rng.integers(1, 60)), float(rng.uniform(0.5, 3.0))
        confidence = rng.uniform(0.0, 4.0, int(rng.integers(1, 400))).astype(np.float32)
        start = int(rng.integers(0, len(confidence)))
        confidence[start:start + int(rng.integers(1, 80))] = 0.0
        confidence[rng.random(len(confidence)) < 0.05] = np.nan
        stop = WindowStop(threshold, width).feed(confidence)
        rule = WindowStop(threshold, width)
        for seen in range(len(confidence)):
            safe = rule.safe_tokens()
            assert safe is not None and (stop is None or seen + safe < stop), (width, threshold, seen, safe, stop)
            counts.append(safe)
            if rule.feed(confidence[seen:seen + 1]) is not None:
                assert rule.safe_tokens() == 0
                break
    assert max(counts) > 10  # not a rule that always says 0: it lets the client hold tokens back


def test_window_stop_with_no_threshold_never_limits_the_hold() -> None:
    assert WindowStop(float("nan"), 8).safe_tokens() is None and WindowStop(0.0, 8).safe_tokens() is None


@pytest.mark.parametrize("mode", [{"batch_chunks": 1, "hold_s": None}, {}, {"batch_chunks": 7, "hold_s": 0.0}],
                         ids=["every-read", "held-default", "seven-or-at-once"])
def test_tokens_held_back_in_batches_stop_at_the_token_the_whole_trace_stops_at(server: SimServer,
                                                                                mode: dict[str, Any]) -> None:
    with client_for(server, 1) as client:
        whole = stream_completion(client, MESSAGES["q1"], sample_key="q1/5")
        sums = np.convolve(whole.token_confidence.astype(np.float64), np.ones(24), mode="valid")
        threshold = float(np.median(sums / 24))  # some windows fall below it, well inside the trace
        expected = WindowStop(threshold, 24).feed(whole.token_confidence)
        rule = WindowStop(threshold, 24)
        cut = stream_completion(client, MESSAGES["q1"], sample_key="q1/5",
                                observer=lambda batch: "stop" if rule.feed(batch.token_confidence) else None, **mode)
    assert expected is not None and 24 <= expected < whole.n_tokens
    assert rule.spent == expected and cut.stop_reason == "confidence" and cut.n_tokens >= expected
    assert cut.tokens[:expected] == whole.tokens[:expected]
    np.testing.assert_array_equal(cut.token_confidence[:expected], whole.token_confidence[:expected])
