"""Accuracy by Math-Verify and the reasoning's word count, with the grading scorer's definitions exactly.

- Final answer: the text after the last ``####`` in `content` when that is not blank, else the last non-blank
  line of `content` (so a ``####`` with nothing after it on the last line is itself the answer, and wrong).
- Correct: ``verify(parse(gold), parse(answer))``, gold first (MathJudge's "grading" rule: Math-Verify's
  default extraction; only an exception escaping Math-Verify falls back to comparing the stripped, lower-cased
  strings; a comparison that overruns its time limit is wrong and counted as unjudged).
- Pairing is by id. A gold item without a prediction is wrong: accuracy = correct / gold items. A pool grades
  every trace, so there accuracy = correct traces / (traces + problems without any).
- Word count: ``len(thinking.split())``, averaged over the predictions graded (for a file: all its records of
  this dataset, matched or not).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from tracevote.answers.formats import GSM8K_MARK
from tracevote.answers.mathverify import MathVerdict
from tracevote.core.errors import DataError
from tracevote.grading.gold import GoldItem
from tracevote.grading.predictions import Prediction


class Judge(Protocol):
    def compare_many(self, pairs: Sequence[tuple[str, str]]) -> list[MathVerdict]: ...


def final_answer(content: str) -> str:
    """The answer a prediction's `content` gives.

    >>> final_answer("so 3 + 4 = 7\\n#### 7"), final_answer("The answer is 12."), final_answer("12\\n####")
    ('7', 'The answer is 12.', '####')
    """
    if GSM8K_MARK in content:
        after = content.rsplit(GSM8K_MARK, 1)[1].strip()
        if after:
            return after
    lines = [line.strip() for line in content.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def word_count(thinking: str) -> int:
    return len(thinking.split())


@dataclass(frozen=True)
class GradedPrediction:
    id: str
    line: int  # the prediction's line in its file, or a pool trace's sample id
    gold: str
    answer: str
    correct: bool
    method: str  # math_verify | string (Math-Verify raised) | unjudged (it overran its time limit)
    words: int


@dataclass(frozen=True)
class Pairing:
    """Predictions matched to gold items by id, in gold order (a gold item may have several: a pool's traces)."""

    pairs: list[tuple[GoldItem, Prediction]]
    missing: list[str]  # gold ids without a prediction
    unmatched: list[str]  # prediction ids no gold item has


def check_some_match(gold: Sequence[GoldItem], predictions: Sequence[Prediction], *, source: str) -> None:
    """DataError when there are predictions but none has a gold item's id: grading them would report 0% for a
    file of another dataset, or ids taken from another gold field, rather than say so."""
    gold_ids = {item.id for item in gold}
    if predictions and gold and not any(prediction.id in gold_ids for prediction in predictions):
        raise DataError(
            f"{source}: none of its {len(predictions)} prediction ids (first {predictions[0].id!r}) is the id of a "
            f"gold item (first {gold[0].id!r}): is it another dataset's file, or do its ids come from another gold "
            f"field (--id-key, grading.runs.<run>.id_key)?")


def pair_by_id(gold: Sequence[GoldItem], predictions: Sequence[Prediction]) -> Pairing:
    by_id: dict[str, list[Prediction]] = defaultdict(list)
    for prediction in predictions:
        by_id[prediction.id].append(prediction)
    gold_ids = {item.id for item in gold}
    pairs = [(item, prediction) for item in gold for prediction in by_id.get(item.id, [])]
    missing = [item.id for item in gold if item.id not in by_id]
    unmatched = [prediction.id for prediction in predictions if prediction.id not in gold_ids]
    return Pairing(pairs, missing, unmatched)


@dataclass(frozen=True)
class Grades:
    """One run's accuracy and word counts, and each graded prediction."""

    accuracy: float
    correct: int
    total: int
    missing: int
    string_fallbacks: int
    unjudged: int
    avg_word_count: float
    avg_word_count_correct: float | None
    avg_word_count_incorrect: float | None
    predictions: int
    unmatched: int
    first_unmatched: str | None
    graded: list[GradedPrediction] = field(repr=False)

    def summary(self) -> dict[str, object]:
        """Everything but the per-prediction list."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__ if name != "graded"}


def grade(gold: Sequence[GoldItem], predictions: Sequence[Prediction], judge: Judge) -> Grades:
    """Grade `predictions` against `gold` (see the module docstring for every rule)."""
    pairing = pair_by_id(gold, predictions)
    words = [word_count(prediction.thinking) for prediction in predictions]
    words_of = {id(prediction): count for prediction, count in zip(predictions, words, strict=True)}
    answers = [final_answer(prediction.content) for _, prediction in pairing.pairs]
    verdicts = _judged(judge, [(item.answer, answer) for (item, _), answer in zip(pairing.pairs, answers,
                                                                                   strict=True)])
    graded = [GradedPrediction(item.id, prediction.line, item.answer, answer, verdict.equal, verdict.method,
                               words_of[id(prediction)])
              for (item, prediction), answer, verdict in zip(pairing.pairs, answers, verdicts, strict=True)]
    correct = sum(g.correct for g in graded)
    total = len(graded) + len(pairing.missing)
    return Grades(
        accuracy=correct / total if total else 0.0, correct=correct, total=total, missing=len(pairing.missing),
        string_fallbacks=sum(g.method == "string" for g in graded),
        unjudged=sum(g.method == "unjudged" for g in graded),
        avg_word_count=_mean(words) or 0.0,
        avg_word_count_correct=_mean([g.words for g in graded if g.correct]),
        avg_word_count_incorrect=_mean([g.words for g in graded if not g.correct]),
        predictions=len(predictions), unmatched=len(pairing.unmatched),
        first_unmatched=pairing.unmatched[0] if pairing.unmatched else None, graded=graded)


def _judged(judge: Judge, pairs: list[tuple[str, str]]) -> list[MathVerdict]:
    """Verdicts of `pairs`, each distinct pair compared once (a pool repeats few answers thousands of times)."""
    distinct = list(dict.fromkeys(pairs))
    verdict_of = dict(zip(distinct, judge.compare_many(distinct), strict=True))
    return [verdict_of[pair] for pair in pairs]


def _mean(values: Sequence[int]) -> float | None:
    return sum(values) / len(values) if values else None
