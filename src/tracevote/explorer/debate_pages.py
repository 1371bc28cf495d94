"""The explorer's debate sections: each dataset of debate.datasets whose debates were built, as transcripts.

Per dataset N: `debate<N>/index` (the setting and one row per debated problem: gold, final answer, how it ended,
calls, tokens, dollars) and `debate<N>/p<i>` for the i-th problem debated (its text, every reply by round with its
answer, ratings and importance, the judge's reply and picks, the totals). The debates are replayed from their
ledger as score_debate replays them, so the pages show what the metrics count; a dataset with no manifest under
debates/ gives no section.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracevote.core.config import Params
from tracevote.core.errors import DataError
from tracevote.debate import build
from tracevote.debate.importance import reply_importance
from tracevote.debate.protocol import Transcript, Turn
from tracevote.debate.results import DebateResult, contest_of, problem_result
from tracevote.store.calls import CallRecord
from tracevote.store.ledger import fingerprint_of

if TYPE_CHECKING:
    from tracevote.explorer.sitefiles import SiteWriter

VIEW = "debate"


def sections(writer: SiteWriter, params: Params, root: Path) -> list[dict[str, Any]]:
    """One section per debated dataset with a manifest, in debate.datasets' order."""
    return [dataset_section(writer, params, manifest_path(root, dataset), dataset, number)
            for number, dataset in enumerate(debated_datasets(params, root))]


def debated_datasets(params: Params, root: Path) -> list[str]:
    """The datasets of debate.datasets whose debates were built (a manifest), in order: section N is the N-th."""
    return [dataset for dataset in params.debate.datasets if manifest_path(root, dataset).is_file()]


def manifest_path(root: Path, dataset: str) -> Path:
    return root / "debates" / f"{dataset}.json"  # a checked name: core.config.DATASET_NAME


def dataset_section(writer: SiteWriter, params: Params, manifest_path: Path, dataset: str,
                    number: int) -> dict[str, Any]:
    """Write `debate<number>/...` for one dataset's debates and return its index entry."""
    manifest, ledger = build.load_ledger(manifest_path)
    if manifest.fingerprint != fingerprint_of(build.debate_setting(params)):
        raise DataError(f"{manifest_path}: its ledger was built under another debate setting than params.yaml's; "
                        f"run build_debate@{dataset} (`dvc repro`)")
    selection = manifest.selection()
    problems = manifest.problem_list()
    debates = build.debates_for(problems, params)
    rows = []
    for i, (position, debate, transcript) in enumerate(zip(selection.positions, debates,
                                                           build.transcripts(ledger, debates), strict=True)):
        contest = contest_of(debate.problem, position, selection.dataset_problems, dataset, params.debate)
        result = problem_result(dataset, contest, debate.problem, transcript, params.debate)
        writer.put(f"{VIEW}{number}/p{i}", problem_page(result, debate.problem.problem, position, transcript,
                                                        simulated=manifest.simulated))
        rows.append(problem_row(i, result, position))
    correct = sum(row["correct"] for row in rows)
    writer.put(f"{VIEW}{number}/index", {
        "dataset": dataset, "simulated": manifest.simulated, "model": params.debate_model.name,
        "judge_model": params.judge_model.name, "agents": params.debate.agents, "rounds": params.debate.rounds,
        "importance": params.debate.importance, "problems": rows, "correct": correct,
        "usd": round(sum(row["usd"] for row in rows), 6)})
    return {"view": VIEW, "index": number, "label": f"Debate: {dataset}", "simulated": manifest.simulated,
            "summary": f"{len(rows)} problems, {correct} right; {params.debate.agents} agents "
                       f"({params.debate_model.name})"}


def problem_row(i: int, result: DebateResult, position: int) -> dict[str, Any]:
    return {"i": i, "id": result.problem_id, "position": position, "contest": result.contest, "gold": result.gold,
            "final_answer": result.final_answer, "correct": result.correct, "stop": result.stop,
            "calls": result.calls, "completion_tokens": result.completion_tokens, "usd": result.usd}


def problem_page(result: DebateResult, text: str, position: int, transcript: Transcript, *,
                 simulated: bool) -> dict[str, Any]:
    """One debate as a transcript: every reply in call order, the judge's, and what score_debate counts."""
    importance = reply_importance(transcript) if result.importance is not None else {}
    placed = _round_places(transcript.turns)
    replies = [reply(turn, importance.get(place)) for turn, place in zip(transcript.turns, placed, strict=True)]
    judge = None
    if transcript.judge is not None:
        judge = {**_call_fields(transcript.judge), "picks": result.picks, "fallback": result.judge_fallback}
    return {"simulated": simulated, "problem": text, "position": position, "replies": replies, "judge": judge,
            "deciders": [turn.agent + 1 for turn in transcript.deciders], **asdict(result)}


def reply(turn: Turn, importance: float | None) -> dict[str, Any]:
    """One agent's reply: its round, agent (1-based), answer, the agents it rated and how, its importance."""
    return {"round": turn.round, "agent": turn.agent + 1, "answer": turn.answer,
            "rated": [agent + 1 for agent in turn.rated], "weights": list(turn.weights),
            "rating_fallback": turn.rating_fallback, "importance": importance, **_call_fields(turn.record)}


def _call_fields(record: CallRecord) -> dict[str, Any]:
    return {"key": record.key, "text": record.text, "finish_reason": record.finish_reason,
            "prompt_tokens": record.prompt_tokens, "cached_prompt_tokens": record.cached_prompt_tokens,
            "completion_tokens": record.completion_tokens, "usd": record.usd}


def _round_places(turns: tuple[Turn, ...]) -> list[tuple[int, int]]:
    """Each turn's (round, position within its round), the keys of importance.reply_importance."""
    seen: dict[int, int] = {}
    places = []
    for turn in turns:
        places.append((turn.round, seen.get(turn.round, 0)))
        seen[turn.round] = seen.get(turn.round, 0) + 1
    return places
