"""The gold answers the simulated model knows, of every answer format, and the wrong answers it gives instead.

A gold is learnt from its normalized value (tracevote.answers.formats): an integer (answer formats aime and integer)
or LaTeX text (math). Text that is an integer ("42", as most MATH-500 answers are) is kept as that integer, so
it is answered as an integer problem is; other text ("\\frac{14}{3}", "\\left( 3, \\frac{\\pi}{2} \\right)") is
kept as text and boxed as written. The simulator writes answers in printable ASCII with balanced braces (a box
must close where the answer ends): a gold it cannot write is not learnt (`sim_gold` says why), and its caller
warns instead of failing.

A wrong text answer is plausible: the gold with one of its numbers changed (+1, x2), else the gold negated,
doubled, halved or plus one; wrong answers scattered further come from the other text golds of its dataset.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

Gold = int | str
_INTEGER = re.compile(r"[+-]?\d+")
_NUMBER = re.compile(r"\d+")
_WRITABLE = re.compile(r"[ -~]+")  # printable ASCII: the simulator's vocabulary spells these one by one


def sim_gold(value: int | str) -> tuple[Gold | None, str | None]:
    """The gold as the simulator keeps it and None, or None and why it cannot answer with it.

    >>> sim_gold(" 42 "), sim_gold("\\\\frac{14}{3}")
    ((42, None), ('\\\\frac{14}{3}', None))
    >>> sim_gold("\\\\frac{1}{2")
    (None, "'\\\\\\\\frac{1}{2': unbalanced braces")
    """
    if isinstance(value, int):
        return value, None
    text = value.strip()
    if _INTEGER.fullmatch(text):
        return int(text), None
    if not _WRITABLE.fullmatch(text):
        return None, f"{text[:40]!r}: characters other than printable ASCII"
    if not _balanced(text):
        return None, f"{text[:40]!r}: unbalanced braces"
    return text, None


def _balanced(text: str) -> bool:
    depth = 0
    for char in text:
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0


def near_misses(gold: str) -> tuple[str, ...]:
    """Wrong answers close to a text gold: each number in it changed (+1, x2), then four rewrites of the whole,
    distinct and never the gold's text (so always four or more).

    >>> near_misses("\\\\frac{14}{3}")[:4]
    ('\\\\frac{15}{3}', '\\\\frac{28}{3}', '\\\\frac{14}{4}', '\\\\frac{14}{6}')
    >>> near_misses("p - q")
    ('-(p - q)', '2(p - q)', 'p - q + 1', '\\\\frac{p - q}{2}')
    """
    variants = []
    for match in _NUMBER.finditer(gold):
        value = int(match.group())
        for changed in (value + 1, value * 2):
            variants.append(gold[:match.start()] + str(changed) + gold[match.end():])
    variants += [f"-({gold})", f"2({gold})", f"{gold} + 1", f"\\frac{{{gold}}}{{2}}"]
    return tuple(variant for variant in dict.fromkeys(variants) if variant != gold)


def text_wrong_pool(gold: str, others: Sequence[str]) -> np.ndarray:
    """Where a scattered wrong answer to a text gold comes from: its near misses, then the dataset's other text
    golds (object array, with repeats)."""
    pool = [*near_misses(gold), *(other for other in others if other != gold)]
    array = np.empty(len(pool), dtype=object)
    array[:] = pool
    return array
