"""The grading branch through `dvc repro` in a real DVC project, with the simulated model: a pool graded as a run
beside a predictions file tracked by `dvc add` (critic on), the flat metrics and the runs table, what a changed
predictions file re-runs and re-pays, `dvc metrics diff` between commits, and the fresh-clone guard."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.dvcproject import copy_project, dvc, make_project, run
from tests.images import assert_not_blank
from tests.test_pipeline import changed_stages, small_sim_params
from tracevote.cli.demo import BUILTIN_GSM8K, BUILTIN_PREDICTIONS, local_dataset

pytestmark = pytest.mark.slow

RUN = "handwritten"
PREDICTIONS = Path("predictions") / "demo_gsm8k.jsonl"
GRADING_BRANCH = {"build_grading_critic", "grade", "report_grading"}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    params = small_sim_params()
    params["datasets"]["demo_gsm8k"] = local_dataset(BUILTIN_GSM8K, problem_key="question", answer_format="integer")
    params["grading"] = {"runs": {"pool_toy": {"dataset": "toy", "predictions": "pools/toy.json"},
                                  RUN: {"dataset": "demo_gsm8k", "predictions": str(PREDICTIONS)}},
                         "critic": {"enabled": True}}
    project = make_project(tmp_path_factory.mktemp("grading") / "project", params)
    (project / "predictions").mkdir()
    shutil.copy(BUILTIN_PREDICTIONS, project / PREDICTIONS)
    dvc(project, "add", str(PREDICTIONS))
    result = dvc(project, "repro", "report_grading")
    for stage in (f"build_grading_critic@{RUN}", f"grade@{RUN}", "grade@pool_toy", "report_grading"):
        assert f"Running stage '{stage}'" in result.stdout, stage
    run(project, "git", "add", "-A")
    run(project, "git", "commit", "-qm", "first grading")
    return project


def metrics(project: Path) -> dict:
    return json.loads((project / "metrics" / "grading.json").read_text())


def test_runs_side_by_side_in_flat_metrics_a_table_and_a_plot(built: Path) -> None:
    values = metrics(built)
    assert values["simulated"] is True
    assert values[f"{RUN}.demo_gsm8k.accuracy_pct"] == 50.0  # 4 of the 8 hand-written predictions are right
    words = [len(json.loads(line)["thinking"].split()) for line in BUILTIN_PREDICTIONS.read_text().splitlines()]
    assert values[f"{RUN}.demo_gsm8k.avg_word_count"] == round(sum(words) / len(words), 4)  # 151 / 7, as rounded
    assert 1.0 <= values[f"{RUN}.demo_gsm8k.critic"] <= 5.0
    # the critic asked about the 7 predicted items (each has a reference); what gave no score is counted apart
    assert values[f"{RUN}.demo_gsm8k.critic_scored"] + values[f"{RUN}.demo_gsm8k.critic_unparsable"] == 7
    assert (values["pool_toy.toy.critic_scored"], values["pool_toy.toy.critic_unparsable"]) == (0, 0)
    assert 0.0 < values["pool_toy.toy.accuracy_pct"] < 100.0 and values["pool_toy.toy.critic"] is None  # no solutions
    table = (built / "metrics" / "grading.md").read_text()
    assert "| dataset | metric | pool_toy | handwritten |" in table and "SIMULATED" in table
    assert "| demo_gsm8k | accuracy (%) | - | 50.00 |" in table
    assert (built / "metrics" / "grading.csv").read_text().startswith("dataset,metric,pool_toy,handwritten\n")
    assert_not_blank(built / "plots" / "grading" / "word_counts.png")
    details = [json.loads(line) for line in (built / "grading" / "runs" / f"{RUN}.jsonl").read_text().splitlines()]
    assert len(details) == 7 and sum(d["correct"] for d in details) == 4


@pytest.fixture
def own_copy(built: Path, tmp_path: Path) -> Path:
    """`built` copied, for a test that changes or deletes part of it."""
    return copy_project(built, tmp_path / "project")


def test_a_changed_predictions_file_regrades_only_its_run_and_asks_the_critic_only_about_what_changed(
        own_copy: Path) -> None:
    unbuilt = changed_stages(own_copy)  # only what the grading branch needs was built
    assert not unbuilt & GRADING_BRANCH
    lines = (own_copy / PREDICTIONS).read_text().splitlines()
    fixed = json.loads(lines[2])
    fixed.update(thinking="Five boxes of 24 is 120 crayons; she gives away 45 and keeps 75.", content="#### 75")
    (own_copy / PREDICTIONS).write_text("\n".join([*lines[:2], json.dumps(fixed), *lines[3:]]) + "\n")
    dvc(own_copy, "add", str(PREDICTIONS))
    assert changed_stages(own_copy) - unbuilt == {"build_grading_critic", "grade"}  # report_grading follows them
    result = dvc(own_copy, "repro", "report_grading")
    assert "1 of 7 critic replies missing" in result.stdout
    assert "Running stage 'grade@pool_toy'" not in result.stdout
    assert metrics(own_copy)[f"{RUN}.demo_gsm8k.accuracy_pct"] == 62.5
    run(own_copy, "git", "add", "-A")
    run(own_copy, "git", "commit", "-qm", "fixed one prediction")
    diff = json.loads(dvc(own_copy, "metrics", "diff", "HEAD~1", "--json").stdout)
    change = diff[f"metrics/headline/grading/{RUN}.json"]["accuracy_pct"]
    assert (change["old"], change["new"]) == (50.0, 62.5)


def test_a_fresh_clone_refuses_to_pay_for_critic_replies_dvc_lock_records(own_copy: Path) -> None:
    stage = f"build_grading_critic@{RUN}"
    folder = own_copy / "grading" / "critic" / RUN
    shutil.rmtree(folder)
    refused = dvc(own_copy, "repro", stage, check=False)
    output = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "dvc pull" in output and stage in output
    assert not folder.exists() or not any(folder.rglob("*.tvf")), "the refusal left critic replies behind"
    dvc(own_copy, "checkout", f"grading/critic/{RUN}")
