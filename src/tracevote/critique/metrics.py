"""ProcessBench's scores over critiqued items (code/run_eval.py), per task and overall.

- error accuracy: the share of items with an error (label != -1) whose prediction is that label;
- correct accuracy: the share of items without one (label == -1) predicted -1;
- F1 = 2 * err * cor / (err + cor), 0 when both are 0.
An empty subset has no accuracy: it is None (JSON null), never 0, and so is the F1 it would enter. An item
with no prediction (no parsable vote) counts as wrong. Also: the share of unanimous items and of
unparsable votes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Scored:
    """One critiqued item: its task, true label, prediction, and how its votes went."""

    task: str
    label: int
    prediction: int | None
    unanimous: bool
    votes: int
    unparsable: int

    @property
    def match(self) -> bool:
        return self.prediction == self.label


@dataclass(frozen=True)
class Scores:
    n_error: int
    n_correct: int
    error_acc: float | None
    correct_acc: float | None
    f1: float | None
    unanimous_share: float | None
    unparsable_share: float | None


def f1_score(error_acc: float | None, correct_acc: float | None) -> float | None:
    """
    >>> f1_score(0.5, 1.0), f1_score(0.0, 0.0), f1_score(None, 1.0)
    (0.6666666666666666, 0.0, None)
    """
    if error_acc is None or correct_acc is None:
        return None
    total = error_acc + correct_acc
    return 2 * error_acc * correct_acc / total if total else 0.0


def scores(items: Sequence[Scored]) -> Scores:
    errors = [item for item in items if item.label != -1]
    corrects = [item for item in items if item.label == -1]
    error_acc, correct_acc = _share_matching(errors), _share_matching(corrects)
    votes = sum(item.votes for item in items)
    return Scores(n_error=len(errors), n_correct=len(corrects), error_acc=error_acc, correct_acc=correct_acc,
                  f1=f1_score(error_acc, correct_acc),
                  unanimous_share=sum(item.unanimous for item in items) / len(items) if items else None,
                  unparsable_share=sum(item.unparsable for item in items) / votes if votes else None)


def by_task(items: Sequence[Scored]) -> dict[str, Scores]:
    """Scores per task, tasks in order of first appearance."""
    tasks = dict.fromkeys(item.task for item in items)
    return {task: scores([item for item in items if item.task == task]) for task in tasks}


def _share_matching(items: Sequence[Scored]) -> float | None:
    return sum(item.match for item in items) / len(items) if items else None
