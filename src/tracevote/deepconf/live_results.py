"""A live online run scored as the replay scores a working set, and the same traces of a pool beside it.

Per problem and live method, from the stored traces (store.live), in trace order:
- The threshold s from the warmup traces (deepconf.live.warmup_threshold of their lowest-group confidences).
- The consensus check after the warmup and after each later trace (deepconf.online.consensus_checks), when
  online.consensus is set: the traces after the check that ended sampling were started before it was decided;
  they are counted and paid and never vote.
- The vote: a trace votes when it has an answer and its lowest-group confidence is >= s (a trace stopped by the
  rule never does: its last window is below s), weighted by that confidence, under eval.tie_break.
- What it cost: completion tokens received (every token that arrived), kept (up to each stop) and billed (the
  server's usage, else the tokens received, "counted by the client"); prompt tokens where the server said.

`same_traces` puts beside it, when a pool of the same setting holds traces 0..budget-1 of each problem: Cons@K
(a majority over those traces, generated in full) and the replay (deepconf.online.replay on that working set),
so the live run and its prediction are compared on exactly the traces the live run saw.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from tracevote.core.config_deepconf import DEFAULT_SIGNAL, OnlineConfig, TieBreak
from tracevote.core.errors import DataError
from tracevote.core.parquet import read_parquet_metadata
from tracevote.deepconf.evaluate import online_traces, split_problems
from tracevote.deepconf.live import LiveAnswers, lowest_groups, warmup_threshold
from tracevote.deepconf.online import OnlineTrace, consensus_checks, replay
from tracevote.deepconf.signals import table_signal, top_k_text, vote_weights
from tracevote.deepconf.voting import majority_vote, tie_credit, weighted_vote
from tracevote.store.ledger import fingerprint_of, folder_name
from tracevote.store.live import LiveLedger, LiveManifest, LiveTrace
from tracevote.store.token_signals import trace_signal

NO_ANSWER = -1


@dataclass(frozen=True)
class LiveProblem:
    """One problem's live run under one method."""

    problem_id: str
    method: str
    correct: float  # 1/0, or the tie credit under tie_break fractional
    answered: bool
    threshold: float
    started: int  # traces started (and stored): the warmup's and the method's
    stopped: int  # closed by the confidence rule
    cancelled: int  # closed when the consensus check ended sampling
    # of the stopped and cancelled, those the server had already finished (its finish_reason had arrived): their
    # close saved nothing; and those stored before tracevote recorded it
    closed_after_finish: int
    closed_unrecorded: int
    after_decision: int  # started before the check that ended sampling was decided (cancelled or not)
    voted: int
    received: int  # completion tokens that arrived
    kept: int  # up to and including each trace's stop
    billed: int  # completion tokens billed: the server's usage, else those received (broken attempts' included)
    counted_by_client: int  # the part of `billed` the client counted (no usage from the server)
    prompt_tokens: int  # the server's counts, where it sent them
    prompts_unknown: int  # traces whose prompt tokens the server did not report
    usd: float  # as priced when each trace was stored
    failed_attempts: int = 0  # stream attempts that broke and were asked again (their tokens are in billed)


