"""A live run's thresholds and consensus checks: rebuilt from the stored traces when a run starts (the same
numbers a run that was never stopped reached, no request), then brought up to date as each trace is stored.

Each method's threshold is the percentile of the warmup's lowest-group confidences; with online.consensus, the
leading answer's share of the vote weight is checked after the warmup and after each later trace, in trace
order, and once it reaches tau the streams of later traces are closed.
"""

from __future__ import annotations

import numpy as np

from tracevote.core.errors import DataError
from tracevote.deepconf.live import lowest_groups, warmup_threshold
from tracevote.deepconf.online import consensus_checks
from tracevote.deepconf.signals import vote_weights
from tracevote.sampling.live_rules import CodesFn, LiveRules
from tracevote.sampling.live_schedule import LiveJob, LiveMethod, LiveProblem
from tracevote.store.live import LiveLedger, LiveTrace


def load_problems(warmup: LiveLedger, methods: dict[str, LiveLedger], problem_ids: list[str],
          messages: dict[str, list[dict[str, str]]], rules: LiveRules, codes: CodesFn) -> list[LiveProblem]:
    """Every problem's stored traces, thresholds and consensus checks, as a run left them."""
    problems = []
    for problem_id in problem_ids:
        problem = LiveProblem(problem_id, messages.get(problem_id, []), warmup.traces(problem_id), {
            name: LiveMethod(name, rules.percentiles[name], ledger.traces(problem_id))
            for name, ledger in methods.items()})
        _after_warmup(problem, rules, codes)
        problems.append(problem)
    return problems


def _after_warmup(problem: LiveProblem, rules: LiveRules, codes: CodesFn) -> None:
    """Once every warmup trace is in: each method's threshold, then its consensus checks as far as traces are in."""
    if not problem.warmed_up(rules.warmup):
        return
    lowest = _lowest(problem, "", [problem.warmup[i] for i in range(rules.warmup)], rules)
    for method in problem.methods.values():
        method.threshold = warmup_threshold(lowest, method.percentile)
        _check_threshold(problem, method)
        _check_consensus(problem, method, rules, codes)


def _check_threshold(problem: LiveProblem, method: LiveMethod) -> None:
    """The threshold rebuilt from the stored warmup is the one the method's stored traces were streamed under."""
    for trace in method.traces.values():
        same = trace.threshold == method.threshold or (np.isnan(method.threshold) and trace.threshold is None)
        if not same:
            raise DataError(f"problem {problem.problem_id}, method {method.name}: trace {trace.index} was streamed "
                            f"under threshold {trace.threshold!r}, but the stored warmup gives {method.threshold!r}; "
                            f"the warmup ledger and this method's ledger do not belong together")


def record(job: LiveJob, trace: LiveTrace, rules: LiveRules, codes: CodesFn) -> None:
    problem = job.problem
    if job.method is None:
        problem.warmup[job.index] = trace
        _after_warmup(problem, rules, codes)
    else:
        job.method.traces[job.index] = trace
        _check_consensus(problem, job.method, rules, codes)


def _check_consensus(problem: LiveProblem, method: LiveMethod, rules: LiveRules, codes: CodesFn) -> None:
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


def _lowest(problem: LiveProblem, method: str, traces: list[LiveTrace], rules: LiveRules) -> np.ndarray:
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
