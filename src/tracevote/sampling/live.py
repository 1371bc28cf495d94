"""A live online DeepConf run: traces streamed from the endpoint and closed as their confidence falls.

Per problem (as the replay, tracevote.deepconf.online, on the working set 0..budget-1):
1. Traces 0..warmup-1 are generated in full (streamed, never stopped); they are shared by every method.
2. Each method's threshold is the percentile of their lowest-group confidences (deepconf.live.warmup_threshold).
3. Traces warmup..budget-1 of each method stream under its threshold; each is closed at the first full window
   whose mean is below it (deepconf.live.WindowStop), which stops the server generating.
4. With online.consensus (tau), after the warmup and after each later trace, in trace order, the leading answer's
   share of the vote weight is checked; once it reaches tau no later trace starts, and those already streaming
   are closed (stop reason "consensus-cancelled"). Traces stream `concurrency` at a time, so some start before the
   check that ends sampling: they are paid and stored, and never vote (the sequential rule decides alone).

Every trace is stored the moment it ends (store.live), from this thread only, so a kill -9 loses at most the
streams in flight. A rerun loads what is stored, rebuilds the thresholds and the consensus checks from it (the
same numbers, no request) and streams only the missing traces. A trace whose stream broke after tokens arrived is
asked again from its start under the client's retries (sampling.live_retry), its broken attempts billed and stored
with it; one still broken when its retries run out ends the run softly, in one line naming it.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import contextlib
import threading
import time
from collections.abc import Callable, Container
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from tracevote.core.config import Params
from tracevote.core.config_endpoints import ModelConfig, PricingConfig
from tracevote.core.costs import CostEstimate, prompt_bytes, prompt_tokens, simulated_as, spent_text, worst_case_usd
from tracevote.core.errors import DataError, QuotaError, StorageError, TracevoteError
from tracevote.core.retry import TransientError
from tracevote.deepconf.live import WindowStop, lowest_groups, warmup_threshold
from tracevote.deepconf.online import consensus_checks
from tracevote.deepconf.signals import vote_weights
from tracevote.sampling.breaker import OutageError
from tracevote.sampling.budget import SpendCap, SpendCapError
from tracevote.sampling.client import ChatClient, StreamBroken
from tracevote.sampling.live_retry import Attempts, gave_up, price, stream_trace
from tracevote.sampling.stream import HOLD_CHUNKS, Streamed
from tracevote.store.frame_writer import FrameWriter
from tracevote.store.live import LiveLedger, LiveTrace, StopReason, encode, method_setting, warmup_setting
from tracevote.store.pool import Setting
from tracevote.store.records import Sample
from tracevote.store.token_signals import trace_signal

# answer codes (-1: none) of one problem's traces, given in trace order
CodesFn = Callable[[str, list[LiveTrace]], np.ndarray]
_STOPPING = (OutageError, QuotaError, StorageError, SpendCapError)


@dataclass(frozen=True)
class LiveRules:
    """What decides where a live run's traces stop and how many start."""

    warmup: int
    budget: int
    percentiles: dict[str, float]  # the live methods: name -> percentile
    group_size: int  # confidence.group_size: the window
    consensus: float | None
    max_tokens: int
    token: str = "deepconf"  # confidence.token: the per-token signal the windows average
    top_k: int | None = None  # confidence.top_k

    @property
    def keeps_top(self) -> bool:
        """Whether the streams keep their top-k: the signal is computed from it (else C_i or the chosen logprobs)."""
        return self.token == "entropy" or (self.token == "deepconf" and self.top_k is not None)

    def signal(self, token_logprobs: np.ndarray, top: np.ndarray | None, confidence: np.ndarray) -> np.ndarray:
        """The per-token signal of tokens, as the score stage reads it from a pool (store.token_signals)."""
        return trace_signal(self.token, self.top_k, token_logprobs, top, confidence)


