"""The final integer answer of a trace: the last boxed answer, else the last number in the text.

Answers are AIME-style integers 0-999; anything else (fractions, negatives, decimals such as 12.5,
numbers of 1000 or more, symbols) is "no answer" (None), which the score stage marks invalid.

Ingestion stores a trace's `AnswerCandidates` (what its box says, and what its last number says);
the score stage then applies the `answers:` params with `resolve_answer`, so changing them re-reads
no text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from tracevote.core.config_datasets import AnswersConfig

AnswerSource = Literal["boxed", "fallback", "none"]
ANSWER_SOURCES: tuple[AnswerSource, ...] = ("boxed", "fallback", "none")
# Bump when a change to these rules changes any answer: stored candidates of another version are re-extracted.
EXTRACT_VERSION = 1
TRUNCATED = "length"  # the finish_reason of a trace cut off at max_tokens

ANSWER_RANGE = range(0, 1000)

_BOX_OPEN = re.compile(r"\\(?:boxed|fbox)\s*\{")
_BRACE = re.compile(r"[{}]")
# A number token: optional sign, digits with optional thousands separators, decimals or a /denominator.
# subtle: '-' is a sign only when glued to the digit and not preceded by a word or a closing bracket,
# so "10-3" and "10 - 3" end in 3, while "= -5" and "\boxed{-5}" end in -5.
_NUMBER = re.compile(r"(?<![\d.])(?:(?<![\w)\]}])-)?\d+(?:,\d{3})*(?:\.\d+)?(?:/\d+)?(?!\d)")
# Inside a box these mean the value is not a plain integer, whatever digits it holds.
_NOT_INTEGER = re.compile(r"\\[dt]?frac|\\sqrt|\\pi|\^|/|\\infty")
_ARITHMETIC = re.compile(r"\d\s*(?:[-+*×÷]|\\times|\\cdot|\\div)\s*\d")
_DEGREES = re.compile(r"\^\s*\{?\s*\\circ\s*\}?")
# LaTeX thousands separators: 1{,}000 and 1\,000 read as 1,000.
_DIGIT_GAP = re.compile(r"(?<=\d)(?:\{,\}|\\,|\\!)(?=\d)")
_TAIL_CHARS = 256  # first tail scanned for the last number; "**Answer:** 16" needs far less


def extract_answer(text: str) -> int | None:
    """The trace's final answer as an integer 0-999, or None.

    Rules, in order:
    1. The last ``\\boxed{...}`` (also ``\\boxed {...}`` and ``\\fbox{...}``) whose braces match and
       whose content is not blank is the answer box. Unmatched or empty boxes (a truncated trace, or a
       model quoting the prompt's "\\boxed{}") are ignored, as if absent.
    2. In the box: drop a degree mark (``70^\\circ``) and keep only what follows the last ``=``
       (``\\boxed{N = 70}`` -> 70). If the rest holds a fraction, root, power, ``/``, ``\\pi`` or
       arithmetic between numbers, it is not a plain integer: None (``\\boxed{\\frac{4}{2}}``,
       ``\\boxed{2^{10}}`` and ``\\boxed{6 \\times 7}`` are not evaluated). Otherwise take the last
       number in it, so words around it are ignored (``\\boxed{\\text{Answer: } 12}`` -> 12).
       A box with no number is None.
    3. No box: the last number anywhere in the text (``**Answer:** 16`` -> 16).
    4. A number reads with its sign and thousands separators: "-5" is -5, "1,000", "1{,}000" and
       "1\\,000" are 1000, "025" is 25, "12.0" is 12; "12.5" and "1/2" are not integers.
       Only integers 0-999 are answers.

    >>> extract_answer(r"so $\\boxed{025}$. Also \\boxed{\\textbf{70}}.")
    70
    >>> extract_answer(r"\\boxed{\\frac{1}{2}}") is None
    True
    """
    # Boxes are found in the raw text: normalizing first would change no box (separators sit between
    # digits, with balanced braces), but it would cost a pass over the whole trace.
    content = _last_box(text)
    return _last_number(text) if content is None else _boxed_answer(content)


@dataclass(frozen=True)
class AnswerCandidates:
    """What a trace offers as its answer, before the `answers:` params decide.

    box_found: the trace has a box with matched braces and non-blank content (rule 1 below).
    boxed: that box's integer answer (None when there is no box, or it is not an integer 0-999).
    last_number: the last number in the whole text as an answer (rule 3), used only when no box is found.
    """

    box_found: bool
    boxed: int | None
    last_number: int | None

    def to_json(self) -> list[object]:
        return [self.box_found, self.boxed, self.last_number]

    @classmethod
    def from_json(cls, value: list[object]) -> AnswerCandidates:
        box_found, boxed, last_number = value
        return cls(bool(box_found), _optional_int(boxed), _optional_int(last_number))


def _optional_int(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]


def answer_candidates(text: str) -> AnswerCandidates:
    """Both candidates of `extract_answer`: the box's answer, and the last number when there is no box.

    >>> answer_candidates(r"x = 3, so \\boxed{5}")
    AnswerCandidates(box_found=True, boxed=5, last_number=None)
    >>> answer_candidates("the answer is 16")
    AnswerCandidates(box_found=False, boxed=None, last_number=16)
    """
    content = _last_box(text)
    if content is None:
        return AnswerCandidates(box_found=False, boxed=None, last_number=_last_number(text))
    return AnswerCandidates(box_found=True, boxed=_boxed_answer(content), last_number=None)


def split_candidates(content: str, reasoning: str) -> AnswerCandidates:
    """The candidates of a reply whose server split its thinking (`reasoning`) from its answer (`content`).

    The content decides; where it has no box, a box in the reasoning does (a trace cut at max_tokens while still
    reasoning has an empty content); with no box anywhere, the content's last number, else the reasoning's. So the
    result is what `answer_candidates` reads from the whole generation, reasoning then content, as the official
    DeepConf code reads vLLM's whole output text (docs/endpoints.md, split thinking).

    >>> split_candidates("", r"so \\boxed{5}")
    AnswerCandidates(box_found=True, boxed=5, last_number=None)
    >>> split_candidates(r"\\boxed{7}", r"first \\boxed{5}")
    AnswerCandidates(box_found=True, boxed=7, last_number=None)
    """
    answer = answer_candidates(content)
    if answer.box_found or not reasoning:
        return answer
    thought = answer_candidates(reasoning)
    if thought.box_found or answer.last_number is None:
        return thought
    return answer


def split_answer(content: str, reasoning: str) -> int | None:
    """`extract_answer` of a split reply, read as `split_candidates` says."""
    candidates = split_candidates(content, reasoning)
    return candidates.boxed if candidates.box_found else candidates.last_number


def split_boxed_text(content: str, reasoning: str) -> str | None:
    """`boxed_text` of a split reply: the content's last box, else the reasoning's."""
    return boxed_text(box_source(content, reasoning))


def box_source(content: str, reasoning: str) -> str:
    """The text a split reply's box is read from: its content, unless only the reasoning boxes an answer."""
    return reasoning if reasoning and _last_box(content) is None and _last_box(reasoning) is not None else content


def boxed_text(text: str) -> str | None:
    """The content of the trace's last box with matched braces and non-blank content, stripped; None if none.

    >>> boxed_text(r"so \\boxed{1} then \\boxed{ \\frac{1}{2} }")
    '\\\\frac{1}{2}'
    """
    content = _last_box(text)
    return None if content is None else content.strip()


def resolve_answer(candidates: AnswerCandidates, finish_reason: str,
                   cfg: AnswersConfig) -> tuple[int | None, AnswerSource]:
    """The answer a trace votes with, and where it came from.

    - A box decides whenever one is found, truncated trace or not: its integer, else no answer.
    - With no box, the last number is taken (source "fallback") when `cfg.fallback` is
      last_integer and the trace was not cut off at max_tokens (finish_reason "length"), unless
      `cfg.truncated_fallback` admits those too. A truncated trace has not given a final answer:
      its last number is usually an intermediate result.
    """
    if candidates.box_found:
        return (candidates.boxed, "boxed") if candidates.boxed is not None else (None, "none")
    allowed = cfg.fallback == "last_integer" and (finish_reason != TRUNCATED or cfg.truncated_fallback)
    if allowed and candidates.last_number is not None:
        return candidates.last_number, "fallback"
    return None, "none"


def _boxed_answer(content: str) -> int | None:
    content = _DEGREES.sub("", _normalize(content)).rsplit("=", 1)[-1]
    if _NOT_INTEGER.search(content) or _ARITHMETIC.search(content):
        return None
    return _last_number(content)


def _last_box(text: str) -> str | None:
    """Content of the last box with matched braces and non-blank content, or None."""
    for opening in reversed(list(_BOX_OPEN.finditer(text))):
        content = _braced(text, opening.end())
        if content is not None and content.strip():
            return content
    return None


def _braced(text: str, start: int) -> str | None:
    """Text from `start` up to the brace closing the one just before it; None if it never closes."""
    depth = 1
    for brace in _BRACE.finditer(text, start):
        depth += 1 if brace.group() == "{" else -1
        if depth == 0:
            return text[start:brace.start()]
    return None


def _normalize(text: str) -> str:
    """Unicode minus as '-', LaTeX thousands separators as ',': "−1{,}000" -> "-1,000"."""
    return _DIGIT_GAP.sub(",", text.replace("\u2212", "-"))


def _last_number(text: str) -> int | None:
    """The last number token of `text` (normalized) as an answer: an integer in 0-999, else None.

    A trace runs to ~16 KB and its last number is near the end, so only a tail is normalized and
    scanned, widened until it holds a number. The tail starts just after whitespace, which no token
    or separator contains and which every lookbehind treats like the start of the text, so the tail's
    last token is the whole text's.
    """
    window = _TAIL_CHARS
    while True:
        start = _after_space(text, len(text) - window)
        tokens = _NUMBER.findall(_normalize(text[start:]))
        if tokens or start == 0:
            return _as_answer(tokens[-1]) if tokens else None
        window *= 4


def _after_space(text: str, before: int) -> int:
    """The position just after the last space or newline before `before`; 0 if there is none."""
    if before <= 0:
        return 0
    return max(text.rfind(" ", 0, before), text.rfind("\n", 0, before)) + 1


def _as_answer(token: str) -> int | None:
    if "/" in token:
        return None
    whole, _, decimals = token.replace(",", "").partition(".")
    if decimals.strip("0"):
        return None
    value = int(whole)
    return value if value in ANSWER_RANGE else None
