"""Prediction files: JSON lines ``{"id", "dataset", "thinking", "content"}`` made by any model, anywhere.

`thinking` is the free-form reasoning, `content` the final part (usually ``#### <answer>``); a missing or null
one reads as "". Extra fields are ignored. A line that is not a JSON object, lacks an id, or repeats an id
is an error naming the file and line(s).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracevote.core.errors import DataError, listed
from tracevote.core.fileio import parse_json_object


@dataclass(frozen=True)
class Prediction:
    id: str
    dataset: str | None
    thinking: str
    content: str
    line: int  # in its file, from 1 (a pool's trace: its sample id)


def read_predictions(path: Path) -> list[Prediction]:
    """Every prediction of a file, or one DataError listing each bad line (blank lines are skipped)."""
    if not path.is_file():
        raise DataError(f"{path}: predictions file not found")
    predictions: list[Prediction] = []
    errors: list[str] = []
    first_line: dict[str, int] = {}
    for number, line in enumerate(path.read_bytes().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            prediction = _prediction(parse_json_object(line, f"line {number}"), number)
        except DataError as exc:
            errors.append(str(exc))
            continue
        if prediction.id in first_line:
            errors.append(f"line {number}: duplicate id {prediction.id!r} (first at line {first_line[prediction.id]})")
            continue
        first_line[prediction.id] = number
        predictions.append(prediction)
    if errors:
        raise DataError(f"{path}: {len(errors)} bad line(s), nothing graded:\n  {listed(errors)}")
    if not predictions:
        raise DataError(f"{path}: no predictions, nothing graded (expected one JSON object per line: "
                        f'{{"id", "dataset", "thinking", "content"}})')
    return predictions


def _prediction(record: dict[str, Any], number: int) -> Prediction:
    raw_id = record.get("id")
    if isinstance(raw_id, bool) or not isinstance(raw_id, str | int) or raw_id == "":
        raise DataError(f"line {number}: field 'id': expected a text or integer id, got {raw_id!r}")
    dataset = record.get("dataset")
    if dataset is not None and not isinstance(dataset, str):
        raise DataError(f"line {number}: field 'dataset': expected text, got {dataset!r}")
    return Prediction(str(raw_id), dataset, _text(record, "thinking", number), _text(record, "content", number),
                      number)


def _text(record: dict[str, Any], field: str, number: int) -> str:
    value = record.get(field)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DataError(f"line {number}: field {field!r}: expected text, got {type(value).__name__}")
    return value


def of_dataset(predictions: Sequence[Prediction], names: Sequence[str], origin: str) -> list[Prediction]:
    """The predictions a dataset grades. A file of one dataset (every `dataset` field the same, or absent) is
    graded whole, whatever it calls the dataset ("aime" for aime_2024); from a file mixing datasets, those
    naming one of `names` (or none). A mixed file with none of `names` is an error."""
    found = sorted({p.dataset for p in predictions if p.dataset is not None})
    if len(found) <= 1:
        return list(predictions)
    kept = [p for p in predictions if p.dataset is None or p.dataset in names]
    if not kept:
        raise DataError(f"{origin}: the file mixes datasets ({', '.join(map(repr, found))}) and none of its "
                        f"predictions is for {' or '.join(map(repr, names))}")
    return kept
