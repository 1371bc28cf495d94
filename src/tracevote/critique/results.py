"""Critiques scored offline from their ledgers: per solution (its votes, prediction and match), per task, and the
flat metrics `dvc metrics diff` compares.

Flat metrics: the overall scores over every solution of every dataset, then each dataset's as
`<metric>_<dataset>`; `f1_mean` is the mean of the datasets' F1 (ProcessBench's "average F1" over its
subsets, when each subset is a dataset). Cost: calls, tokens and dollars, priced when stored.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tracevote.core.fileio import write_text
from tracevote.critique.build import CritiqueItem
from tracevote.critique.metrics import Scored, Scores, by_task, scores
from tracevote.critique.votes import boxed_content, majority, parse_vote
from tracevote.store.calls import CallLedger, CallRecord

BY_TASK_COLUMNS = ("dataset", "task", "n_error", "n_correct", "error_acc", "correct_acc", "f1", "unanimous_share",
                   "unparsable_share")


@dataclass(frozen=True)
class CritiqueResult:
    """One solution's critiques: what each boxed, how they parsed, and the vote."""

    dataset: str
    id: str
    task: str
    label: int
    n_steps: int
    boxed: list[str | None]  # each critique's last \boxed{} content, None when it boxed nothing
    votes: list[int | None]  # each parsed, None when unparsable
    prediction: int | None  # None: no parsable vote (counts as wrong)
    match: bool
    unanimous: bool
    unparsable: int
    truncated: int  # critiques cut off at max_tokens
    prompt_tokens: int
    completion_tokens: int
    usd: float

    def scored(self) -> Scored:
        return Scored(task=self.task, label=self.label, prediction=self.prediction, unanimous=self.unanimous,
                      votes=len(self.votes), unparsable=self.unparsable)


def item_result(dataset: str, item: CritiqueItem, records: Sequence[CallRecord]) -> CritiqueResult:
    vote = majority([parse_vote(record.text) for record in records])
    return CritiqueResult(
        dataset=dataset, id=item.id, task=item.task, label=item.label, n_steps=item.n_steps,
        boxed=[boxed_content(record.text) for record in records], votes=list(vote.votes),
        prediction=vote.prediction, match=vote.prediction == item.label, unanimous=vote.unanimous,
        unparsable=vote.unparsable, truncated=sum(record.finish_reason == "length" for record in records),
        prompt_tokens=sum(r.prompt_tokens for r in records),
        completion_tokens=sum(r.completion_tokens for r in records), usd=sum(r.usd for r in records))


def dataset_results(dataset: str, items: list[CritiqueItem], ledger: CallLedger, n_votes: int) -> list[CritiqueResult]:
    """Each solution's first `n_votes` critiques from the ledger, in vote order."""
    results = []
    for item in items:
        stored = ledger.records(item.id)
        results.append(item_result(dataset, item, [stored[vote] for vote in range(n_votes)]))
    return results


def by_task_rows(results: Sequence[CritiqueResult]) -> list[dict[str, Any]]:
    """One row per (dataset, task), datasets and tasks in order of first appearance."""
    rows = []
    for dataset in dict.fromkeys(result.dataset for result in results):
        scored = [result.scored() for result in results if result.dataset == dataset]
        rows += [{"dataset": dataset, "task": task, **asdict(task_scores)}
                 for task, task_scores in by_task(scored).items()]
    return rows


def write_by_task_csv(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """The rows as CSV, shares to 4 decimals, a null share as an empty cell."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=BY_TASK_COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows({key: f"{value:.4f}" if isinstance(value, float) else value for key, value in row.items()}
                     for row in rows)
    write_text(path, text.getvalue())


def critique_metrics(results: Sequence[CritiqueResult], *, simulated: bool) -> dict[str, Any]:
    """The flat metrics: overall, then per dataset (see the module docstring)."""
    overall = scores([result.scored() for result in results])
    metrics: dict[str, Any] = {"simulated": simulated, "solutions": len(results), **_rounded(overall)}
    datasets = list(dict.fromkeys(result.dataset for result in results))
    per_dataset = {name: scores([r.scored() for r in results if r.dataset == name]) for name in datasets}
    f1s = [s.f1 for s in per_dataset.values()]
    metrics["f1_mean"] = None if any(f1 is None for f1 in f1s) or not f1s else round(sum(f1s) / len(f1s), 4)
    calls = sum(len(result.votes) for result in results)
    completion = sum(r.completion_tokens for r in results)
    metrics.update(calls=calls, truncated=sum(r.truncated for r in results),
                   prompt_tokens=sum(r.prompt_tokens for r in results), completion_tokens=completion,
                   completion_tokens_per_call=round(completion / calls, 1) if calls else None,
                   usd=round(sum(r.usd for r in results), 4))
    for name, dataset_scores in per_dataset.items():
        metrics.update({f"{key}_{name}": value for key, value in _rounded(dataset_scores).items()})
    return metrics


def _rounded(dataset_scores: Scores) -> dict[str, Any]:
    return {key: round(value, 4) if isinstance(value, float) and math.isfinite(value) else value
            for key, value in asdict(dataset_scores).items()}