@dataclass
class LiveSummary:
    """What a run did: traces stored by how they ended, tokens received and billed, dollars, failures."""

    started: int = 0
    stored: int = 0
    by_reason: collections.Counter[str] = field(default_factory=collections.Counter)
    received_tokens: int = 0
    kept_tokens: int = 0
    billed_completion: int = 0
    counted_by_client: int = 0  # billed completion tokens counted by the client (the server sent no usage)
    prompts_estimated: int = 0  # traces without the server's usage: their prompt priced as the spend guard does
    usd: float = 0.0
    broken_attempts: int = 0  # stream attempts that broke after tokens arrived (each asked again, or given up on)
    broken_tokens: int = 0  # tokens received on them (billed, counted by the client)
    failures: collections.Counter[str] = field(default_factory=collections.Counter)
    elapsed_s: float = 0.0
    simulated_as: str | None = None

    def add(self, trace: LiveTrace, paid_usd: float) -> None:
        self.stored += 1
        self.by_reason[trace.stop_reason] += 1
        self.received_tokens += trace.received
        self.kept_tokens += trace.sample.n_tokens
        self.billed_completion += trace.completion_tokens
        self.counted_by_client += trace.completion_tokens if trace.usage_source == "client" else 0
        self.prompts_estimated += trace.prompt_tokens is None
        self.usd += paid_usd

    def render(self) -> str:
        reasons = ", ".join(f"{count} {reason}" for reason, count in sorted(self.by_reason.items())) or "none"
        lines = [f"stored {self.stored} of {self.started} traces started in {self.elapsed_s:.1f}s ({reasons}); "
                 f"{self.received_tokens} completion tokens received, {self.kept_tokens} kept; billed "
                 f"{self.billed_completion} completion tokens ({self.counted_by_client} counted by the client: the "
                 f"server sent no usage), {spent_text(self.usd, self.simulated_as)}"
                 + (f" (the prompts of {self.prompts_estimated} traces without usage estimated as the spend guard "
                    f"does)" if self.prompts_estimated else "")]
        if self.broken_attempts:
            lines.append(f"  {self.broken_attempts} stream attempts broke after tokens arrived, each asked again "
                         f"from its start: the {self.broken_tokens} tokens received on them are billed above (counted "
                         f"by the client)")
        lines += [f"  failed: {count} x {cause}" for cause, count in self.failures.most_common()]
        return "\n".join(lines)


@dataclass
class _Method:
    """One method's traces of one problem (warmup..budget-1) and where its consensus checks stand."""

    name: str
    percentile: float
    traces: dict[int, LiveTrace]
    threshold: float = float("nan")
    decided: int = 0  # traces 0..decided-1 checked, in order (warmup ones included)
    ended_at: int | None = None  # the trace after which the consensus check ended sampling
    in_flight: dict[int, threading.Event] = field(default_factory=dict)
    failed: set[int] = field(default_factory=set)
    cursor: int = 0  # every index below it has started (or is stored)
    codes: list[int] = field(default_factory=list)  # answer codes of traces 0..len-1, when a code is per trace


@dataclass
class _Problem:
    problem_id: str
    messages: list[dict[str, str]]
    warmup: dict[int, LiveTrace]
    methods: dict[str, _Method]
    in_flight: set[int] = field(default_factory=set)  # warmup traces streaming
    failed: set[int] = field(default_factory=set)
    lowest: dict[tuple[str, int], float] = field(default_factory=dict)  # cached per (ledger, index)
    cursor: int = 0  # every warmup index below it has started (or is stored)

    def warmed_up(self, warmup: int) -> bool:
        return len(self.warmup) >= warmup and all(i in self.warmup for i in range(warmup))


@dataclass(frozen=True)
class _Job:
    problem: _Problem
    method: _Method | None  # None: a warmup trace
    index: int
    cancel: threading.Event
    attempts: Attempts = field(default_factory=Attempts)  # its broken attempts, booked by the stream's thread


WARMUP = "warmup"


def live_rules(params: Params) -> LiveRules:
    online = params.online
    return LiveRules(warmup=online.warmup, budget=online.live.budget,
                     percentiles={name: online.percentiles[name] for name in online.live.methods},
                     group_size=params.confidence.group_size, consensus=online.consensus,
                     max_tokens=params.decoding.max_tokens, token=params.confidence.token,
                     top_k=params.confidence.top_k)


def ledger_settings(params: Params, rules: LiveRules) -> dict[str, dict[str, Any]]:
    """The warmup ledger's setting (WARMUP) and each live method's, by name."""
    pool = Setting.from_params(params).record()
    return {WARMUP: warmup_setting(pool)} | {
        name: method_setting(pool, percentile=percentile, group_size=rules.group_size, token=rules.token,
                             top_k=rules.top_k,
                             warmup=rules.warmup, budget=rules.budget, consensus=rules.consensus)
        for name, percentile in rules.percentiles.items()}


