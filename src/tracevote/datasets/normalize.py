"""The normalize stage's one entry: rows of any dataset kind -> checked records, by the dataset's params."""

from __future__ import annotations

from typing import Any

from tracevote.core.config import DatasetConfig
from tracevote.datasets.problems import Problem, normalize_rows
from tracevote.datasets.steps import StepRecord, normalize_step_rows


def normalize_dataset(rows: list[dict[str, Any]], cfg: DatasetConfig, origin: str) -> list[Problem] | list[StepRecord]:
    """Problems for kind `problems`, step-labelled records for kind `steps`; or one DataError naming every
    bad row of `origin`."""
    if cfg.kind == "steps":
        return normalize_step_rows(rows, cfg, origin)
    return normalize_rows(rows, cfg, origin)
