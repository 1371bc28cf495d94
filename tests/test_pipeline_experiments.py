"""`dvc exp run` on the pipeline: an experiment beside its baseline, on the DeepConf branch alone (a file and
a project of its own, so that the suite's workers share the pipeline tests' time)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.dvcproject import dvc, make_project, run
from tests.test_pipeline import ran_stages, small_sim_params

pytestmark = pytest.mark.slow
DEEPCONF = "report@toy"  # with what it needs: fetch, normalize, build_pool, score, aggregate


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A committed project in which `dvc repro report@toy` ran the DeepConf branch once."""
    project = make_project(tmp_path_factory.mktemp("experiments") / "project", small_sim_params())
    result = dvc(project, "repro", DEEPCONF)
    assert ran_stages(result.stdout) == {"fetch", "normalize", "build_pool", "score", "aggregate", "report"}
    run(project, "git", "add", "-A")
    run(project, "git", "commit", "-qm", "baseline")
    return project


def test_exp_run_with_a_confidence_setting_and_exp_show(built: Path) -> None:
    result = dvc(built, "exp", "run", "-S", "confidence.group_size=8", DEEPCONF)
    assert ran_stages(result.stdout) == {"score", "aggregate", "report"}
    shown = json.dumps(json.loads(dvc(built, "exp", "show", "--json").stdout))
    assert '"group_size": 8' in shown and '"group_size": 32' in shown  # the experiment beside the baseline
    assert '"bottom10_top10"' in shown  # with its metrics
