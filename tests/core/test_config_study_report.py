"""The study: section (the study report, stage study@<dataset>): its datasets are DeepConf's, its K eval's, its
reference one of the models compared, its debate watch in step with `debate`, and it compares at least two models.
Each bad value is one line naming the key and the value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import FIXTURE_PARAMS
from tracevote.cli.demo import deep_merge
from tracevote.core.config import load_params
from tracevote.core.errors import ConfigError

CHEAP = {"profile": "deepseek", "base_url": "http://127.0.0.1:8000", "name": "cheap-model", "extra_body": {},
         "api_key_env": "DEEPSEEK_API_KEY", "needs_key": False, "sim": {"accuracy": 0.3},
         "pricing": {"checked": "2026-07", "input_cache_miss": 0.05, "input_cache_hit": 0.01, "output": 0.1}}
STUDY = {"endpoints": {"cheap": CHEAP}, "deepconf": {"endpoints": ["cheap"]},
         "study": {"datasets": ["aime_2025"], "k": [4], "reference": "cheap"}}


def params_with(tmp_path: Path, overrides: dict[str, Any]) -> Path:
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(deep_merge(yaml.safe_load(FIXTURE_PARAMS.read_text()), overrides)))
    return path


def test_a_study_of_two_models_reads_back(tmp_path: Path) -> None:
    params = load_params(params_with(tmp_path, STUDY))
    assert params.study_models() == ("deepseek", "cheap")
    assert (params.study.datasets, params.study.k, params.study.reference) == (("aime_2025",), (4,), "cheap")


@pytest.mark.parametrize(("change", "line"), [
    ({"study": {"datasets": ["gsm8k"]}},
     "study.datasets: 'gsm8k' must be one of deepconf.datasets ['aime_2025']"),
    ({"study": {"k": [3]}}, "study.k: 3 must be one of eval.k"),
    ({"study": {"reference": "gpt-4-1"}},
     "study.reference: 'gpt-4-1' must be one of the models the study compares (deepseek, cheap), or null"),
    ({"study": {"debate": True}},
     "study.debate_watch: 'stages/study.py' must be 'metrics/debate_results.json' (debate: true)"),
    ({"deepconf": {"endpoints": []}, "endpoints": {"cheap": {"sim": None}}, "study": {"reference": None}},
     "deepconf.endpoints: [] must be at least one model beside deepconf.endpoint when study.datasets names any"),
])
def test_a_bad_study_is_one_line_naming_the_key_and_value(tmp_path: Path, change: dict, line: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_params(params_with(tmp_path, deep_merge(STUDY, change)))
    assert line in str(refused.value)
    assert len(str(refused.value).splitlines()) == 1
