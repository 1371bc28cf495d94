"""Reading a critique's answer and voting over several (ProcessBench's `extract_answer` and voting).

A critique's answer is the content of its last "\\boxed{...}" without nested braces (the original's
`\\\\boxed\\{([^}]*)\\}`), stripped. An integer >= -1 is a vote: the index of the earliest wrong paragraph,
or -1 for none. Anything else (no box, "\\boxed{two}", "\\boxed{-3}", "\\boxed{1.5}") is unparsable: it is
counted and casts no vote. The prediction is the most common vote; a tie goes to the value seen first
among the votes, as `Counter.most_common` orders it in the original. No vote: no prediction.

The original counts the boxed strings and parses only the winner, so "\\boxed{ 2}" and "\\boxed{2}" are two
values there and an unparsable winner loses the item; here each vote is parsed first (as the issue asks),
so they are one value and unparsable strings never win.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Sequence
from dataclasses import dataclass

_BOXED = re.compile(r"\\boxed\{([^}]*)\}")
_INTEGER = re.compile(r"[+-]?\d+")


def boxed_content(text: str) -> str | None:
    matches = _BOXED.findall(text)
    return matches[-1].strip() if matches else None


def parse_vote(text: str) -> int | None:
    """The paragraph index a critique names, or None when it names none parsable.

    >>> parse_vote(r"... the earliest error is in \\boxed{3}."), parse_vote(r"\\boxed{-1}"), parse_vote("no box")
    (3, -1, None)
    """
    content = boxed_content(text)
    if content is None or not _INTEGER.fullmatch(content):
        return None
    value = int(content)
    return value if value >= -1 else None


@dataclass(frozen=True)
class Vote:
    votes: tuple[int | None, ...]  # each sample's parsed index, None when unparsable
    prediction: int | None

    @property
    def unparsable(self) -> int:
        return sum(vote is None for vote in self.votes)

    @property
    def unanimous(self) -> bool:
        """Every sample parsed, all to the same index."""
        return self.unparsable == 0 and len(set(self.votes)) == 1


def majority(votes: Sequence[int | None]) -> Vote:
    """The most common parsed index, ties to the first seen.

    >>> majority([2, None, 0, 0, 2]).prediction, majority([None, None]).prediction
    (2, None)
    """
    counted = collections.Counter(vote for vote in votes if vote is not None)
    prediction = counted.most_common(1)[0][0] if counted else None
    return Vote(tuple(votes), prediction)
