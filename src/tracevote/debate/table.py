"""metrics/debate.md: the write-up's evaluation report as Markdown. One row per problem (its gold, the final
answer, right or wrong, calls, where the debate stopped), accuracy per dataset and contest, the failed
problems, and the calls in all and per problem."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracevote.core.mdtext import md_text
from tracevote.debate.results import DebateResult, DebateTotals

STOPPED = {"round0": "round 0 (consensus)", "round1": "round 1 (consensus)", "ranking": "ranking (top 2 agree)",
           "round2": "round 2", "rounds": "debate.rounds ran out"}
COLUMNS = ("dataset", "problem", "gold", "final answer", "right", "calls", "stopped after")


def problem_rows(results: Sequence[DebateResult]) -> list[tuple[str, ...]]:
    """One row per problem, e.g. ('aime_2024', 'aime_2024-01', '204', '—', 'no', '11', 'round 2'): no final
    answer shows as a dash."""
    return [(r.dataset, r.problem_id, str(r.gold), "—" if r.final_answer is None else str(r.final_answer),
             "yes" if r.correct else "no", str(r.calls), STOPPED[r.stop]) for r in results]


def debate_markdown(results: Sequence[DebateResult], metrics: dict[str, Any], totals: DebateTotals, *,
                    models: dict[str, str] | None = None, banner: str = "") -> str:
    """The whole report; `banner` (the simulated model's warning) heads it when set; `models` names the agents'
    model and the judge's."""
    lines = ["# Debate (DyLAN): per problem", ""] + ([f"**{banner}**", ""] if banner else [])
    share = f"{totals.correct / totals.problems:.2%}" if totals.problems else "n/a"
    if models is not None:
        lines += [f"Agents: {md_text(models['model'])}; judge: {md_text(models['judge_model'])}.", ""]
    lines += [f"Problems: {totals.problems}. Right: {totals.correct} ({share}). Calls: {totals.calls} in all, "
              f"{totals.calls_per_problem:.2f} per problem.", ""]
    groups = [(key.removeprefix("accuracy_").removesuffix("_pct"), value) for key, value in metrics.items()
              if key.startswith("accuracy_") and key.endswith("_pct") and key != "accuracy_pct"]
    lines += [f"- accuracy, {md_text(name)}: {value:.2f}%" for name, value in groups] + ([""] if groups else [])
    failed = ', '.join(map(md_text, totals.failed)) or 'none'
    lines += [f"Failed (wrong or unanswered): {failed}.", ""]
    lines += _table(problem_rows(results))
    return "\n".join(lines) + "\n"


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    return ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)] + [
        "| " + " | ".join(map(md_text, row)) + " |" for row in rows]
