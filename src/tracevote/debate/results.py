"""From replayed debates to what score_debate writes: a record per problem and the flat metrics.

metrics/debate.json is flat, every key naming its unit: accuracy in percent (two decimals) overall, per dataset
and per contest (`accuracy_pct`, `accuracy_<group>_pct`); calls and tokens per problem; where debates stopped, in
percent of the problems (`consensus_pct`, `stop_<stop>_pct`); judge and rating fallbacks; per-agent importance when
debate.importance is on; `simulated`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tracevote.core.config_methods import DebateConfig
from tracevote.datasets.problems import Problem
from tracevote.debate.importance import agent_importance
from tracevote.debate.protocol import STOPS, Transcript

EARLY_STOPS = ("round0", "round1", "ranking")  # before round 2: what consensus_pct counts


@dataclass(frozen=True)
class DebateResult:
    """One problem's debate: every reply's answer by round, how it ended, what it cost."""

    dataset: str
    contest: str | None  # e.g. aime_2025_I; None when the dataset has no contests
    problem_id: str
    gold: int
    final_answer: int | None
    correct: bool
    stop: str
    answers: dict[str, list[dict[str, Any]]]  # "round0" -> [{"agent": 1, "answer": 204}, ...], agents 1-based
    picks: list[int]  # the judge's two agents, 1-based; [] when no ranking ran
    judge_fallback: bool
    rating_fallbacks: int
    calls: int
    context_failed: int  # calls the server refused as longer than the model's context window (no reply, no vote)
    prompt_tokens: int
    cached_prompt_tokens: int
    completion_tokens: int
    usd: float
    importance: list[float] | None  # per agent, when debate.importance is on


def contest_of(problem: Problem, position: int, n_problems: int, dataset: str, cfg: DebateConfig) -> str | None:
    """`<dataset>_<meta contest>` when the problem's meta has a contest field; for a dataset in
    debate.contest_halves, `<dataset>_I` for the first half and `<dataset>_II` for the second; else None."""
    contest = problem.meta.get("contest")
    if contest is not None and str(contest).strip():
        return f"{dataset}_{str(contest).strip()}"
    if dataset in cfg.contest_halves:
        return f"{dataset}_{'I' if position < n_problems / 2 else 'II'}"
    return None


def problem_result(dataset: str, contest: str | None, problem: Problem, transcript: Transcript,
                   cfg: DebateConfig) -> DebateResult:
    records = transcript.records
    answers: dict[str, list[dict[str, Any]]] = {}
    for turn in transcript.turns:
        answers.setdefault(f"round{turn.round}", []).append({"agent": turn.agent + 1, "answer": turn.answer})
    return DebateResult(
        dataset=dataset, contest=contest, problem_id=problem.id, gold=int(problem.answer),
        final_answer=transcript.final_answer, correct=transcript.final_answer == problem.answer,
        stop=transcript.stop, answers=answers, picks=[pick + 1 for pick in transcript.picks],
        judge_fallback=transcript.judge_fallback,
        rating_fallbacks=sum(turn.rating_fallback for turn in transcript.turns),
        calls=len(records), context_failed=sum(record.failed_for_context for record in records),
        prompt_tokens=sum(r.prompt_tokens for r in records),
        cached_prompt_tokens=sum(r.cached_prompt_tokens for r in records),
        completion_tokens=sum(r.completion_tokens for r in records), usd=sum(r.usd for r in records),
        importance=agent_importance(transcript, cfg.agents) if cfg.importance else None)


def debate_metrics(results: Sequence[DebateResult], cfg: DebateConfig, *, simulated: bool) -> dict[str, Any]:
    """The flat metrics of metrics/debate.json, in a fixed key order."""
    correct = np.array([r.correct for r in results], dtype=float)
    metrics: dict[str, Any] = {"accuracy_pct": _percent(correct), "problems": len(results)}
    for group, members in _groups(results):
        metrics[f"accuracy_{group}_pct"] = _percent(np.array([r.correct for r in members], dtype=float))
    for name in ("calls", "prompt_tokens", "cached_prompt_tokens", "completion_tokens", "usd"):
        per_problem = "api_calls" if name == "calls" else name
        metrics[f"{per_problem}_per_problem"] = _mean(np.array([getattr(r, name) for r in results], dtype=float))
    totals = debate_totals(results)
    metrics["total_calls"], metrics["correct"], metrics["wrong"] = totals.calls, totals.correct, len(totals.failed)
    stops = [r.stop for r in results]
    metrics["consensus_pct"] = _share_pct(stops, EARLY_STOPS)
    for stop in STOPS:
        metrics[f"stop_{stop}_pct"] = _share_pct(stops, (stop,))
    metrics["judge_calls"] = sum(bool(r.picks) for r in results)
    metrics["judge_fallbacks"] = sum(r.judge_fallback for r in results)
    metrics["unanswered"] = sum(r.final_answer is None for r in results)
    metrics["context_failed_calls"] = sum(r.context_failed for r in results)
    if cfg.importance:
        metrics["rating_fallbacks"] = sum(r.rating_fallbacks for r in results)
        table = np.array([r.importance for r in results], dtype=float).reshape(len(results), cfg.agents)
        for agent in range(cfg.agents):
            metrics[f"importance_agent{agent + 1}"] = _mean(table[:, agent])
    metrics["simulated"] = simulated
    return metrics


@dataclass(frozen=True)
class DebateTotals:
    """What the write-up's evaluation reports besides accuracy: the failed problems and the calls."""

    problems: int
    correct: int
    failed: list[str]  # problem ids whose final answer is wrong or missing, in result order
    calls: int
    calls_per_problem: float


def debate_totals(results: Sequence[DebateResult]) -> DebateTotals:
    calls = sum(r.calls for r in results)
    return DebateTotals(problems=len(results), correct=sum(r.correct for r in results),
                        failed=[r.problem_id for r in results if not r.correct], calls=calls,
                        calls_per_problem=round(calls / len(results), 6) if results else 0.0)


def _groups(results: Sequence[DebateResult]) -> list[tuple[str, list[DebateResult]]]:
    """Datasets in order of appearance, each followed by its contests."""
    groups: dict[str, list[DebateResult]] = {}
    for dataset in dict.fromkeys(r.dataset for r in results):
        members = [r for r in results if r.dataset == dataset]
        groups[dataset] = members
        for contest in dict.fromkeys(r.contest for r in members if r.contest not in (None, dataset)):
            groups[str(contest)] = [r for r in members if r.contest == contest]
    return list(groups.items())


def _mean(values: np.ndarray) -> float:
    return round(float(values.mean()), 6) if len(values) else 0.0


def _percent(correct: np.ndarray) -> float:
    """The share of 1s in percent, to two decimals (0.0 with no problems, as ever)."""
    return round(100 * float(correct.mean()), 2) if len(correct) else 0.0


def _share_pct(stops: list[str], wanted: tuple[str, ...]) -> float:
    """The share of `stops` in `wanted`, in percent to two decimals."""
    return round(100 * sum(stop in wanted for stop in stops) / len(stops), 2) if stops else 0.0
