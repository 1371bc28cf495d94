"""Gold items for grading: a problem, its gold answer as text, its reference chain of thought, and the id
prediction files use for it.

Two sources give the same items:
- a gold file in one of the grading formats (``read_gold_file``), the layouts prediction files were made from:
  ``gsm8k`` (`question`, `answer` = worked solution ending ``#### N``), ``math500`` (`problem`, `solution`,
  `answer`, `unique_id`), ``aime`` (`id`, `problem`, `solution`, `answer`) and ``amc23`` (`id`, `question` or
  `problem`, `answer` such as 27.0, no solution); each key can be overridden;
- a project dataset's normalized file (``gold_from_normalized``): `meta` keeps the row's id, unique_id and
  solution fields, and normalize keeps a GSM8K answer's worked solution as `meta.solution`.

An item's id is the row's `id`, else its `unique_id`, else ``<prefix>_test_<row index from 0>`` (the ids of the
prediction files users have: "gsm8k_test_0"); an id key given explicitly must be in every row.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from tracevote.answers.formats import GSM8K_MARK
from tracevote.core.errors import DataError
from tracevote.datasets.local import read_local_rows
from tracevote.datasets.problems import Problem, load_problems, records_of_rows

GradingFormat = Literal["gsm8k", "math500", "aime", "amc23"]
GRADING_FORMATS: tuple[GradingFormat, ...] = ("gsm8k", "math500", "aime", "amc23")
DEFAULT_ID_KEYS = ("id", "unique_id")


@dataclass(frozen=True)
class GoldItem:
    id: str
    problem: str
    answer: str  # as Math-Verify reads it, gold first
    reference: str | None  # the reference chain of thought; None when the dataset has none


@dataclass(frozen=True)
class GoldKeys:
    """Where a row keeps each part. `problem` lists candidates, the first present wins; `reference` None: the
    dataset has no reference solution field; `split_mark`: the answer field is a worked solution whose gold
    follows the last ``####`` (and whose text before it is the reference)."""

    problem: tuple[str, ...]
    answer: str
    reference: str | None
    id: str | None = None  # None: `id`, else `unique_id`, else <prefix>_test_<index>
    split_mark: bool = False


FORMAT_KEYS: dict[GradingFormat, GoldKeys] = {
    "gsm8k": GoldKeys(problem=("question",), answer="answer", reference=None, split_mark=True),
    "math500": GoldKeys(problem=("problem",), answer="answer", reference="solution"),
    "aime": GoldKeys(problem=("problem",), answer="answer", reference="solution"),
    "amc23": GoldKeys(problem=("question", "problem"), answer="answer", reference=None),
}
NORMALIZED_KEYS = GoldKeys(problem=("problem",), answer="answer", reference="solution")


def format_keys(grading_format: GradingFormat, *, problem: str | None = None, answer: str | None = None,
                reference: str | None = None, id_key: str | None = None) -> GoldKeys:
    """A format's keys with the overrides given (None keeps the format's own)."""
    keys = FORMAT_KEYS[grading_format]
    return replace(keys, problem=(problem,) if problem else keys.problem, answer=answer or keys.answer,
                   reference=reference or keys.reference, id=id_key or keys.id)


def read_gold_file(path: Path, keys: GoldKeys, *, prefix: str) -> list[GoldItem]:
    """The gold items of a .jsonl/.json/.parquet/.csv file; errors name the file and row."""
    return gold_items(read_local_rows(path), keys, prefix=prefix, origin=str(path))


PROJECT_ID = "\x00project id"  # an id key no row has: the normalized record's own id (a pool's problem ids)


def gold_from_normalized(path: Path, *, prefix: str, id_key: str | None = None,
                         project_ids: bool = False) -> list[GoldItem]:
    """The gold items of a project dataset's normalized file (the normalize stage's output); `project_ids`:
    named by the normalized records' own ids, as the dataset's pool names its problems."""
    problems = load_problems(path)
    keys = replace(NORMALIZED_KEYS, id=PROJECT_ID if project_ids else id_key)
    return gold_items([_row_of(problem) for problem in problems], keys, prefix=prefix, origin=str(path))


