"""Where each answer came from, and how validity counts it: source x finish reason x answers params."""

from __future__ import annotations

import pandas as pd
import pytest

from tracevote.answers.extract import AnswerCandidates, resolve_answer
from tracevote.core.config_datasets import AnswersConfig
from tracevote.core.config_deepconf import MEASURES
from tracevote.deepconf.sample_stats import validity_counts

BOX = AnswerCandidates(box_found=True, boxed=42, last_number=None)
BAD_BOX = AnswerCandidates(box_found=True, boxed=None, last_number=None)  # \boxed{\frac{1}{2}}
NO_BOX = AnswerCandidates(box_found=False, boxed=None, last_number=17)
NOTHING = AnswerCandidates(box_found=False, boxed=None, last_number=None)

LAST, NONE = "last_integer", "none"
# (candidates, finish_reason, fallback, truncated_fallback) -> (answer, source, invalid reason or None)
SOURCES = [
    (BOX, "stop", LAST, False, 42, "boxed", None),
    (BOX, "length", LAST, False, 42, "boxed", None),  # a box decides, truncated or not
    (BOX, "stop", NONE, False, 42, "boxed", None),
    (BAD_BOX, "stop", LAST, True, None, "none", "no_answer"),  # a box that is not an integer: no fallback
    (BAD_BOX, "length", LAST, True, None, "none", "truncated"),
    (NO_BOX, "stop", LAST, False, 17, "fallback", None),
    (NO_BOX, "stop", LAST, True, 17, "fallback", None),
    (NO_BOX, "length", LAST, False, None, "none", "truncated"),  # cut off: its last number is no answer
    (NO_BOX, "length", LAST, True, 17, "fallback", None),
    (NO_BOX, "stop", NONE, False, None, "none", "no_answer"),  # the official rule: a box or nothing
    (NO_BOX, "length", NONE, True, None, "none", "truncated"),
    (NOTHING, "stop", LAST, True, None, "none", "no_answer"),
    (NOTHING, "length", LAST, True, None, "none", "truncated"),
]


@pytest.mark.parametrize(("candidates", "finish", "fallback", "truncated_fallback", "answer", "source", "reason"),
                         SOURCES)
def test_answer_source_and_validity(candidates: AnswerCandidates, finish: str, fallback: str,
                                    truncated_fallback: bool, answer: int | None, source: str,
                                    reason: str | None) -> None:
    cfg = AnswersConfig(fallback=fallback, truncated_fallback=truncated_fallback)  # type: ignore[arg-type]
    assert resolve_answer(candidates, finish, cfg) == (answer, source)
    validity = validity_counts(score_table([(answer, source, finish, answer == 17)]))
    invalid = {"no_answer": validity.no_answer, "truncated": validity.truncated, "no_tokens": validity.no_tokens}
    assert invalid == {name: int(name == reason) for name in invalid}
    assert validity.n_valid == int(reason is None)
    assert validity.by_source == {"boxed": 0, "fallback": 0, "none": 0, source: 1}
    assert validity.by_finish_reason == {"stop": 0, "length": 0, finish: 1}
    assert (validity.fallback_votes, validity.fallback_votes_correct) == ((1, 1) if source == "fallback" else (0, 0))


def test_fallback_votes_count_only_valid_samples_and_their_correct_ones() -> None:
    rows = [(17, "fallback", "stop", True), (18, "fallback", "length", False), (42, "boxed", "stop", True),
            (None, "none", "length", False), (5, "fallback", "content_filter", False)]
    validity = validity_counts(score_table(rows))
    assert (validity.fallback_votes, validity.fallback_votes_correct) == (3, 1)
    assert validity.by_source == {"boxed": 1, "fallback": 3, "none": 1}
    assert validity.by_finish_reason == {"stop": 2, "length": 2, "content_filter": 1}
    assert (validity.truncated, validity.finish_length) == (1, 2)


def score_table(rows: list[tuple[int | None, str, str, bool]]) -> pd.DataFrame:
    """(answer, answer_source, finish_reason, correct) -> score rows of one problem with 10 tokens each."""
    return pd.DataFrame({
        "problem_id": "p", "sample_id": range(len(rows)),
        "answer": pd.array([r[0] for r in rows], dtype="Int64"), "answer_source": [r[1] for r in rows],
        "correct": [r[0] is not None and r[3] for r in rows], "valid": [r[0] is not None for r in rows],
        "n_tokens": 10, "finish_reason": [r[2] for r in rows], **dict.fromkeys(MEASURES, 1.0)})