def worst_case(messages: dict[str, list[dict[str, str]]], missing: int, max_tokens: int,
               model: ModelConfig) -> CostEstimate:
    """Every missing trace at the longest prompt and `max_tokens`: the spend guard's estimate."""
    pricing = model.priced()
    longest = max(messages.values(), key=prompt_bytes)
    return CostEstimate(missing, missing * prompt_tokens(prompt_bytes(longest)), missing * max_tokens,
                        missing * worst_case_usd(longest, max_tokens, pricing), pricing.checked,
                        simulated_as(model))


def missing_traces(warmup: LiveLedger, methods: dict[str, LiveLedger], problem_ids: list[str],
                   rules: LiveRules, codes: CodesFn) -> int:
    """How many traces a run could still start: each missing warmup trace, and each method's missing traces until
    the consensus check (replayed on what is stored) ends its sampling; the worst case the spend guard prices."""
    return sum(_missing(problem, rules) for problem in _load(warmup, methods, problem_ids, {}, rules, codes))


def _missing(problem: _Problem, rules: LiveRules) -> int:
    count = sum(1 for i in range(rules.warmup) if i not in problem.warmup)
    for method in problem.methods.values():
        last = rules.budget - 1 if method.ended_at is None else method.ended_at
        count += sum(1 for i in range(rules.warmup, last + 1) if i not in method.traces)
    return count


def run_live(client: ChatClient, warmup: LiveLedger, methods: dict[str, LiveLedger],
             messages: dict[str, list[dict[str, str]]], rules: LiveRules, codes: CodesFn, *, concurrency: int,
             pricing: PricingConfig, cap: SpendCap | None = None, batch_chunks: int = HOLD_CHUNKS,
             on_stored: Callable[[LiveTrace, LiveSummary], None] | None = None,
             summary: LiveSummary | None = None) -> LiveSummary:
    """Stream every missing trace of every problem in `messages` (see the module docstring), `concurrency` at a
    time, problems in order; stores each trace as it ends. An outage, an empty quota, a failed write or the spend
    cap stop the run softly (streams in flight end and are stored), then raise."""
    summary = summary or LiveSummary()
    started = time.monotonic()
    problems = _load(warmup, methods, list(messages), messages, rules, codes)
    pending = list(problems)  # those that may still start a trace, in order
    ledgers = {None: warmup, **methods}
    executor = cf.ThreadPoolExecutor(concurrency, thread_name_prefix="stream")
    in_flight: dict[cf.Future[tuple[Streamed, StopReason, int]], _Job] = {}
    stop: TracevoteError | None = None
    with contextlib.ExitStack() as stack:
        writers = _Writers(ledgers, stack)
        try:
            while True:
                while stop is None and len(in_flight) < concurrency:
                    job = _next_job(pending, rules)
                    if job is None:
                        break
                    if cap is not None:
                        try:
                            cap.reserve(worst_case_usd(job.problem.messages, rules.max_tokens, pricing),
                                        lambda: _count_missing(problems, rules))
                        except SpendCapError as exc:
                            stop = exc
                            break
                    _claim(job)
                    summary.started += 1
                    in_flight[executor.submit(_stream, client, job, rules, batch_chunks, pricing)] = job
                if not in_flight:
                    break
                done, _ = cf.wait(in_flight, return_when=cf.FIRST_COMPLETED)
                for future in done:
                    job = in_flight.pop(future)
                    _release(job)
                    worst = worst_case_usd(job.problem.messages, rules.max_tokens, pricing)
                    try:
                        streamed, reason, kept = future.result()
                    except _STOPPING as exc:
                        stop = stop or exc
                        _fail(job, summary, type(exc).__name__, cap, worst)
                        continue
                    except (StreamBroken, TransientError) as exc:  # still broken after the client's retries
                        _fail(job, summary, exc.cause, cap, worst)
                        if not job.cancel.is_set():  # a cancelled trace is not missing: the run goes on
                            stop = stop or gave_up(_key(job), job.attempts, exc, client.max_retries)
                        continue
                    paid = price(streamed, job.problem.messages, pricing) + job.attempts.usd
                    trace = _trace(job, streamed, reason, kept, paid)
                    if cap is not None:
                        cap.settle(worst, paid)
                    try:
                        writers.store(job, trace, streamed.simulated)
                    except (OSError, StorageError) as exc:
                        stop = stop or (exc if isinstance(exc, StorageError) else StorageError(
                            f"{writers.path(job)}: {exc.strerror or exc} while storing a trace; the run stopped "
                            f"streaming. Free some space and run the stage again: it streams only what is missing"))
                        continue
                    summary.add(trace, paid)
                    _count_broken(job, summary)
                    _record(job, trace, rules, codes)
                    if on_stored is not None:
                        on_stored(trace, summary)
        finally:
            for job in in_flight.values():
                job.cancel.set()  # a fatal error or ^C: every open stream closes at its next read
            executor.shutdown(wait=False, cancel_futures=True)
    summary.elapsed_s = time.monotonic() - started
    if isinstance(stop, SpendCapError) and cap is not None:
        raise cap.stopped()
    if stop is not None:
        raise stop
    return summary