def _row_of(problem: Problem) -> dict[str, Any]:
    return {**problem.meta, "problem": problem.problem, "answer": problem.answer, PROJECT_ID: problem.id}


def gold_items(rows: Sequence[dict[str, Any]], keys: GoldKeys, *, prefix: str, origin: str) -> list[GoldItem]:
    """Every row's item, or one DataError listing every bad row (numbered from 0, as ids count) and repeated id."""
    def check(row: dict[str, Any], index: int) -> tuple[list[str], GoldItem | None]:
        try:
            return [], gold_item(row, index, keys, prefix)
        except DataError as exc:
            return [str(exc)], None

    return records_of_rows(rows, check, origin=origin, first_number=0, heading=" in the gold file",
                           empty="no rows (expected one gold item per row: a problem and its answer)")


def gold_item(row: dict[str, Any], index: int, keys: GoldKeys, prefix: str) -> GoldItem:
    problem_key = next((key for key in keys.problem if row.get(key) is not None), keys.problem[0])
    problem = row.get(problem_key)
    if not isinstance(problem, str) or not problem.strip():
        raise DataError(f"field {problem_key!r}: expected the problem's text, got {_shown(problem)}")
    answer_field = row.get(keys.answer)
    answer = answer_text(answer_field, keys.answer)
    reference = _reference(row, keys)
    if keys.split_mark:
        if not isinstance(answer_field, str) or GSM8K_MARK not in answer_field:
            raise DataError(f"field {keys.answer!r}: expected a worked solution ending '{GSM8K_MARK} N' (GSM8K's "
                            f"layout), got {_shown(answer_field)}")
        worked, answer = answer_field.rsplit(GSM8K_MARK, 1)
        answer, reference = answer.strip(), worked.strip() or None
        if not answer:
            raise DataError(f"field {keys.answer!r}: nothing after the last {GSM8K_MARK}: {_shown(answer_field)}")
    return GoldItem(item_id(row, index, keys.id, prefix), problem, answer, reference)


def answer_text(value: Any, key: str) -> str:
    """A gold answer as text: "27.0" and 27.0 read "27" (AMC 2023's floats), other numbers as Python writes them.

    >>> answer_text(27.0, "answer"), answer_text(" \\\\frac{1}{2} ", "answer"), answer_text(0.25, "answer")
    ('27', '\\\\frac{1}{2}', '0.25')
    """
    if isinstance(value, bool) or value is None:
        raise DataError(f"field {key!r}: expected a gold answer, got {_shown(value)}")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise DataError(f"field {key!r}: {value!r} is not a finite number")
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, int):
        return str(value)
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"field {key!r}: expected a gold answer, got {_shown(value)}")
    text = value.strip()
    return _integral_text(text) or text


def _integral_text(text: str) -> str | None:
    """ "27.0" -> "27"; None for any other text."""
    whole, dot, decimals = text.partition(".")
    if dot and whole.lstrip("-").isdigit() and decimals and not decimals.strip("0"):
        return whole
    return None


def _reference(row: dict[str, Any], keys: GoldKeys) -> str | None:
    if keys.reference is None:
        return None
    value = row.get(keys.reference)
    return value.strip() if isinstance(value, str) and value.strip() else None


def item_id(row: dict[str, Any], index: int, id_key: str | None, prefix: str) -> str:
    """The row's id as prediction files give it; an explicit `id_key` must be present."""
    if id_key is not None:
        value = row.get(id_key)
        if not _usable_id(value):
            raise DataError(f"field {id_key!r} (the id key): expected a text or integer id, got {_shown(value)}")
        return str(value)
    for key in DEFAULT_ID_KEYS:
        if _usable_id(row.get(key)):
            return str(row[key])
    return f"{prefix}_test_{index}"


def _usable_id(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, str) and bool(value))


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
