"""The normalize stage's one entry: rows of any dataset kind -> checked records, by the dataset's params."""

from __future__ import annotations

import dataclasses
from typing import Any

from tracevote.core.config_datasets import DatasetConfig
from tracevote.datasets.deltabench import convert_rows
from tracevote.datasets.problems import Problem, normalize_rows
from tracevote.datasets.steps import StepRecord, normalize_step_rows


def normalize_dataset(rows: list[dict[str, Any]], cfg: DatasetConfig, origin: str) -> list[Problem] | list[StepRecord]:
    """Problems for kind `problems`, step-labelled records for kind `steps`; or one DataError naming every
    bad row of `origin`."""
    if cfg.kind == "steps" and cfg.steps_format == "deltabench":
        converted = [{**r["meta"], **{k: v for k, v in r.items() if k != "meta"}} for r in convert_rows(rows, origin)]
        as_processbench = dataclasses.replace(cfg, problem_key="problem", answer_key="label", id_key="id")
        return normalize_step_rows(converted, as_processbench, origin)
    if cfg.kind == "steps":
        return normalize_step_rows(rows, cfg, origin)
    return normalize_rows(rows, cfg, origin)