def _load(warmup: LiveLedger, methods: dict[str, LiveLedger], problem_ids: list[str],
          messages: dict[str, list[dict[str, str]]], rules: LiveRules, codes: CodesFn) -> list[_Problem]:
    """Every problem's stored traces, thresholds and consensus checks, as a run left them."""
    problems = []
    for problem_id in problem_ids:
        problem = _Problem(problem_id, messages.get(problem_id, []), warmup.traces(problem_id), {
            name: _Method(name, rules.percentiles[name], ledger.traces(problem_id))
            for name, ledger in methods.items()})
        _after_warmup(problem, rules, codes)
        problems.append(problem)
    return problems


def _after_warmup(problem: _Problem, rules: LiveRules, codes: CodesFn) -> None:
    """Once every warmup trace is in: each method's threshold, then its consensus checks as far as traces are in."""
    if not problem.warmed_up(rules.warmup):
        return
    lowest = _lowest(problem, "", [problem.warmup[i] for i in range(rules.warmup)], rules)
    for method in problem.methods.values():
        method.threshold = warmup_threshold(lowest, method.percentile)
        _check_threshold(problem, method)
        _check_consensus(problem, method, rules, codes)


def _check_threshold(problem: _Problem, method: _Method) -> None:
    """The threshold rebuilt from the stored warmup is the one the method's stored traces were streamed under."""
    for trace in method.traces.values():
        same = trace.threshold == method.threshold or (np.isnan(method.threshold) and trace.threshold is None)
        if not same:
            raise DataError(f"problem {problem.problem_id}, method {method.name}: trace {trace.index} was streamed "
                            f"under threshold {trace.threshold!r}, but the stored warmup gives {method.threshold!r}; "
                            f"the warmup ledger and this method's ledger do not belong together")


def _record(job: _Job, trace: LiveTrace, rules: LiveRules, codes: CodesFn) -> None:
    problem = job.problem
    if job.method is None:
        problem.warmup[job.index] = trace
        _after_warmup(problem, rules, codes)
    else:
        job.method.traces[job.index] = trace
        _check_consensus(problem, job.method, rules, codes)


def _check_consensus(problem: _Problem, method: _Method, rules: LiveRules, codes: CodesFn) -> None:
    """Check after each trace in order, as far as traces are stored; once a check ends sampling, close the streams
    of later traces."""
    if rules.consensus is None or method.ended_at is not None:
        return
    ordered = [problem.warmup[i] for i in range(rules.warmup)]
    ordered += [method.traces[i] for i in range(rules.warmup, rules.budget) if i in method.traces]
    contiguous = next((n for n, trace in enumerate(ordered) if trace.index != n), len(ordered))
    if contiguous <= method.decided or contiguous < rules.warmup:
        return
    lowest = _lowest(problem, method.name, ordered[:contiguous], rules)
    if getattr(codes, "per_trace", False):  # a trace's code is its own: only the new traces' are read
        method.codes += codes(problem.problem_id, ordered[len(method.codes):contiguous]).tolist()
        answer = np.array(method.codes, dtype=np.int64)
    else:
        answer = codes(problem.problem_id, ordered[:contiguous])
    with np.errstate(invalid="ignore"):
        weights = np.where(lowest >= method.threshold, vote_weights(lowest, rules.token), np.nan)
    # the check after trace i reads traces 0..i alone, so one pass over the stored prefix gives every check
    reached = consensus_checks(answer[None, :], weights[None, :], rules.warmup, rules.consensus)[0]
    first = np.flatnonzero(reached[max(method.decided, rules.warmup - 1):])
    if len(first):
        method.ended_at = int(first[0]) + max(method.decided, rules.warmup - 1)
    method.decided = contiguous
    if method.ended_at is not None:
        for index, cancel in method.in_flight.items():
            if index > method.ended_at:
                cancel.set()


