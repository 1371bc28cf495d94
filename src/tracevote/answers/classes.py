"""Answers of `answer_format: math` problems as integer codes, so DeepConf's integer voting applies unchanged.

A math trace's answer is the text of its last box (tracevote.answers.extract.boxed_text). The answers of
one problem's traces are grouped into classes of equal answers with Math-Verify, and each class gets an
integer code: DeepConf votes on codes as it votes on AIME integers. A class is correct when it equals the gold.

Rules (`answer_classes`):
- Equal text (after stripping) is one answer: it is compared once.
- Every answer is first compared with the gold, gold first (Math-Verify is not symmetric); all answers equal
  to the gold form one class, so "\\frac{1}{2}", "0.5" and "\\dfrac12" vote together when the gold is 1/2.
- Any other answer joins the first earlier class whose first answer it equals (that answer in the gold's
  place), else it starts a class.
- Codes number the classes 0, 1, ... in the order their first answer appears among the traces, never by
  correctness: the tie rule "smallest" must not favour the gold's class.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tracevote.answers.mathverify import MathJudge

NO_CODE = -1  # a trace with no answer


@dataclass(frozen=True)
class AnswerClasses:
    """codes: int64 [traces], the class of each trace's answer (NO_CODE for none); correct: bool [traces]."""

    codes: np.ndarray
    correct: np.ndarray


def answer_classes(gold: str, answers: Sequence[str | None], judge: MathJudge) -> AnswerClasses:
    """The class codes of `answers` (one problem's traces, in order) and whether each equals `gold`."""
    distinct = list(dict.fromkeys(answer for answer in answers if answer is not None))
    equals_gold = [verdict.equal for verdict in judge.compare_many((gold, answer) for answer in distinct)]
    class_of = _classes(distinct, equals_gold, judge)
    codes = np.array([NO_CODE if answer is None else class_of[answer] for answer in answers], dtype=np.int64)
    gold_codes = {class_of[answer] for answer, equal in zip(distinct, equals_gold, strict=True) if equal}
    correct = np.array([code in gold_codes for code in codes.tolist()], dtype=bool)
    return AnswerClasses(codes, correct)


def _classes(distinct: list[str], equals_gold: list[bool], judge: MathJudge) -> dict[str, int]:
    """Each distinct answer's code, numbered by first appearance."""
    class_of: dict[str, int] = {}
    firsts: list[str] = []  # the first answer of each class not equal to the gold
    gold_code: int | None = None
    for answer, equal in zip(distinct, equals_gold, strict=True):
        if equal:
            if gold_code is None:
                gold_code = _next_code(class_of)
            class_of[answer] = gold_code
            continue
        verdicts = judge.compare_many((first, answer) for first in firsts)
        match = next((first for first, verdict in zip(firsts, verdicts, strict=True) if verdict.equal), None)
        if match is None:
            firsts.append(answer)
            class_of[answer] = _next_code(class_of)
        else:
            class_of[answer] = class_of[match]
    return class_of


def _next_code(class_of: dict[str, int]) -> int:
    return max(class_of.values(), default=-1) + 1
