"""Math answers as DeepConf vote codes: classes of Math-Verify-equal answers, numbered by first appearance."""

import pytest

from tracevote.answers.classes import NO_CODE, answer_classes
from tracevote.answers.extract import boxed_text
from tracevote.answers.mathverify import MathJudge


@pytest.fixture(scope="module")
def judge():
    with MathJudge(max_workers=1, timeout_s=60.0, chunk_size=8) as shared:
        yield shared


def test_boxed_text_is_the_last_closed_box_stripped():
    assert boxed_text(r"first \boxed{3}, finally $\boxed{ \dfrac12 }$ and \boxed{") == r"\dfrac12"
    assert boxed_text(r"no box, the answer is 0.5") is None
    assert boxed_text(r"\boxed{ }") is None


def test_equivalent_forms_of_the_gold_share_one_code(judge):
    answers = ["0.4", r"\frac{1}{2}", None, "0.5", r"\dfrac12", "2/5", "7", "0.4"]
    classes = answer_classes(r"\frac{1}{2}", answers, judge)
    # classes by first appearance: 0.4 (and 2/5) -> 0, the gold's forms -> 1, 7 -> 2
    assert classes.codes.tolist() == [0, 1, NO_CODE, 1, 1, 0, 2, 0]
    assert classes.correct.tolist() == [False, True, False, True, True, False, False, False]


def test_codes_do_not_depend_on_which_class_is_the_gold(judge):
    answers = ["7", r"\frac{1}{2}", "0.5", "7.0"]
    assert answer_classes("7", answers, judge).codes.tolist() == [0, 1, 1, 0]
    assert answer_classes("0.5", answers, judge).codes.tolist() == [0, 1, 1, 0]
    assert answer_classes("0.5", answers, judge).correct.tolist() == [False, True, True, False]


def test_a_problem_with_no_answers_has_no_codes(judge):
    classes = answer_classes("9", [None, None], judge)
    assert classes.codes.tolist() == [NO_CODE, NO_CODE]
    assert not classes.correct.any()