def score_problem(problem_id: str, method: str, percentile: float, traces: Sequence[LiveTrace], *, warmup: int,
                  group_size: int, consensus: float | None, answers: LiveAnswers, tie_break: TieBreak,
                  token: str = DEFAULT_SIGNAL, top_k: int | None = None) -> LiveProblem:
    """The live run of one problem under one method; `traces` are its stored traces 0..n-1 in order (the warmup's
    first)."""
    lowest = lowest_groups([trace_signal(token, top_k, trace.sample.token_logprobs, trace.sample.top_logprobs,
                                         trace.sample.token_confidence) for trace in traces], group_size)
    threshold = warmup_threshold(lowest[:warmup], percentile)
    codes, gold = answers.coded(problem_id, list(traces))
    with np.errstate(invalid="ignore"):
        weights = np.where((codes >= 0) & (lowest >= threshold), vote_weights(lowest, token), np.nan)
    decided = _decided(codes, weights, warmup, consensus)
    weights[decided + 1:] = np.nan
    vote = weighted_vote(codes[None, :], weights[None, :], tie_break)
    credit = tie_credit(vote, gold)[0] if gold >= 0 else 0.0
    answered = bool(vote.prediction[0] >= 0)
    correct = credit if tie_break == "fractional" else float(answered and vote.prediction[0] == gold)
    reasons = [trace.stop_reason for trace in traces]
    closed = [trace for trace in traces if trace.stop_reason in ("confidence", "consensus-cancelled")]
    return LiveProblem(
        problem_id=problem_id, method=method, correct=float(correct), answered=answered, threshold=threshold,
        started=len(traces), stopped=reasons.count("confidence"), cancelled=reasons.count("consensus-cancelled"),
        closed_after_finish=sum(t.server_finished is True for t in closed),
        closed_unrecorded=sum(t.server_finished is None for t in closed),
        after_decision=len(traces) - decided - 1, voted=int((~np.isnan(weights)).sum()),
        received=sum(t.received for t in traces), kept=sum(t.sample.n_tokens for t in traces),
        billed=sum(t.completion_tokens + t.failed_tokens for t in traces),
        counted_by_client=sum((t.completion_tokens if t.usage_source == "client" else 0) + t.failed_tokens
                              for t in traces),
        prompt_tokens=sum(t.prompt_tokens for t in traces if t.prompt_tokens is not None),
        prompts_unknown=sum(t.prompt_tokens is None for t in traces), usd=sum(t.usd for t in traces),
        failed_attempts=sum(t.failed_attempts for t in traces))


def score_run(manifest_path: Path, manifest: LiveManifest, answers: LiveAnswers,
              tie_break: TieBreak) -> list[LiveProblem]:
    """Every problem of a live run under each of its methods, read from its ledgers: traces 0..warmup-1 from the
    warmup's (shared by every method), the rest from the method's."""
    warmup = LiveLedger(manifest.root(manifest_path, manifest.warmup_ledger))
    scored = []
    for name, relative in manifest.method_ledgers.items():
        ledger = LiveLedger(manifest.root(manifest_path, relative))
        for problem_id in manifest.problems:
            stored = warmup.traces(problem_id) | ledger.traces(problem_id)
            traces = _in_order(manifest_path, problem_id, name, stored, manifest.warmup)
            scored.append(score_problem(problem_id, name, manifest.percentiles[name], traces,
                                        warmup=manifest.warmup, group_size=manifest.group_size,
                                        consensus=manifest.consensus, answers=answers, tie_break=tie_break,
                                        token=manifest.token, top_k=manifest.top_k))
    return scored


def _in_order(path: Path, problem_id: str, method: str, traces: dict[int, LiveTrace], warmup: int) -> list[LiveTrace]:
    """The problem's traces 0..n-1; a gap, or a warmup not whole, means the run was cut short."""
    ordered = [traces[i] for i in range(len(traces)) if i in traces]
    if len(ordered) != len(traces) or len(ordered) < warmup:
        raise DataError(f"{path}: the live run of problem {problem_id!r} (method {method}) lacks traces (it holds "
                        f"{sorted(traces)[:8]}...): run `dvc repro build_online@...` to finish it")
    return ordered


def _decided(codes: np.ndarray, weights: np.ndarray, warmup: int, consensus: float | None) -> int:
    """The trace after which the consensus check ended sampling; the last trace when none did."""
    if consensus is None or len(codes) < warmup:
        return len(codes) - 1
    reached = np.flatnonzero(consensus_checks(codes[None, :], weights[None, :], warmup, consensus)[0])
    return int(reached[0]) if len(reached) else len(codes) - 1


@dataclass(frozen=True)
class SameTraces:
    """Pool samples 0..budget-1 of one problem, generated in full: Cons@K on them, and the replay's prediction."""

    problem_id: str
    cons_correct: float
    cons_tokens: int  # every token of every trace
    replay_correct: dict[str, float]  # by live method
    replay_tokens: dict[str, float]