def _lowest(problem: _Problem, method: str, traces: list[LiveTrace], rules: LiveRules) -> np.ndarray:
    """Each trace's lowest-group confidence (deepconf.live.lowest_groups), cached per trace: the warmup's under "",
    a method's under its name."""
    def key(trace: LiveTrace) -> tuple[str, int]:
        return ("" if trace.index < rules.warmup else method, trace.index)

    missing = [trace for trace in traces if key(trace) not in problem.lowest]
    if missing:
        lowest = lowest_groups([rules.signal(trace.sample.token_logprobs, trace.sample.top_logprobs,
                                             trace.sample.token_confidence) for trace in missing], rules.group_size)
        for trace, value in zip(missing, lowest.tolist(), strict=True):
            problem.lowest[key(trace)] = value
    return np.array([problem.lowest[key(trace)] for trace in traces], dtype=np.float64)


def _next_job(problems: list[_Problem], rules: LiveRules) -> _Job | None:
    """The first trace that may start: problems in order, a problem's warmup first, then each method's next.

    An index once started is stored, in flight or failed for the rest of the run, so each cursor only moves
    forward, and a problem with nothing left to start is never looked at again."""
    while problems and _started_all(problems[0], rules):
        problems.pop(0)
    for problem in problems:
        problem.cursor = _advance(problem.cursor, rules.warmup, problem.warmup, problem.in_flight, problem.failed)
        if problem.cursor < rules.warmup:
            return _Job(problem, None, problem.cursor, threading.Event())
        if not problem.warmed_up(rules.warmup):
            continue
        for method in problem.methods.values():
            if method.ended_at is not None:
                continue
            method.cursor = _advance(max(method.cursor, rules.warmup), rules.budget, method.traces,
                                     method.in_flight, method.failed)
            if method.cursor < rules.budget:
                return _Job(problem, method, method.cursor, threading.Event())
    return None


def _advance(cursor: int, end: int, *taken: Container[int]) -> int:
    """The first index from `cursor` below `end` in none of `taken` (or `end`)."""
    while cursor < end and any(cursor in each for each in taken):
        cursor += 1
    return cursor


def _started_all(problem: _Problem, rules: LiveRules) -> bool:
    """Every trace the problem may still need has started (its warmup, and each method up to its budget or the
    consensus stop): nothing is left to start, though some may still stream."""
    if problem.cursor < rules.warmup:
        return False
    if not problem.warmed_up(rules.warmup):  # a warmup trace streaming, or failed: no method trace starts this run
        return not problem.in_flight
    return all(method.ended_at is not None or method.cursor >= rules.budget for method in problem.methods.values())


def _count_missing(problems: list[_Problem], rules: LiveRules) -> int:
    return sum(_missing(problem, rules) for problem in problems)


def _claim(job: _Job) -> None:
    if job.method is None:
        job.problem.in_flight.add(job.index)
    else:
        job.method.in_flight[job.index] = job.cancel


def _release(job: _Job) -> None:
    if job.method is None:
        job.problem.in_flight.discard(job.index)
    else:
        job.method.in_flight.pop(job.index, None)


def _fail(job: _Job, summary: LiveSummary, cause: str, cap: SpendCap | None, worst: float) -> None:
    """A trace that ended unstored; its broken attempts were billed."""
    (job.problem.failed if job.method is None else job.method.failed).add(job.index)
    summary.failures[cause] += 1
    _count_broken(job, summary)
    summary.usd += job.attempts.usd
    if cap is not None:
        cap.settle(worst, job.attempts.usd)


def _count_broken(job: _Job, summary: LiveSummary) -> None:
    """The trace's broken attempts: billed as their tokens arrived, counted by the client."""
    summary.broken_attempts += job.attempts.failed
    summary.broken_tokens += job.attempts.tokens
    summary.billed_completion += job.attempts.tokens
    summary.counted_by_client += job.attempts.tokens


