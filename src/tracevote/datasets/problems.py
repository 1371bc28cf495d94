"""Problems: the normalize stage's checks, and reading the normalized file back.

Every problem is `{"id", "problem", "answer", "meta"}`; `meta` keeps the row's other scalar fields
(year, contest, level, subject, ...), and for a GSM8K-style answer ("... #### 18") the worked solution
before the mark as `solution`. `answer` is an integer (answer formats aime and integer) or
LaTeX text (math).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import orjson

from tracevote.answers.formats import GSM8K_MARK, gold_answer
from tracevote.core.config_datasets import DatasetConfig
from tracevote.core.errors import DataError, listed

# An id is data: it names a record, never a file (core.names maps it to one). These bounds keep it printable
# and short, so a hand-edited or generated file cannot smuggle in a path, a NUL or 10 KB of text.
ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # whole id (fullmatch)
MAX_ID_CHARS = 128  # characters, and UTF-8 bytes
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
    """Check every row and return the problems, or raise one DataError listing every bad row."""
    return check_rows(rows, cfg, origin, _normalize_row)


class _Record(Protocol):
    id: str


RecordT = TypeVar("RecordT", bound=_Record)
LoadedT = TypeVar("LoadedT")
RowCheck = Callable[[dict[str, Any], int, DatasetConfig], tuple[list[str], RecordT | None]]


def check_rows(rows: list[dict[str, Any]], cfg: DatasetConfig, origin: str,
               check_row: RowCheck[RecordT]) -> list[RecordT]:
    """Every row's record by `check_row`, or one DataError listing every bad row and duplicate id.

    Rows are numbered from 1 as they stand in `origin`.
    """
    return records_of_rows(rows, lambda row, number: check_row(row, number, cfg), origin=origin,
                           id_field=_id_field(cfg))


def records_of_rows(rows: Sequence[dict[str, Any]], check_row: Callable[[dict[str, Any], int],
                    tuple[list[str], RecordT | None]], *, origin: str, first_number: int = 1,
                    id_field: str | None = None, empty: str = "no rows",
                    heading: str = ", nothing written") -> list[RecordT]:
    """Every row's record by `check_row` (its errors, or a record with an `id`), or one DataError naming
    `origin` and listing every bad row, repeated id (`id_field`: the field it came from) and an empty file.
    Rows are numbered from `first_number` (1: as they stand in a file; 0: as ids count)."""
    records: list[RecordT] = []
    rows_by_error: dict[str, list[int]] = {}
    seen_ids: dict[str, int] = {}
    for number, row in enumerate(rows, start=first_number):
        row_errors, record = check_row(row, number)
        for message in row_errors:
            rows_by_error.setdefault(message, []).append(number)
        if record is None:
            continue
        if record.id in seen_ids:
            field_name = f"field {id_field!r}: " if id_field else ""
            message = f"{field_name}duplicate id {record.id!r} (first at row {seen_ids[record.id]})"
            rows_by_error.setdefault(message, []).append(number)
            continue
        seen_ids[record.id] = number
        records.append(record)
    errors = [f"{_rows_named(numbers)}: {message}" for message, numbers in rows_by_error.items()]
    if not rows:
        errors.append(empty)
    if errors:
        count = sum(map(len, rows_by_error.values())) or 1
        raise DataError(f"{origin}: {count} problem(s){heading}:\n  {listed(errors)}")
    return records


def _rows_named(numbers: list[int]) -> str:
    """"row 4", or for one error on many rows (a wrong problem_key fails them all) "rows 1-30 (30 rows)"."""
    if len(numbers) == 1:
        return f"row {numbers[0]}"
    span = f"{numbers[0]}-{numbers[-1]}" if numbers[-1] - numbers[0] + 1 == len(numbers) else \
        ", ".join(map(str, numbers[:5])) + (", ..." if len(numbers) > 5 else "")
    return f"rows {span} ({len(numbers)} rows)"


def _normalize_row(row: dict[str, Any], number: int, cfg: DatasetConfig) -> tuple[list[str], Problem | None]:
    errors: list[str] = []
    text = problem_text(row, cfg.problem_key, errors)
    answer = _answer(row, cfg, errors)
    problem_id = row_id(row, number, cfg, errors)
    if errors or text is None or answer is None or problem_id is None:
        return errors, None
    meta = scalar_meta(row, {cfg.problem_key, cfg.answer_key, cfg.id_key})
    return errors, Problem(problem_id, text, answer, {**worked_solution(row.get(cfg.answer_key)), **meta})


def worked_solution(answer_field: Any) -> dict[str, str]:
    """{"solution": the text before the last ####} for a GSM8K-style answer field, else {} (the grading
    critic's reference solution; a row's own `solution` field wins over it)."""
    if not isinstance(answer_field, str) or GSM8K_MARK not in answer_field:
        return {}
    worked = answer_field.rsplit(GSM8K_MARK, 1)[0].strip()
    return {"solution": worked} if worked else {}


def problem_text(row: dict[str, Any], key: str, errors: list[str]) -> str | None:
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


def row_id(row: dict[str, Any], number: int, cfg: DatasetConfig, errors: list[str]) -> str | None:
    value = f"{cfg.name}-{number:02d}" if cfg.id_key is None else row.get(cfg.id_key)
    problem_id = str(value) if isinstance(value, str | int) and not isinstance(value, bool) else None
    reason = id_problem(problem_id if problem_id is not None else value)
    if reason is not None:
        errors.append(f"field {_id_field(cfg)!r}: {reason}")
        return None
    return problem_id


def id_problem(value: Any) -> str | None:
    """Why `value` is not an id (None when it is one): text of 1-MAX_ID_CHARS letters, digits, '.', '_', '-',
    starting with a letter or digit.

    >>> id_problem("aime-2025-I.3"), id_problem("../../escaped")
    (None, "id '../../escaped' is not of letters, digits, '.', '_', '-' (starting with a letter or digit)")
    """
    if value is None:
        return "missing (expected a text or integer id)"
    if not isinstance(value, str):
        return f"expected a text or integer id, got {value!r:.80}"
    if not value:
        return "id '' is empty"
    if len(value) > MAX_ID_CHARS:
        return f"id of {len(value)} characters is longer than {MAX_ID_CHARS}: {value[:40]!r}..."
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > MAX_ID_CHARS:
        return f"id of {size} UTF-8 bytes is longer than {MAX_ID_CHARS}: {value[:40]!r}..."
    if not ID_PATTERN.fullmatch(value):
        return f"id {value!r} is not of letters, digits, '.', '_', '-' (starting with a letter or digit)"
    return None


def _id_field(cfg: DatasetConfig) -> str:
    return cfg.id_key or "id"


def scalar_meta(row: dict[str, Any], used: set[str | None]) -> dict[str, Any]:
    """The row's scalar fields other than `used`: {"year": 2025, "level": 3, ...}."""
    return {k: v for k, v in row.items() if k not in used and (isinstance(v, str | int | float | bool) or v is None)}


