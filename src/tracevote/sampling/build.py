"""Filling a pool: request exactly the missing samples through the ledger's runner (tracevote.sampling.runner).

Each sample is a one-call conversation, stored the moment it arrives. Samples are requested sample-major
(sample 0 of every problem, then sample 1, ...), so an interrupted build leaves balanced problems. With
`per_request` > 1 (pool.samples_per_request, where the endpoint honours `n`) one request asks for up to that many
consecutive missing samples of a problem (`n` choices sharing one prefill, sampling.choices), and each choice is
stored as its own sample, exactly as if it had been requested alone; a choice that failed stays missing.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from tracevote.core.config_endpoints import PricingConfig
from tracevote.core.costs import CostEstimate, estimate, prompt_bytes, usd, worst_case_usd
from tracevote.core.retry import TransientError
from tracevote.core.simulated import SOLVE
from tracevote.datasets.problems import Problem
from tracevote.sampling.budget import SpendCap
from tracevote.sampling.prompts import setting_messages
from tracevote.sampling.runner import OneCall, Paid, RunSummary, Shared, run_calls
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
# (messages, problem id, sample ids) -> each sample id's trace, or why its choice failed (one request, n choices)
ManySampleFn = Callable[[list[dict[str, str]], str, list[int]], dict[int, "Sampled | TransientError"]]
T = TypeVar("T")


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


def sample_order(missing: dict[str, Sequence[T]]) -> Iterator[tuple[str, T]]:
    """Sample-major order: [("a", 0), ("b", 0), ("a", 1), ("b", 1), ...]."""
    queues = {pid: collections.deque(ids) for pid, ids in missing.items()}
    while queues:
        for pid in list(queues):
            yield pid, queues[pid].popleft()
            if not queues[pid]:
                del queues[pid]


def request_groups(missing: dict[str, list[int]], per_request: int) -> Iterator[tuple[str, list[int]]]:
    """One request's samples each: runs of consecutive missing ids, at most `per_request` long, sample-major.

    >>> list(request_groups({"a": [0, 1, 2, 5], "b": [0, 1]}, 2))
    [('a', [0, 1]), ('b', [0, 1]), ('a', [2]), ('a', [5])]
    """
    return sample_order({pid: _runs(ids, per_request) for pid, ids in missing.items()})


def _runs(ids: list[int], longest: int) -> list[list[int]]:
    runs: list[list[int]] = []
    for sample_id in ids:
        if runs and runs[-1][-1] == sample_id - 1 and len(runs[-1]) < longest:
            runs[-1].append(sample_id)
        else:
            runs.append([sample_id])
    return runs


def run_build(pool: Pool, problems: list[Problem], plan: BuildPlan, sample_fn: SampleFn, *,
              concurrency: int, pricing: PricingConfig, max_tokens: int, cap: SpendCap | None = None,
              first_alone: bool = False,
              on_sample: Callable[[Paid[Sample], RunSummary], None] | None = None,
              per_request: int = 1, sample_many: ManySampleFn | None = None) -> RunSummary:
    """Request every missing sample with `concurrency` workers (requests of up to `per_request` samples each
    through `sample_many`); stop at once on a non-retryable error, and softly (in-flight samples stored) on an
    outage, a failed write or `cap` (each sample at most `max_tokens`)."""
    if per_request > 1 and sample_many is None:
        raise ValueError("per_request > 1 needs sample_many")
    messages = setting_messages(problems, pool.setting)
    conversations = (OneCall(Call(pid, ids[0], SOLVE, messages[pid], shared_with=tuple(ids[1:])))
                     for pid, ids in request_groups(plan.missing, per_request))

    def paid(call: Call, sampled: Sampled, sample_id: int) -> Paid[Sample]:
        sample = sampled.sample
        if (sample.problem_id, sample.sample_id) != (call.item_id, sample_id):
            raise RuntimeError(f"backend returned {sample.problem_id}/{sample.sample_id} for "
                               f"{call.item_id}/{sample_id}")
        # the sampler parsed the alternatives' strings only when pool.keep_top_tokens asks for them
        payload = codec.encode(sample, raw=sampled.raw, keep_top_tokens=True, simulated=sampled.simulated)
        return Paid(sample, payload, sample.prompt_tokens,
                    sample.completion_tokens, usd(sample.prompt_tokens, sample.completion_tokens, pricing),
                    simulated=sampled.simulated)

    def paid_request(call: Call) -> Paid[Sample] | Shared[Sample]:
        if not call.shared_with:
            return paid(call, sample_fn(call.messages, call.item_id, int(call.key)), int(call.key))
        assert sample_many is not None
        outcomes = sample_many(call.messages, call.item_id, [int(key) for key in call.keys])
        return Shared({sid: paid(call, got, sid) for sid, got in outcomes.items() if isinstance(got, Sampled)},
                      {sid: got.cause for sid, got in outcomes.items() if isinstance(got, TransientError)})

    summary = RunSummary(simulated_as=plan.cost.simulated_as, unit="samples", priced_as=pool.setting.model)
    return run_calls(pool, conversations, paid_request, concurrency=concurrency, summary=summary,
                     on_stored=on_sample, cap=cap, first_alone=first_alone,
                     worst_usd=lambda call: len(call.keys) * worst_case_usd(call.messages,
                                                                             call.max_tokens or max_tokens, pricing))
