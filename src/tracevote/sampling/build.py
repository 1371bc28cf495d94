"""Filling a pool: request exactly the missing samples, store each one the moment it arrives.

Worker threads make the requests; only the calling thread writes, one whole frame per sample, so a
kill at any moment loses at most the requests in flight. Samples are requested sample-major
(sample 0 of every problem, then sample 1, ...), so an interrupted build leaves balanced problems.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field

from tracevote.core.config import PricingConfig
from tracevote.core.errors import TracevoteError
from tracevote.core.retry import TransientError
from tracevote.datasets.problems import Problem
from tracevote.sampling.budget import CostEstimate, estimate, spent_text, usd
from tracevote.store import codec
from tracevote.store.framing import FrameWriter
from tracevote.store.pool import Pool, Setting
from tracevote.store.records import Sample

# (messages, problem id, sample id) -> the sample, and the raw response when the build keeps raw.
SampleFn = Callable[[list[dict[str, str]], str, int], tuple[Sample, bytes | None]]


@dataclass(frozen=True)
class BuildPlan:
    missing: dict[str, list[int]]
    cost: CostEstimate

    @property
    def n_requests(self) -> int:
        return sum(len(ids) for ids in self.missing.values())


@dataclass
class BuildSummary:
    requested: int = 0
    stored: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usd: float = 0.0
    elapsed_s: float = 0.0
    failures: collections.Counter[str] = field(default_factory=collections.Counter)
    simulated_as: str | None = None  # the model a simulated build's cost is priced as

    def render(self) -> str:
        lines = [f"stored {self.stored} of {self.requested} requested samples in {self.elapsed_s:.1f}s; "
                 f"{self.prompt_tokens} prompt + {self.completion_tokens} completion tokens, "
                 f"{spent_text(self.usd, self.simulated_as)}"]
        lines += [f"  failed after retries: {count} x {cause}" for cause, count in self.failures.most_common()]
        return "\n".join(lines)


def plan_build(pool: Pool, problems: list[Problem], setting: Setting, n_pool: int,
               pricing: PricingConfig, *, simulated_as: str | None = None) -> BuildPlan:
    missing = pool.missing([p.id for p in problems], n_pool)
    by_id = {p.id: p for p in problems}
    sizes = [setting.prompt_bytes(by_id[pid]) for pid, ids in missing.items() for _ in ids]
    return BuildPlan(missing, estimate(sizes, setting.max_tokens, pricing, simulated_as=simulated_as))


def sample_order(missing: dict[str, list[int]]) -> Iterator[tuple[str, int]]:
    """Sample-major order: [("a", 0), ("b", 0), ("a", 1), ("b", 1), ...]."""
    queues = {pid: collections.deque(ids) for pid, ids in missing.items()}
    while queues:
        for pid in list(queues):
            yield pid, queues[pid].popleft()
            if not queues[pid]:
                del queues[pid]


def run_build(pool: Pool, problems: list[Problem], plan: BuildPlan, sample_fn: SampleFn, *,
              concurrency: int, pricing: PricingConfig,
              on_sample: Callable[[Sample, BuildSummary], None] | None = None) -> BuildSummary:
    """Request every missing sample with `concurrency` workers; stop at once on a non-retryable error."""
    by_id = {p.id: p for p in problems}
    setting = Setting(**pool.meta["setting"])
    summary = BuildSummary(requested=plan.n_requests, simulated_as=plan.cost.simulated_as)
    started = time.monotonic()
    order = sample_order(plan.missing)
    executor = cf.ThreadPoolExecutor(concurrency, thread_name_prefix="sample")
    with ExitStack() as stack:
        writers: dict[str, FrameWriter] = {}
        in_flight: dict[cf.Future, tuple[str, int]] = {}
        try:
            while True:
                _submit_up_to(2 * concurrency, in_flight, order, executor, sample_fn, by_id, setting)
                if not in_flight:
                    break
                done, _ = cf.wait(in_flight, return_when=cf.FIRST_COMPLETED)
                for future in done:
                    pid, sid = in_flight.pop(future)
                    if pid not in writers:
                        writers[pid] = stack.enter_context(pool.writer(pid))
                    _store(future, writers[pid], summary, pricing, on_sample, pid, sid)
        finally:
            # On a fatal error or ^C, drop what has not started; requests in flight finish on their own.
            executor.shutdown(wait=False, cancel_futures=True)
    summary.elapsed_s = time.monotonic() - started
    return summary


def _submit_up_to(limit: int, in_flight: dict, order: Iterator[tuple[str, int]], executor: cf.Executor,
                  sample_fn: SampleFn, by_id: dict[str, Problem], setting: Setting) -> None:
    while len(in_flight) < limit:
        nxt = next(order, None)
        if nxt is None:
            return
        pid, sid = nxt
        in_flight[executor.submit(sample_fn, setting.messages(by_id[pid]), pid, sid)] = (pid, sid)


def _store(future: cf.Future, writer: FrameWriter, summary: BuildSummary, pricing: PricingConfig,
           on_sample: Callable[[Sample, BuildSummary], None] | None, pid: str, sid: int) -> None:
    try:
        sample, raw = future.result()
    except TransientError as exc:  # retries ran out: the sample stays missing, and the cause is counted
        summary.failures[exc.cause] += 1
        return
    except TracevoteError:
        raise
    if (sample.problem_id, sample.sample_id) != (pid, sid):
        raise RuntimeError(f"backend returned {sample.problem_id}/{sample.sample_id} for {pid}/{sid}")
    writer.append(sid, codec.encode(sample, raw=raw))
    summary.stored += 1
    summary.prompt_tokens += sample.prompt_tokens
    summary.completion_tokens += sample.completion_tokens
    summary.usd = usd(summary.prompt_tokens, summary.completion_tokens, pricing)
    if on_sample is not None:
        on_sample(sample, summary)
