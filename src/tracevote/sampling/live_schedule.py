"""Which trace a live run starts next, and how many it may still start: each problem's warmup traces and each
method's, with their cursors, the traces in flight (and how to cancel them) and those that failed.

Problems go in order, a problem's warmup first, then each method's next trace, until the method's budget or
its consensus stop (tracevote.sampling.live_consensus sets `ended_at`).
"""

from __future__ import annotations

import threading
from collections.abc import Container
from dataclasses import dataclass, field

from tracevote.sampling.live_retry import Attempts
from tracevote.sampling.live_rules import LiveRules
from tracevote.store.live import LiveTrace


@dataclass
class LiveMethod:
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
class LiveProblem:
    problem_id: str
    messages: list[dict[str, str]]
    warmup: dict[int, LiveTrace]
    methods: dict[str, LiveMethod]
    in_flight: set[int] = field(default_factory=set)  # warmup traces streaming
    failed: set[int] = field(default_factory=set)
    lowest: dict[tuple[str, int], float] = field(default_factory=dict)  # cached per (ledger, index)
    cursor: int = 0  # every warmup index below it has started (or is stored)

    def warmed_up(self, warmup: int) -> bool:
        return len(self.warmup) >= warmup and all(i in self.warmup for i in range(warmup))


@dataclass(frozen=True)
class LiveJob:
    problem: LiveProblem
    method: LiveMethod | None  # None: a warmup trace
    index: int
    cancel: threading.Event
    attempts: Attempts = field(default_factory=Attempts)  # its broken attempts, booked by the stream's thread


def next_job(problems: list[LiveProblem], rules: LiveRules) -> LiveJob | None:
    """The first trace that may start: problems in order, a problem's warmup first, then each method's next.

    An index once started is stored, in flight or failed for the rest of the run, so each cursor only moves
    forward, and a problem with nothing left to start is never looked at again."""
    while problems and _started_all(problems[0], rules):
        problems.pop(0)
    for problem in problems:
        problem.cursor = _advance(problem.cursor, rules.warmup, problem.warmup, problem.in_flight, problem.failed)
        if problem.cursor < rules.warmup:
            return LiveJob(problem, None, problem.cursor, threading.Event())
        if not problem.warmed_up(rules.warmup):
            continue
        for method in problem.methods.values():
            if method.ended_at is not None:
                continue
            method.cursor = _advance(max(method.cursor, rules.warmup), rules.budget, method.traces,
                                     method.in_flight, method.failed)
            if method.cursor < rules.budget:
                return LiveJob(problem, method, method.cursor, threading.Event())
    return None


def _advance(cursor: int, end: int, *taken: Container[int]) -> int:
    """The first index from `cursor` below `end` in none of `taken` (or `end`)."""
    while cursor < end and any(cursor in each for each in taken):
        cursor += 1
    return cursor


def _started_all(problem: LiveProblem, rules: LiveRules) -> bool:
    """Every trace the problem may still need has started (its warmup, and each method up to its budget or the
    consensus stop): nothing is left to start, though some may still stream."""
    if problem.cursor < rules.warmup:
        return False
    if not problem.warmed_up(rules.warmup):  # a warmup trace streaming, or failed: no method trace starts this run
        return not problem.in_flight
    return all(method.ended_at is not None or method.cursor >= rules.budget for method in problem.methods.values())


def still_missing(problem: LiveProblem, rules: LiveRules) -> int:
    count = sum(1 for i in range(rules.warmup) if i not in problem.warmup)
    for method in problem.methods.values():
        last = rules.budget - 1 if method.ended_at is None else method.ended_at
        count += sum(1 for i in range(rules.warmup, last + 1) if i not in method.traces)
    return count


def count_missing(problems: list[LiveProblem], rules: LiveRules) -> int:
    return sum(still_missing(problem, rules) for problem in problems)


def claim(job: LiveJob) -> None:
    if job.method is None:
        job.problem.in_flight.add(job.index)
    else:
        job.method.in_flight[job.index] = job.cancel


def release(job: LiveJob) -> None:
    if job.method is None:
        job.problem.in_flight.discard(job.index)
    else:
        job.method.in_flight.pop(job.index, None)
