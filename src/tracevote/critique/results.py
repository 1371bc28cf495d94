"""Critiques scored offline from their ledgers: per solution (its votes, prediction and match), per task, and the
flat metrics `dvc metrics diff` compares.

Flat metrics: the overall scores over every solution of every dataset, then each dataset's as
`<metric>_<dataset>` (`<metric>_<dataset>_pct` for a share); `f1_mean_pct` is the mean of the datasets' F1
(ProcessBench's "average F1" over its subsets, when each subset is a dataset). Cost: calls, tokens and dollars,
priced when stored.

Every share written (here, in the flat metrics, and in the CSV by task) is in percent to two decimals under a key
naming its unit (`error_accuracy_pct`, `correct_accuracy_pct`, `f1_pct`, `unanimous_pct`, `unparsable_pct`); an
empty subset's stays None (JSON null, an empty cell). critique.metrics computes them as fractions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracevote.core.csvtext import csv_text
from tracevote.core.fileio import write_text
from tracevote.critique.metrics import Scored, Scores, by_task, scores
from tracevote.critique.votes import boxed_content, majority, parse_vote

if TYPE_CHECKING:  # annotations only: report_critiques reads this module's columns without the call ledger's code
    from tracevote.critique.build import CritiqueItem
    from tracevote.store.calls import CallLedger, CallRecord

PERCENT_KEYS = {"error_acc": "error_accuracy_pct", "correct_acc": "correct_accuracy_pct", "f1": "f1_pct",
                "unanimous_share": "unanimous_pct", "unparsable_share": "unparsable_pct"}  # Scores' field -> key
BY_TASK_COLUMNS = ("dataset", "task", "n_error", "n_correct", *PERCENT_KEYS.values())


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
    context_failed: int = 0  # critiques the server refused as longer than the model's window: unparsable votes

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
        completion_tokens=sum(r.completion_tokens for r in records), usd=sum(r.usd for r in records),
        context_failed=sum(record.failed_for_context for record in records))


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
        rows += [{"dataset": dataset, "task": task, **in_percent(task_scores)}
                 for task, task_scores in by_task(scored).items()]
    return rows


def write_by_task_csv(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """The rows as CSV, shares in percent to 2 decimals, a null share as an empty cell."""
    cells = ([f"{value:.2f}" if isinstance(value, float) else value for value in (row[key] for key in BY_TASK_COLUMNS)]
             for row in rows)
    write_text(path, csv_text(BY_TASK_COLUMNS, cells))


def critique_metrics(results: Sequence[CritiqueResult], *, simulated: bool) -> dict[str, Any]:
    """The flat metrics: overall, then per dataset (see the module docstring)."""
    overall = scores([result.scored() for result in results])
    metrics: dict[str, Any] = {"simulated": simulated, "solutions": len(results), **in_percent(overall)}
    datasets = list(dict.fromkeys(result.dataset for result in results))
    per_dataset = {name: scores([r.scored() for r in results if r.dataset == name]) for name in datasets}
    f1s = [s.f1 for s in per_dataset.values()]
    metrics["f1_mean_pct"] = None if any(f1 is None for f1 in f1s) or not f1s else _percent(sum(f1s) / len(f1s))
    calls = sum(len(result.votes) for result in results)
    completion = sum(r.completion_tokens for r in results)
    metrics.update(calls=calls, truncated=sum(r.truncated for r in results),
                   context_failed=sum(r.context_failed for r in results),
                   prompt_tokens=sum(r.prompt_tokens for r in results), completion_tokens=completion,
                   completion_tokens_per_call=round(completion / calls, 1) if calls else None,
                   usd=round(sum(r.usd for r in results), 4))
    for name, dataset_scores in per_dataset.items():
        metrics.update({f"{key.removesuffix('_pct')}_{name}_pct" if key.endswith("_pct") else f"{key}_{name}": value
                        for key, value in in_percent(dataset_scores).items()})
    return metrics


def in_percent(subset_scores: Scores) -> dict[str, Any]:
    """The counts, then each share in percent to two decimals under its `_pct` key (None stays None)."""
    return {PERCENT_KEYS.get(key, key): _percent(value) if key in PERCENT_KEYS else value
            for key, value in asdict(subset_scores).items()}


def _percent(share: float | None) -> float | None:
    """0.666666 -> 66.67; None (an empty subset's share) stays None."""
    return None if share is None else round(100 * share, 2)
