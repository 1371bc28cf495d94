"""`dvc exp run` on the pipeline: an experiment beside its baseline (a file of its own, so that the suite's
workers share the pipeline tests' time)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.dvcproject import dvc, run
from tests.test_pipeline import built_pipeline, ran_stages

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built_pipeline(tmp_path_factory)


def test_exp_run_with_a_confidence_setting_and_exp_show(built: Path) -> None:
    run(built, "git", "checkout", "--", "params.yaml")
    dvc(built, "repro")
    run(built, "git", "add", "-A")
    run(built, "git", "commit", "-qm", "baseline", check=False)  # nothing to commit when run alone
    result = dvc(built, "exp", "run", "-S", "confidence.group_size=8")
    assert ran_stages(result.stdout) == {"score", "aggregate", "report", "compare"}
    shown = json.dumps(json.loads(dvc(built, "exp", "show", "--json").stdout))
    assert '"group_size": 8' in shown and '"group_size": 32' in shown  # the experiment beside the baseline
    assert '"bottom10_top10"' in shown  # with its metrics