def same_traces(trace: OnlineTrace, problem_id: str, budget: int, percentiles: dict[str, float], warmup: int,
                consensus: float | None, tie_break: TieBreak) -> SameTraces:
    """Cons@budget and each method's replay on the working set 0..budget-1 of a pool problem (`trace` holds
    exactly its samples 0..budget-1, in order)."""
    sets = np.arange(budget)[None, :]
    majority = majority_vote(trace.codes[None, :], tie_break)
    credit = tie_credit(majority, trace.gold_code)[0]
    right = trace.gold_code >= 0 and majority.prediction[0] == trace.gold_code
    cons = credit if tie_break == "fractional" else float(right)
    replays = {name: replay(trace, sets, percentile, OnlineConfig(warmup, {name: percentile}, consensus), tie_break)
               for name, percentile in percentiles.items()}
    return SameTraces(problem_id=problem_id, cons_correct=float(cons), cons_tokens=int(trace.n_tokens.sum()),
                      replay_correct={name: float(r.correct[0]) for name, r in replays.items()},
                      replay_tokens={name: float(r.tokens[0]) for name, r in replays.items()})


def pool_traces(scores: pd.DataFrame, stops: pd.DataFrame, budget: int,
                signal: str = DEFAULT_SIGNAL) -> dict[str, OnlineTrace]:
    """Each pool problem's samples 0..budget-1 as the replay reads them (score and stop tables of those samples
    alone); a problem holding fewer is left out."""
    kept = scores[scores["sample_id"] < budget]
    problems = [p for p in split_problems(kept, signal=signal) if len(p) == budget]
    traces = online_traces(problems, stops[stops["sample_id"] < budget])
    return {problem.problem_id: trace for problem, trace in zip(problems, traces, strict=True)}


def pool_beside(scores: Path, manifest: LiveManifest, tie_break: TieBreak) -> tuple[list[SameTraces], str | None]:
    """Cons@K and the replay on the live run's traces, read from the score stage's tables of a pool of the same
    setting (`scores`: data/scores/<dataset>.parquet, its stop table beside it); or none, and why."""
    stops_path = scores.with_suffix(".stops.parquet")
    if not scores.is_file() or not stops_path.is_file():
        return [], (f"no pool of {manifest.dataset} was scored ({scores if not scores.is_file() else stops_path} is "
                    f"missing: add {manifest.dataset} to deepconf.datasets)")
    metadata = read_parquet_metadata(scores)
    setting = manifest.setting  # the pool's setting: a pool of it is named as build_pool names it
    expected = folder_name(setting["model"], fingerprint_of(setting), simulated=setting["backend"] == "sim")
    if Path(str(metadata.get("pool"))).name != expected:
        return [], f"the scored pool ({metadata.get('pool')}) is of another setting than the live run ({expected})"
    if (table_signal(metadata), metadata.get("top_k", "null")) != (manifest.token, top_k_text(manifest.top_k)):
        return [], (f"the pool was scored on token signal {table_signal(metadata)} at top_k {metadata.get('top_k')}, "
                    f"the live run used {manifest.token} at top_k {top_k_text(manifest.top_k)}")
    if metadata.get("group_size") != str(manifest.group_size):
        return [], (f"the pool was scored with windows of {metadata.get('group_size')} tokens, the live run used "
                    f"{manifest.group_size}")
    budget = manifest.budget
    table = pd.read_parquet(scores, filters=[("sample_id", "<", budget)])
    stops = pq.read_table(stops_path, filters=[("sample_id", "<", budget)]).to_pandas()
    traces = pool_traces(table, stops, budget, table_signal(metadata))
    lacking = [pid for pid in manifest.problems if pid not in traces]
    if lacking:
        return [], f"the pool holds fewer than {budget} traces of {len(lacking)} problems (pool.n_pool)"
    return [same_traces(traces[pid], pid, budget, manifest.percentiles, manifest.warmup, manifest.consensus,
                        tie_break) for pid in manifest.problems], None
