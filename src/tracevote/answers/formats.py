"""Gold answers by answer format: `aime` (an integer 0-999), `integer` (any integer, GSM8K style) and
`math` (a LaTeX answer such as "\\frac{14}{3}", kept as text and compared with Math-Verify).

A GSM8K answer field is a worked solution ending in ``#### 1,234``; the gold is the number after the
last ``####``, with thousands commas removed. A plain integer field ("25", 25, 25.0) is read as is.
"""

from __future__ import annotations

import math
import re
from typing import Any

from tracevote.core.config_datasets import AnswerFormat, IntegerFormat

AIME_RANGE = range(0, 1000)

GSM8K_MARK = "####"
_INTEGER = re.compile(r"\s*([+-]?\d{1,3}(?:,\d{3})+|[+-]?\d+)\s*")


def gold_answer(value: Any, answer_format: AnswerFormat) -> tuple[int | str | None, str | None]:
    r"""The gold answer of a field in `answer_format` and None, or None and why there is none.

    >>> gold_answer(" \\frac{14}{3} ", "math")
    ('\\frac{14}{3}', None)
    """
    if answer_format == "math":
        return gold_math(value)
    return gold_integer(value, answer_format)


def gold_math(value: Any) -> tuple[str | None, str | None]:
    """A LaTeX gold answer as text: a number is kept as the text Python gives it; NaN and infinities are no answer.

    >>> gold_math(0.5)
    ('0.5', None)
    """
    if value is None:
        return None, "missing or empty"
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None, f"expected a LaTeX answer (text or a number), got {_shown(value)}"
    if isinstance(value, float) and not math.isfinite(value):
        return None, f"{_shown(value)} is not a finite number"
    text = str(value).strip()
    if not text:
        return None, "missing or empty"
    return text, None


def gold_integer(value: Any, answer_format: IntegerFormat) -> tuple[int | None, str | None]:
    """The gold integer of an answer field and None, or None and why it is not one (for an error message).

    >>> gold_integer("Janet sells 9 eggs.\\n#### 1,018", "integer")
    (1018, None)
    >>> gold_integer("1000", "aime")
    (None, "'1000' is outside the AIME range 0-999")
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None, "missing or empty"
    number = parse_integer(_after_mark(value))
    if number is None:
        return None, f"{_shown(value)} is not an integer"
    if answer_format == "aime" and number not in AIME_RANGE:
        return None, f"{_shown(value)} is outside the AIME range 0-999"
    return number, None


def _after_mark(value: Any) -> Any:
    if isinstance(value, str) and GSM8K_MARK in value:
        return value.rsplit(GSM8K_MARK, 1)[1]
    return value


def parse_integer(value: Any) -> int | None:
    """An integer from an answer field: 25, "25", " 025 ", "1,018" and 25.0 -> the number; "25.5", "x" -> None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str):
        match = _INTEGER.fullmatch(value)
        return int(match.group(1).replace(",", "")) if match else None
    return None


def _shown(value: Any) -> str:
    """A value as the error message quotes it: short, one line (control characters escaped by repr)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
