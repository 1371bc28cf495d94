"""Step-labelled records (ProcessBench): a problem, its solution steps, and the first wrong step.

`label` is the index of the first erroneous step, or -1 when every step is right. The row's fields are
named by the dataset's params: problem_key, `steps`, answer_key (the label) and id_key. `task` groups the
scores (ProcessBench's subsets gsm8k, math, ...; DeltaBench's task_l1): the row's own `task` field when it
has one, else the dataset's `task` param, else the hub split it came from, else the dataset's name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracevote.core.config_datasets import DatasetConfig
from tracevote.core.errors import DataError
from tracevote.datasets.problems import check_rows, problem_text, read_normalized, row_id, scalar_meta

STEPS_KEY = "steps"
TASK_KEY = "task"


@dataclass(frozen=True)
class StepRecord:
    id: str
    problem: str
    steps: tuple[str, ...]
    label: int
    task: str
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def to_record(self) -> dict[str, Any]:
        return {"id": self.id, "problem": self.problem, "steps": list(self.steps), "label": self.label,
                "task": self.task, "meta": self.meta}


def normalize_step_rows(rows: list[dict[str, Any]], cfg: DatasetConfig, origin: str) -> list[StepRecord]:
    """Check every row and return the records, or raise one DataError listing every bad row (numbered from 1)."""
    return check_rows(rows, cfg, origin, _step_row)


def _step_row(row: dict[str, Any], number: int, cfg: DatasetConfig) -> tuple[list[str], StepRecord | None]:
    errors: list[str] = []
    text = problem_text(row, cfg.problem_key, errors)
    steps = _steps(row.get(STEPS_KEY), errors)
    label = _label(row.get(cfg.answer_key), cfg.answer_key, steps, errors)
    record_id = row_id(row, number, cfg, errors)
    if errors or text is None or steps is None or label is None or record_id is None:
        return errors, None
    meta = scalar_meta(row, {cfg.problem_key, STEPS_KEY, cfg.answer_key, cfg.id_key, TASK_KEY})
    return errors, StepRecord(record_id, text, steps, label, _task(row, cfg), meta)


def _task(row: dict[str, Any], cfg: DatasetConfig) -> str:
    own = row.get(TASK_KEY)
    if isinstance(own, str) and own.strip():
        return own.strip()
    return cfg.task or (cfg.source.hf_split if cfg.source.hf_dataset else cfg.name)


def _steps(value: Any, errors: list[str]) -> tuple[str, ...] | None:
    if hasattr(value, "tolist") and callable(value.tolist):  # a Parquet list column arrives as an array
        value = value.tolist()
    if not isinstance(value, list) or not value:
        errors.append(f"field 'steps': expected a non-empty list of text, got {value!r:.80}")
        return None
    bad = [i for i, step in enumerate(value) if not isinstance(step, str) or not step.strip()]
    if bad:
        errors.append(f"field 'steps': step {bad[0]} is not non-empty text: {value[bad[0]]!r:.80}")
        return None
    return tuple(value)


def _label(value: Any, key: str, steps: tuple[str, ...] | None, errors: list[str]) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        errors.append(f"field {key!r}: expected an integer, got {value!r:.80}")
        return None
    if steps is not None and not -1 <= value < len(steps):
        errors.append(f"field {key!r}: {value} is outside -1..{len(steps) - 1} ({len(steps)} steps)")
        return None
    return value


def load_step_records(path: str | Path) -> list[StepRecord]:
    """Read a normalized step-labelled file (the normalize stage's output for a dataset of kind steps)."""
    return read_normalized(path, _step_record, file="step-labelled file", record="step")


def _step_record(raw: dict[str, Any]) -> StepRecord:
    for key in ("id", "problem", "task"):
        if not isinstance(raw[key], str):
            raise DataError(f"field {key!r}: expected text, got {raw[key]!r:.80}")
    steps, meta = raw["steps"], raw.get("meta", {})
    if not isinstance(steps, list) or not steps or not all(isinstance(step, str) for step in steps):
        raise DataError(f"field 'steps': expected a non-empty list of text, got {steps!r:.80}")
    if not isinstance(meta, dict):
        raise DataError(f"field 'meta': expected an object, got {meta!r:.80}")
    record = StepRecord(raw["id"], raw["problem"], tuple(steps), raw["label"], raw["task"], meta)
    if isinstance(record.label, bool) or not isinstance(record.label, int) or not -1 <= record.label < len(steps):
        raise DataError(f"field 'label': {record.label!r} does not index its {len(steps)} steps (or -1)")
    return record
