"""Filling a pool: request exactly the missing samples through the ledger's runner (tracevote.sampling.runner).

Each sample is a one-call conversation, stored the moment it arrives. Samples are requested sample-major
(sample 0 of every problem, then sample 1, ...), so an interrupted build leaves balanced problems.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tracevote.core.config_endpoints import PricingConfig
from tracevote.datasets.problems import Problem
from tracevote.sampling.budget import CostEstimate, SpendCap, estimate, usd, worst_case_usd
from tracevote.sampling.prompts import SOLVE, prompt_bytes, setting_messages
from tracevote.sampling.runner import OneCall, Paid, RunSummary, run_calls
from tracevote.store import codec
from tracevote.store.calls import Call
from tracevote.store.pool import Pool, Setting
from tracevote.store.records import Sample


@dataclass(frozen=True)
class Sampled:
    """One sampled trace as the backend returns it: the sample, the raw response when the build keeps raw,
    and whether tracevote's simulator answered (a ledger never mixes simulated and real replies)."""

    sample: Sample
    raw: bytes | None
    simulated: bool


# (messages, problem id, sample id) -> the sampled trace
SampleFn = Callable[[list[dict[str, str]], str, int], Sampled]


@dataclass(frozen=True)
class BuildPlan:
    missing: dict[str, list[int]]
    cost: CostEstimate

    @property
    def n_requests(self) -> int:
        return sum(len(ids) for ids in self.missing.values())


def plan_build(pool: Pool, problems: list[Problem], setting: Setting, n_pool: int,
               pricing: PricingConfig, *, simulated_as: str | None = None) -> BuildPlan:
    missing = pool.missing_samples([p.id for p in problems], n_pool)
    messages = setting_messages(problems, setting)
    sizes = [prompt_bytes(messages[pid]) for pid, ids in missing.items() for _ in ids]
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
              concurrency: int, pricing: PricingConfig, max_tokens: int, cap: SpendCap | None = None,
              first_alone: bool = False,
              on_sample: Callable[[Paid[Sample], RunSummary], None] | None = None) -> RunSummary:
    """Request every missing sample with `concurrency` workers; stop at once on a non-retryable error, and
    softly (in-flight samples stored) on an outage, a failed write or `cap` (each sample at most `max_tokens`)."""
    messages = setting_messages(problems, pool.setting)
    conversations = (OneCall(Call(pid, sid, SOLVE, messages[pid])) for pid, sid in sample_order(plan.missing))

    def paid_sample(call: Call) -> Paid[Sample]:
        sampled = sample_fn(call.messages, call.item_id, int(call.key))
        sample = sampled.sample
        if (sample.problem_id, sample.sample_id) != (call.item_id, call.key):
            raise RuntimeError(f"backend returned {sample.problem_id}/{sample.sample_id} for "
                               f"{call.item_id}/{call.key}")
        return Paid(sample, codec.encode(sample, raw=sampled.raw, simulated=sampled.simulated), sample.prompt_tokens,
                    sample.completion_tokens, usd(sample.prompt_tokens, sample.completion_tokens, pricing),
                    simulated=sampled.simulated)

    summary = RunSummary(simulated_as=plan.cost.simulated_as, unit="samples", priced_as=pool.setting.model)
    return run_calls(pool, conversations, paid_sample, concurrency=concurrency, summary=summary,
                     on_stored=on_sample, cap=cap, first_alone=first_alone,
                     worst_usd=lambda call: worst_case_usd(call.messages, call.max_tokens or max_tokens, pricing))
