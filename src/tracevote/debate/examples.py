"""Worked examples placed before the problem, as DyLAN's MATH script places its EXAMPLES.

`debate.examples` is null (none), a built-in set's name (`builtin_aime`: real AIME problems from before 2024,
in aime_examples.json beside this module) or the text itself. A built-in set is rendered in DyLAN's layout,
one example after another with a blank line between:

    Problem: <problem>
    Answer: Let's think step by step
    <worked solution, ending in \\boxed{N}>
    The answer is N

The sources (year, contest, problem number) and topics stay in the data file; the prompt, as DyLAN's, names
neither.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from tracevote.core.errors import DataError

# name -> data file beside this module; core.config.BUILTIN_EXAMPLES lists the same names (config validates them)
BUILTIN_FILES = {"builtin_aime": Path(__file__).with_name("aime_examples.json")}
CONTESTS = ("I", "II")
FIELDS = ("source", "topic", "problem", "solution", "answer")


@dataclass(frozen=True)
class Source:
    year: int
    contest: str  # I or II
    problem: int  # 1-15, as the contest numbers it

    def label(self) -> str:
        """How the paper's examples name their source.

        >>> Source(2010, "I", 2).label()
        '2010 AIME I Problem 2'
        """
        return f"{self.year} AIME {self.contest} Problem {self.problem}"


@dataclass(frozen=True)
class Example:
    source: Source
    topic: str
    problem: str
    solution: str  # ends in \boxed{answer}
    answer: int

    def render(self) -> str:
        return (f"Problem: {self.problem}\nAnswer: Let's think step by step\n{self.solution}\n"
                f"The answer is {self.answer}")


def examples_text(setting: str | None) -> str | None:
    """What `debate.examples` puts before the problem: None, a built-in set rendered, or the text as given."""
    if setting in BUILTIN_FILES:
        return render(builtin_examples(setting))
    return setting


def render(examples: tuple[Example, ...]) -> str:
    return "\n\n".join(example.render() for example in examples)


@functools.cache
def builtin_examples(name: str) -> tuple[Example, ...]:
    return read_examples(BUILTIN_FILES[name])


def read_examples(path: Path) -> tuple[Example, ...]:
    """The examples of a JSON list file; DataError names the file, the example (1-based) and the field."""
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise DataError(f"{path}: not a readable JSON file ({exc})") from exc
    if not isinstance(data, list) or not data:
        raise DataError(f"{path}: expected a non-empty JSON list of examples")
    return tuple(_example(item, f"{path}: example {number}") for number, item in enumerate(data, start=1))


def _example(item: Any, where: str) -> Example:
    if not isinstance(item, dict) or sorted(item) != sorted(FIELDS):
        keys = sorted(item) if isinstance(item, dict) else type(item).__name__
        raise DataError(f"{where}: expected an object with exactly {', '.join(FIELDS)}; got {keys}")
    for key in ("topic", "problem", "solution"):
        if not isinstance(item[key], str) or not item[key].strip():
            raise DataError(f"{where}: field {key!r}: expected non-empty text, got {item[key]!r:.80}")
    answer = item["answer"]
    if isinstance(answer, bool) or not isinstance(answer, int) or not 0 <= answer <= 999:
        raise DataError(f"{where}: field 'answer': expected an integer 0-999, got {answer!r}")
    if not item["solution"].rstrip(" .$\n").endswith(f"\\boxed{{{answer}}}"):
        raise DataError(f"{where}: field 'solution': must end in \\boxed{{{answer}}} (its stated answer)")
    return Example(_source(item["source"], f"{where}: field 'source'"), item["topic"], item["problem"],
                   item["solution"], answer)


def _source(raw: Any, where: str) -> Source:
    if not isinstance(raw, dict) or sorted(raw) != ["contest", "problem", "year"]:
        raise DataError(f"{where}: expected {{year, contest, problem}}, got {raw!r:.80}")
    year, contest, number = raw["year"], raw["contest"], raw["problem"]
    # subtle: the AIME has had contests I and II since 2000, and the examples must predate the data (2024 on)
    if not isinstance(year, int) or not 2000 <= year <= 2023:
        raise DataError(f"{where}: year {year!r} must be an integer 2000-2023")
    if contest not in CONTESTS:
        raise DataError(f"{where}: contest {contest!r} must be one of {', '.join(CONTESTS)}")
    if not isinstance(number, int) or not 1 <= number <= 15:
        raise DataError(f"{where}: problem {number!r} must be an integer 1-15")
    return Source(year, contest, number)