def _key(job: _Job) -> str:
    """"q3/2 (warmup)", "q3/5 (low)": the trace's sample key and whose ledger it belongs on."""
    return f"{job.problem.problem_id}/{job.index}" + (" (warmup)" if job.method is None else f" ({job.method.name})")


def _stream(client: ChatClient, job: _Job, rules: LiveRules, batch_chunks: int,
            pricing: PricingConfig) -> tuple[Streamed, StopReason, int]:
    """One trace streamed (asked again from its start when its stream breaks), how it ended and how many of its
    tokens are kept; closed when the stop rule fires or the run cancels it."""
    method = job.method

    def rule() -> WindowStop | None:
        return None if method is None else WindowStop(method.threshold, rules.group_size,
                                                    nonnegative=rules.token == "deepconf")

    return stream_trace(client, job.problem.messages, f"{job.problem.problem_id}/{job.index}", rule,
                        max_tokens=rules.max_tokens, cancel=job.cancel, batch_chunks=batch_chunks,
                        attempts=job.attempts, pricing=pricing,
                        signal=lambda batch: rules.signal(batch.token_logprobs, batch.top_logprobs,
                                                          batch.token_confidence),
                        keep_top_logprobs=rules.keeps_top)


def _cut(streamed: Streamed, spent: int) -> Streamed:
    """The trace as kept: its tokens up to and including the one it stopped at (their text as its text: where the
    server split its thinking out, the kept tokens' reasoning and content are not told apart)."""
    if spent == streamed.n_tokens:
        return streamed
    return replace(streamed, tokens=streamed.tokens[:spent], text="".join(streamed.tokens[:spent]), reasoning="",
                   token_logprobs=streamed.token_logprobs[:spent],
                   top_logprobs=None if streamed.top_logprobs is None else streamed.top_logprobs[:spent],
                   token_confidence=streamed.token_confidence[:spent],
                   top_tokens=None if streamed.top_tokens is None else streamed.top_tokens[:spent])


def _trace(job: _Job, received: Streamed, reason: StopReason, kept: int, paid: float) -> LiveTrace:
    streamed = _cut(received, kept)
    sample = Sample(problem_id=job.problem.problem_id, sample_id=job.index, text=streamed.text,
                    tokens=streamed.tokens, token_logprobs=streamed.token_logprobs, top_logprobs=streamed.top_logprobs,
                    top_tokens=None, token_confidence=streamed.token_confidence, answer=None,
                    finish_reason=streamed.finish_reason or reason, prompt_tokens=streamed.prompt_tokens or 0,
                    completion_tokens=streamed.completion_tokens, latency_s=streamed.latency_s,
                    reasoning=streamed.reasoning)
    return LiveTrace(sample=sample, stop_reason=reason, received=received.n_tokens,
                     prompt_tokens=streamed.prompt_tokens, completion_tokens=streamed.completion_tokens,
                     usage_source=streamed.usage_source,
                     threshold=None if job.method is None else job.method.threshold, usd=paid,
                     server_finished=received.server_finished, failed_attempts=job.attempts.failed,
                     failed_tokens=job.attempts.tokens)


class _Writers:
    """One frame writer per (ledger, problem), opened when first needed."""

    def __init__(self, ledgers: dict[str | None, LiveLedger], stack: contextlib.ExitStack) -> None:
        self._ledgers = ledgers
        self._stack = stack
        self._open: dict[tuple[str | None, str], FrameWriter] = {}

    def store(self, job: _Job, trace: LiveTrace, simulated: bool) -> None:
        ledger = self._ledgers[None if job.method is None else job.method.name]
        ledger.check_kind(simulated)
        self._writer(job).append(job.index, encode(trace, simulated=simulated))

    def path(self, job: _Job) -> Path:
        return self._ledgers[None if job.method is None else job.method.name].log_path(job.problem.problem_id)

    def _writer(self, job: _Job) -> FrameWriter:
        key = (None if job.method is None else job.method.name, job.problem.problem_id)
        if key not in self._open:
            self._open[key] = self._stack.enter_context(self._ledgers[key[0]].writer(key[1]))
        return self._open[key]

