from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tracevote.core.config_datasets import DatasetConfig, SourceConfig
from tracevote.core.errors import DataError
from tracevote.datasets.normalize import normalize_dataset
from tracevote.datasets.steps import normalize_step_rows

LOCAL_SOURCE = SourceConfig(None, "default", "gsm8k", "", "x.json", "x.json")
PROCESSBENCH = DatasetConfig(name="processbench_gsm8k", source=LOCAL_SOURCE,
                             kind="steps", problem_key="problem", answer_key="label", id_key="id",
                             answer_format="integer")

GOOD = {"id": "g-0", "problem": "Find x.", "steps": ["x+1=2", "x=1"], "label": -1, "generator": "m"}


@pytest.mark.parametrize(
    ("bad", "expected"),
    [
        ({"problem": None}, "row 2: field 'problem': missing"),
        ({"problem": "a\fb"}, "row 2: field 'problem': contains control character U+000C"),
        ({"steps": []}, "row 2: field 'steps': expected a non-empty list of text"),
        ({"steps": "x=1"}, "row 2: field 'steps': expected a non-empty list of text"),
        ({"steps": ["ok", 3]}, "row 2: field 'steps': step 1 is not non-empty text: 3"),
        ({"label": "1"}, "row 2: field 'label': expected an integer, got '1'"),
        ({"label": True}, "row 2: field 'label': expected an integer, got True"),
        ({"label": 2}, "row 2: field 'label': 2 is outside -1..1 (2 steps)"),
        ({"label": -2}, "row 2: field 'label': -2 is outside -1..1 (2 steps)"),
        ({"id": ""}, "row 2: field 'id': id '' is empty"),
        ({"id": "g-0"}, "row 2: field 'id': duplicate id 'g-0' (first at row 1)"),
    ],
)
def test_bad_step_rows_name_row_and_field(bad: dict, expected: str) -> None:
    second = {**GOOD, "id": "g-1", **bad}
    with pytest.raises(DataError, match=r"steps\.json: 1 problem") as info:
        normalize_step_rows([GOOD, second], PROCESSBENCH, "steps.json")
    assert expected in str(info.value)


def test_good_rows_keep_scalar_meta() -> None:
    [record] = normalize_step_rows([GOOD], PROCESSBENCH, "steps.json")
    assert record.to_record() == {"id": "g-0", "problem": "Find x.", "steps": ["x+1=2", "x=1"], "label": -1,
                                  "task": "processbench_gsm8k", "meta": {"generator": "m"}}


def test_the_task_is_the_rows_own_else_the_param_else_the_hub_split_else_the_name() -> None:
    def task(row: dict, cfg: DatasetConfig = PROCESSBENCH) -> str:
        return normalize_step_rows([row], cfg, "steps.json")[0].task

    assert task({**GOOD, "task": "olympiadbench"}) == "olympiadbench"
    assert task(GOOD, dataclasses.replace(PROCESSBENCH, task="math")) == "math"
    hub_source = SourceConfig("Qwen/ProcessBench", "default", "gsm8k", "u", None, "stages/fetch.py")
    hub = dataclasses.replace(PROCESSBENCH, source=hub_source)
    assert task(GOOD, hub) == "gsm8k"
    assert task(GOOD) == "processbench_gsm8k"


def test_deltabench_rows_are_converted_then_checked_as_step_records() -> None:
    cfg = dataclasses.replace(PROCESSBENCH, name="deltabench", steps_format="deltabench", problem_key="question")
    rows = [{"id": "d1", "question": "Q?", "sections_content": "section1: a\n\n\nsection2: b",
             "reason_error_section_numbers": "[2]", "task_l1": "math", "origin": "x"}]
    [record] = normalize_dataset(rows, cfg, "deltabench.csv")
    assert record.to_record() == {"id": "d1", "problem": "Q?", "steps": ["a", "b"], "label": 1, "task": "math",
                                  "meta": {"origin": "x"}}
    with pytest.raises(DataError, match="row 1: field 'reason_error_section_numbers'"):
        normalize_dataset([{**rows[0], "reason_error_section_numbers": "[5]"}], cfg, "deltabench.csv")


def test_processbench_gsm8k_real_file_normalizes(shared_data: Path) -> None:
    path = shared_data / "processbench_gsm8k.json"
    if not path.is_file():
        pytest.skip(f"{path} is absent: the shared ProcessBench file is needed")
    rows = json.loads(path.read_text())
    records = normalize_step_rows(rows, PROCESSBENCH, str(path))
    assert len(records) == len(rows)
    assert {record.label == -1 for record in records} == {True, False}
