"""DeltaBench (OpenStellarTeam/DeltaBench) -> ProcessBench-style step records, by rules each tested.

A DeltaBench record holds a long chain of thought split into labelled sections:
- `question`: the problem;
- `sections_content` (some copies: `section_content`): "section1: ...\\n\\n\\nsection2: ...";
- `reason_error_section_numbers`: the 1-based sections with a reasoning error;
- `task_l1`, `task_l2`, `final_correct`, `id` and more.
The hub's CSV holds list fields as Python literals in text ("[3, 5]", "['a', 'b']"): they are read with
ast.literal_eval, which evaluates literals only.

The record made: steps = the sections' contents in order, without their "sectionN:" prefixes (the numbers
must run 1, 2, 3, ...); label = the smallest error section number - 1, or -1 when the list is empty (a
label that does not index a step is an error); task = task_l1; the source's other scalar fields go to meta,
but for `long_cot` and `sections`, which repeat the steps.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from tracevote.core.errors import DataError

SECTIONS_KEYS = ("sections_content", "section_content")
ERRORS_KEY = "reason_error_section_numbers"
_SECTION = re.compile(r"(?:^|\n)[ \t]*section(\d+):[ \t]*", re.IGNORECASE)
_USED = {"question", *SECTIONS_KEYS, ERRORS_KEY, "task_l1", "id", "sections", "long_cot"}


def convert_rows(rows: list[dict[str, Any]], origin: str) -> list[dict[str, Any]]:
    """Every row converted, or one DataError naming each bad row (numbered from 1), field and value; no row at
    all is an error too (an empty file, or a CSV with only its header, cannot be what was meant)."""
    if not rows:
        raise DataError(f"{origin}: no DeltaBench rows (expected records with question, sections_content and "
                        f"{ERRORS_KEY}; a CSV needs a header row and at least one record)")
    records, problems = [], []
    for number, row in enumerate(rows, start=1):
        try:
            records.append(convert_row(row, number))
        except ValueError as exc:
            problems.append(f"row {number}: {exc}")
    if problems:
        raise DataError(f"{origin}: {len(problems)} DeltaBench rows cannot be converted:\n  " + "\n  ".join(problems))
    return records


def convert_row(row: dict[str, Any], number: int) -> dict[str, Any]:
    """One record: {"id", "problem", "steps", "label", "task", "meta"}; ValueError names the field and value."""
    problem = _text(row, "question")
    steps = split_sections(_sections_text(row))
    label = first_error_label(_literal_list(row, ERRORS_KEY), len(steps))
    meta = {k: v for k, v in row.items() if k not in _USED and (isinstance(v, str | int | float | bool) or v is None)}
    record_id = str(row.get("id") or f"deltabench-{number:04d}")
    return {"id": record_id, "problem": problem, "steps": steps, "label": label, "task": _text(row, "task_l1"),
            "meta": meta}


def split_sections(text: str) -> list[str]:
    """"section1: a\\n\\n\\nsection2: b" -> ["a", "b"]; the numbers must run 1, 2, 3, ...

    >>> split_sections("section1: Let x = 2.\\n\\n\\nsection2: So x + 1 = 3.")
    ['Let x = 2.', 'So x + 1 = 3.']
    """
    marks = list(_SECTION.finditer(text))
    if not marks or text[:marks[0].start()].strip():
        raise ValueError(f"field 'sections_content': does not start with 'section1:': {text[:60]!r}")
    numbers = [int(mark.group(1)) for mark in marks]
    if numbers != list(range(1, len(marks) + 1)):
        raise ValueError(f"field 'sections_content': sections are numbered {numbers[:12]}, not 1, 2, 3, ...")
    ends = [mark.start() for mark in marks[1:]] + [len(text)]
    steps = [text[mark.end():end].strip() for mark, end in zip(marks, ends, strict=True)]
    empty = [i + 1 for i, step in enumerate(steps) if not step]
    if empty:
        raise ValueError(f"field 'sections_content': section{empty[0]} is empty")
    return steps


def first_error_label(error_sections: list[Any], n_steps: int) -> int:
    """The 0-based index of the earliest error section, or -1 for none.

    >>> first_error_label([7, 3], 10), first_error_label([], 10)
    (2, -1)
    """
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in error_sections):
        raise ValueError(f"field {ERRORS_KEY!r}: expected section numbers, got {error_sections!r:.80}")
    if not error_sections:
        return -1
    label = min(error_sections) - 1
    if not 0 <= label < n_steps:
        raise ValueError(f"field {ERRORS_KEY!r}: section {label + 1} does not exist ({n_steps} sections)")
    return label


def _sections_text(row: dict[str, Any]) -> str:
    for key in SECTIONS_KEYS:
        if key in row:
            return _text(row, key)
    raise ValueError(f"field 'sections_content' (or 'section_content'): missing (row keys: {', '.join(sorted(row))})")


def _text(row: dict[str, Any], key: str) -> str:
    value = row.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"field {key!r}: expected non-empty text, got {value!r:.80}")
    return value


def _literal_list(row: dict[str, Any], key: str) -> list[Any]:
    """A list field, as a list, an array (Parquet's list columns) or the text of a Python literal (the hub's CSV).

    >>> _literal_list({"e": "[3, 5]"}, "e"), _literal_list({"e": ""}, "e")
    ([3, 5], [])
    """
    value = row.get(key)
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value.strip() or "[]")
        # subtle: "{[1]}" and "{[1]: 2}" parse, then building the set or dict raises TypeError (unhashable list)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            raise ValueError(f"field {key!r}: not a Python list literal: {value!r:.80}") from None
    elif hasattr(value, "tolist") and callable(value.tolist):
        value = value.tolist()
    if not isinstance(value, list | tuple):
        raise ValueError(f"field {key!r}: expected a list, got {value!r:.80}")
    return list(value)
