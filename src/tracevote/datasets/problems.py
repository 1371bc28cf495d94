"""Problems: the normalize stage's checks, and reading the normalized file back.

Every problem is `{"id", "problem", "answer", "meta"}`; `meta` keeps the row's other scalar fields
(year, contest, level, subject, ...). `answer` is an integer (answer formats aime and integer) or
LaTeX text (math).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tracevote.answers.formats import gold_answer
from tracevote.core.config import DatasetConfig
from tracevote.core.errors import DataError

ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# Control characters that public AIME copies carry where a LaTeX backslash escape was eaten.
CONTROL_HINTS = {"\f": "\\frac?", "\t": "\\triangle, \\theta or \\text?", "\b": "\\binom or \\beta?",
                 "\r": "\\right?", "\v": "\\vec?", "\a": "\\alpha?"}
CONTROL_CHARS = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")
# What follows a tab when "\triangle", "\theta", "\text", ... lost its backslash-t to JSON's "\t" escape.
EATEN_T_COMMAND = re.compile(r"(riangle|heta|ext|imes|an|au|o|frac|binom|op|ilde|herefore|extbf|extit)(?![a-z])")


@dataclass(frozen=True)
class Problem:
    id: str
    problem: str
    answer: int | str
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def to_record(self) -> dict[str, Any]:
        return {"id": self.id, "problem": self.problem, "answer": self.answer, "meta": self.meta}


def normalize_rows(rows: list[dict[str, Any]], cfg: DatasetConfig, origin: str) -> list[Problem]:
    """Check every row and return the problems, or raise one DataError listing every bad row.

    Rows are numbered from 1 as they stand in `origin`.
    """
    problems: list[Problem] = []
    errors: list[str] = []
    seen_ids: dict[str, int] = {}
    for number, row in enumerate(rows, start=1):
        row_errors, problem = _normalize_row(row, number, cfg)
        errors.extend(f"row {number}: {message}" for message in row_errors)
        if problem is None:
            continue
        if problem.id in seen_ids:
            errors.append(f"row {number}: field {_id_field(cfg)!r}: duplicate id {problem.id!r} "
                          f"(first at row {seen_ids[problem.id]})")
            continue
        seen_ids[problem.id] = number
        problems.append(problem)
    if not rows:
        errors.append("no rows")
    if errors:
        listing = "\n  ".join(errors)
        raise DataError(f"{origin}: {len(errors)} problem(s), nothing written:\n  {listing}")
    return problems


def _normalize_row(row: dict[str, Any], number: int, cfg: DatasetConfig) -> tuple[list[str], Problem | None]:
    errors: list[str] = []
    text = _problem_text(row, cfg.problem_key, errors)
    answer = _answer(row, cfg, errors)
    problem_id = _problem_id(row, number, cfg, errors)
    if errors or text is None or answer is None or problem_id is None:
        return errors, None
    used = {cfg.problem_key, cfg.answer_key, cfg.id_key}
    meta = {k: v for k, v in row.items() if k not in used and _is_scalar(v)}
    return errors, Problem(problem_id, text, answer, meta)


def _problem_text(row: dict[str, Any], key: str, errors: list[str]) -> str | None:
    value = row.get(key)
    if value is None:
        errors.append(f"field {key!r}: missing (row keys: {', '.join(sorted(row)) or 'none'})")
        return None
    if not isinstance(value, str) or not value.strip():
        errors.append(f"field {key!r}: expected non-empty text, got {value!r}")
        return None
    for match in CONTROL_CHARS.finditer(value):
        char = match.group()
        if char == "\t" and not EATEN_T_COMMAND.match(value, match.end()):
            continue  # a real tab (MATH-500 indents its Asymptote code), not the start of \triangle
        hint = f" (a mis-escaped {CONTROL_HINTS[char]})" if char in CONTROL_HINTS else ""
        context = value[max(0, match.start() - 15): match.start() + 15]
        errors.append(f"field {key!r}: contains control character U+{ord(char):04X} at offset "
                      f"{match.start()}{hint}: {context!r}")
    return value


def _answer(row: dict[str, Any], cfg: DatasetConfig, errors: list[str]) -> int | str | None:
    answer, reason = gold_answer(row.get(cfg.answer_key), cfg.answer_format)
    if reason is not None:
        errors.append(f"field {cfg.answer_key!r}: {reason}")
    return answer


def _problem_id(row: dict[str, Any], number: int, cfg: DatasetConfig, errors: list[str]) -> str | None:
    if cfg.id_key is None:
        return f"{cfg.name}-{number:02d}"
    value = row.get(cfg.id_key)
    problem_id = str(value) if isinstance(value, str | int) and not isinstance(value, bool) else ""
    if not ID_PATTERN.match(problem_id):
        errors.append(f"field {cfg.id_key!r}: id {value!r} is empty or not of letters, digits, '.', '_', '-'")
        return None
    return problem_id


def _id_field(cfg: DatasetConfig) -> str:
    return cfg.id_key or "id"


def _is_scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool) or value is None


def load_problems(path: str | Path) -> list[Problem]:
    """Read a normalized problems file (the normalize stage's output)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: problems file not found (run `dvc repro normalize`)")
    problems = []
    for number, line in enumerate(path.read_bytes().splitlines(), start=1):
        try:
            record = orjson.loads(line)
            problems.append(Problem(record["id"], record["problem"], _stored_answer(record["answer"]),
                                    record.get("meta", {})))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise DataError(f"{path}: line {number}: not a normalized problem record ({exc!r})") from exc
    return problems


def _stored_answer(value: Any) -> int | str:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(f"answer {value!r} is neither an integer nor text")
    return value