def load_problems(path: str | Path) -> list[Problem]:
    """Read a normalized problems file (the normalize stage's output)."""
    return read_normalized(path, _problem_record, file="problems file", record="problem")


def _problem_record(record: dict[str, Any]) -> Problem:
    return Problem(record["id"], record["problem"], _stored_answer(record["answer"]), record.get("meta", {}))


def read_normalized(path: str | Path, parse: Callable[[dict[str, Any]], LoadedT], *, file: str,
                    record: str) -> list[LoadedT]:
    """Every line of a normalized file through `parse`; errors name the file and line. `parse` raises KeyError,
    TypeError or ValueError for a malformed record, and DataError with its own message. The file may have been
    edited by hand since normalize wrote it, so every id is checked again by normalize's rule (id_problem)."""
    path = Path(path)
    if not path.is_file():
        stage = f"normalize@{path.stem}" if path.parent.name == "data" else "normalize"  # data/<dataset>.jsonl
        raise DataError(f"{path}: {file} not found (run `dvc repro {stage}`)")
    records = []
    first_line: dict[str, int] = {}
    for number, line in enumerate(path.read_bytes().splitlines(), start=1):
        try:
            raw = orjson.loads(line)
            record_id = _checked_id(raw, first_line)
            records.append(parse(raw))
        except DataError as exc:
            raise DataError(f"{path}: line {number}: {exc}") from exc
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise DataError(f"{path}: line {number}: not a normalized {record} record ({exc!r})") from exc
        first_line[record_id] = number
    return records


def _checked_id(raw: Any, first_line: dict[str, int]) -> str:
    if not isinstance(raw, dict):
        raise TypeError(f"expected a JSON object, got {type(raw).__name__}")
    reason = id_problem(raw.get("id"))
    if reason is not None:
        raise DataError(f"field 'id': {reason}")
    if raw["id"] in first_line:
        raise DataError(f"field 'id': duplicate id {raw['id']!r} (first at line {first_line[raw['id']]})")
    return str(raw["id"])


def _stored_answer(value: Any) -> int | str:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(f"answer {value!r} is neither an integer nor text")
    return value
