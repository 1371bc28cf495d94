"""extract_answer on what models actually write at the end of a math trace."""

from __future__ import annotations

import pytest

from tracevote.answers.extract import (
    answer_candidates,
    box_source,
    extract_answer,
    split_answer,
    split_boxed_text,
    split_candidates,
)

BOXED = [
    # (text, expected)
    (r"The answer is \boxed{70}.", 70),
    (r"Therefore $\boxed{588}$", 588),
    (r"\boxed{ 123 }", 123),
    (r"\boxed {16}", 16),
    (r"\fbox{42}", 42),
    (r"\boxed{025}", 25),
    (r"\boxed{000}", 0),
    (r"\boxed{999}", 999),
    (r"\boxed{\textbf{70}}", 70),
    (r"\boxed{\text{Answer: } 12}", 12),
    (r"\boxed{\text{the number of ways is } 12}", 12),
    (r"\boxed{\text{…} 12}", 12),
    (r"\boxed{N = 70}", 70),
    (r"\boxed{m + n = 104}", 104),
    (r"\boxed{70^\circ}", 70),
    (r"\boxed{70^{\circ}}", 70),
    (r"\boxed{12.0}", 12),
    (r"\boxed{\mathbf{204}}", 204),
    (r"so \boxed{\boxed{5}}", 5),
]

SEVERAL_BOXES = [
    (r"First guess \boxed{12}, but recheck: \boxed{13}", 13),
    (r"\boxed{12} ... wait, the final answer is \boxed{ 021 }.", 21),
    # the last box with matched braces wins; a truncated one is ignored
    (r"\boxed{12} and then \boxed{13", 12),
    # a model quoting the prompt's empty box does not hide its real answer
    (r"I will put the answer in \boxed{}. ... \boxed{336}", 336),
    (r"\boxed{336} as asked, in \boxed{ }", 336),
]

NOT_AN_INTEGER = [
    (r"\boxed{\frac{1}{2}}", None),
    (r"\boxed{\dfrac{4}{2}}", None),  # fractions are not evaluated, even when they reduce
    (r"\boxed{1/2}", None),
    (r"\boxed{2^{10}}", None),  # powers are not evaluated (1024 would be out of range anyway)
    (r"\boxed{2^3}", None),
    (r"\boxed{3\sqrt{2}}", None),
    (r"\boxed{6 \times 7}", None),  # arithmetic is not evaluated
    (r"\boxed{2\pi}", None),
    (r"\boxed{12.5}", None),
    (r"\boxed{-5}", None),  # read as -5, not 5: out of range
    (r"\boxed{−5}", None),  # unicode minus
    (r"\boxed{1,000}", None),  # thousands separator: 1000, out of range
    (r"\boxed{1{,}000}", None),
    (r"\boxed{1\,000}", None),
    (r"\boxed{1000}", None),
    (r"\boxed{\text{C}}", None),  # a box without a number is an answer, just not an integer
    (r"\boxed{(A)}", None),
]

NO_BOX = [
    ("**Answer:** 16", 16),
    ("Final answer: 42.", 42),
    ("so we get 10 - 3", 3),
    ("so we get 10-3", 3),
    ("The result is -5", None),
    ("The result is x = -5.", None),
    ("the count is 1,000", None),
    ("the count is 1{,}000", None),
    ("the mean is 12.5", None),
    ("the mean is 12.50.", None),
    ("the value 12.0", 12),
    ("listing 1,2,3", 3),
    ("half of it: 1/2", None),
    ("no digits here", None),
    ("", None),
    # a box that never closes is ignored: fall back to the last number in the text
    (r"we get \boxed{7", 7),
    (r"answer \boxed", None),
    (r"answer 9 then \boxed", 9),
]


@pytest.mark.parametrize(("text", "expected"), BOXED + SEVERAL_BOXES + NOT_AN_INTEGER + NO_BOX)
def test_extract_answer(text: str, expected: int | None) -> None:
    assert extract_answer(text) == expected


def test_box_wins_over_later_numbers() -> None:
    text = r"So the answer is \boxed{70}. (Check: 3 + 4 = 7, and 10 * 7 = 70, over 2 = 35.)"
    assert extract_answer(text) == 70


def test_long_trace_with_a_truncated_box_early() -> None:
    text = r"\boxed{" + "x " * 20_000 + r"so \boxed{17}"
    assert extract_answer(text) == 17


# (content, reasoning, answer): a reasoning parser's split reply reads as its whole generation, reasoning first
SPLIT_CASES = [
    (r"so \boxed{18}", r"try \boxed{5}", 18),          # the content's box decides
    ("", r"then \boxed{18} and on", 18),               # cut while thinking: the reasoning's box
    ("The answer is 18.", r"maybe \boxed{5}", 5),      # the reasoning's box beats the content's bare number
    ("The answer is 18.", "first 5", 18),               # no box: the content's last number
    ("Done.", "first 5 then 7", 7),                     # no number in the content: the reasoning's
    ("", "", None),
    (r"\boxed{\frac{1}{2}}", r"\boxed{5}", None),     # a box that is no integer still decides
]


@pytest.mark.parametrize(("content", "reasoning", "answer"), SPLIT_CASES)
def test_a_split_reply_answers_as_its_whole_generation(content: str, reasoning: str, answer: int | None) -> None:
    assert split_answer(content, reasoning) == answer == extract_answer(f"<think>{reasoning}</think>{content}")
    assert split_candidates(content, reasoning) == answer_candidates(f"<think>{reasoning}</think>{content}")


def test_the_boxed_text_of_a_split_reply_is_the_contents_else_the_reasonings() -> None:
    assert split_boxed_text(r"\boxed{x+1}", r"\boxed{y}") == "x+1"
    assert split_boxed_text("no box", r"\boxed{y}") == "y"
    assert split_boxed_text("", "") is None
    assert box_source("no box", r"\boxed{y}") == r"\boxed{y}"
    assert box_source(r"\boxed{x}", r"\boxed{y}") == r"\boxed{x}"
