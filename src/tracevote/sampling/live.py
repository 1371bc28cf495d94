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

This module runs the streams and stores what they bring; the rules it follows are sampling.live_rules, which
trace starts next sampling.live_schedule, the thresholds and consensus checks sampling.live_consensus, and its
tally sampling.live_summary.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from tracevote.core.config_endpoints import ModelConfig, PricingConfig
from tracevote.core.costs import CostEstimate, prompt_bytes, prompt_tokens, simulated_as, worst_case_usd
from tracevote.core.errors import QuotaError, StorageError, TracevoteError
from tracevote.core.retry import TransientError
from tracevote.deepconf.live import WindowStop
from tracevote.sampling.breaker import OutageError
from tracevote.sampling.budget import SpendCap, SpendCapError
from tracevote.sampling.client import ChatClient, StreamBroken
from tracevote.sampling.live_consensus import load_problems, record
from tracevote.sampling.live_retry import gave_up, price, stream_trace
from tracevote.sampling.live_rules import CodesFn, LiveRules
from tracevote.sampling.live_schedule import LiveJob, claim, count_missing, next_job, release
from tracevote.sampling.live_summary import LiveSummary
from tracevote.sampling.stream import HOLD_CHUNKS, Streamed
from tracevote.store.frame_writer import FrameWriter
from tracevote.store.live import LiveLedger, LiveTrace, StopReason, encode
from tracevote.store.records import Sample
from tracevote.store.token_signals import LOG_SCALE_SIGNALS

_STOPPING = (OutageError, QuotaError, StorageError, SpendCapError)


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
    return count_missing(load_problems(warmup, methods, problem_ids, {}, rules, codes), rules)


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
    problems = load_problems(warmup, methods, list(messages), messages, rules, codes)
    pending = list(problems)  # those that may still start a trace, in order
    ledgers = {None: warmup, **methods}
    executor = cf.ThreadPoolExecutor(concurrency, thread_name_prefix="stream")
    in_flight: dict[cf.Future[tuple[Streamed, StopReason, int]], LiveJob] = {}
    stop: TracevoteError | None = None
    with contextlib.ExitStack() as stack:
        writers = _Writers(ledgers, stack)
        try:
            while True:
                while stop is None and len(in_flight) < concurrency:
                    job = next_job(pending, rules)
                    if job is None:
                        break
                    if cap is not None:
                        try:
                            cap.reserve(worst_case_usd(job.problem.messages, rules.max_tokens, pricing),
                                        lambda: count_missing(problems, rules))
                        except SpendCapError as exc:
                            stop = exc
                            break
                    claim(job)
                    summary.started += 1
                    in_flight[executor.submit(_stream, client, job, rules, batch_chunks, pricing)] = job
                if not in_flight:
                    break
                done, _ = cf.wait(in_flight, return_when=cf.FIRST_COMPLETED)
                for future in done:
                    job = in_flight.pop(future)
                    release(job)
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
                    record(job, trace, rules, codes)
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


def _fail(job: LiveJob, summary: LiveSummary, cause: str, cap: SpendCap | None, worst: float) -> None:
    """A trace that ended unstored; its broken attempts were billed."""
    (job.problem.failed if job.method is None else job.method.failed).add(job.index)
    summary.failures[cause] += 1
    _count_broken(job, summary)
    summary.usd += job.attempts.usd
    if cap is not None:
        cap.settle(worst, job.attempts.usd)


def _count_broken(job: LiveJob, summary: LiveSummary) -> None:
    """The trace's broken attempts: billed as their tokens arrived, counted by the client."""
    summary.broken_attempts += job.attempts.failed
    summary.broken_tokens += job.attempts.tokens
    summary.billed_completion += job.attempts.tokens
    summary.counted_by_client += job.attempts.tokens


def _key(job: LiveJob) -> str:
    """"q3/2 (warmup)", "q3/5 (low)": the trace's sample key and whose ledger it belongs on."""
    return f"{job.problem.problem_id}/{job.index}" + (" (warmup)" if job.method is None else f" ({job.method.name})")


def _stream(client: ChatClient, job: LiveJob, rules: LiveRules, batch_chunks: int,
            pricing: PricingConfig) -> tuple[Streamed, StopReason, int]:
    """One trace streamed (asked again from its start when its stream breaks), how it ended and how many of its
    tokens are kept; closed when the stop rule fires or the run cancels it."""
    method = job.method

    def rule() -> WindowStop | None:
        return None if method is None else WindowStop(method.threshold, rules.group_size,
                                                    nonnegative=rules.token not in LOG_SCALE_SIGNALS)

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


def _trace(job: LiveJob, received: Streamed, reason: StopReason, kept: int, paid: float) -> LiveTrace:
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

    def store(self, job: LiveJob, trace: LiveTrace, simulated: bool) -> None:
        ledger = self._ledgers[None if job.method is None else job.method.name]
        ledger.check_kind(simulated)
        self._writer(job).append(job.index, encode(trace, simulated=simulated))

    def path(self, job: LiveJob) -> Path:
        return self._ledgers[None if job.method is None else job.method.name].log_path(job.problem.problem_id)

    def _writer(self, job: LiveJob) -> FrameWriter:
        key = (None if job.method is None else job.method.name, job.problem.problem_id)
        if key not in self._open:
            self._open[key] = self._stack.enter_context(self._ledgers[key[0]].writer(key[1]))
        return self._open[key]
