"""The critique branch through `dvc repro` in a real DVC project on the loopback simulated server: its outputs,
what a critique param change re-runs, a rebuild with the server stopped (no call, same metrics), and the
fresh-clone guard."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.critique.test_build import labels_of
from tests.dvcproject import copy_project, dvc, make_project, run, update_params
from tests.dvcstatus import modified_params
from tests.images import assert_not_blank
from tests.sim_servers import requests_by_key
from tests.test_pipeline import small_sim_params
from tracevote.cli.demo import BUILTIN_STEPS
from tracevote.core.config_endpoints import SimConfig
from tracevote.core.stage_params import every_stage_params
from tracevote.sim.faults import parse_faults
from tracevote.sim.model import SimModel
from tracevote.sim.server import running_server

pytestmark = pytest.mark.slow

CRITIQUE_BRANCH = {"build_critiques", "score_critiques", "report_critiques"}
BUILD = "build_critiques@toy_steps"
# three critique keys build_critiques declares, each changed from the fixture's value
CHANGES = {"temperature": 0.5, "n_votes": 4, "template": "{problem}\n{tagged_response}\nBox the index."}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict, dict]]:
    """A project whose critique branch was built against a sim server, stopped once the build is done; its
    first metrics and the server's request counts by call key."""
    sim = SimModel(SimConfig(0, 1.0, 0.45, 150), first_errors=labels_of(BUILTIN_STEPS))
    with running_server(sim, parse_faults("")) as base_url:
        project = make_project(tmp_path_factory.mktemp("critique") / "project",
                               small_sim_params(backend="openai", base_url=base_url))
        result = dvc(project, "repro", "report_critiques")
        requests = requests_by_key(base_url)
    for stage in (BUILD, "score_critiques", "report_critiques"):
        assert f"Running stage '{stage}'" in result.stdout, stage
    assert "Running stage 'build_pool@" not in result.stdout
    run(project, "git", "add", "-A")
    run(project, "git", "commit", "-qm", "first run")
    yield project, json.loads((project / "metrics" / "critique.json").read_text()), requests


def test_the_branch_writes_flat_metrics_results_by_task_table_and_plot(built: tuple[Path, dict, dict]) -> None:
    project, metrics, requests = built
    assert metrics["simulated"] is True and metrics["solutions"] == 12 and metrics["calls"] == 12 * 8
    assert all(value is None or isinstance(value, int | float | bool) for value in metrics.values())
    assert len(requests) == 12 * 8 and set(requests.values()) == {1}, "a critique was requested twice"
    lines = (project / "metrics" / "critique_results.jsonl").read_text().splitlines()
    assert len(lines) == 12 and all(json.loads(line)["simulated"] is True for line in lines)
    assert (project / "metrics" / "critique_by_task.csv").read_text().startswith(
        "dataset,task,n_error,n_correct,error_accuracy_pct,correct_accuracy_pct,f1_pct,unanimous_pct,unparsable_pct\n")
    assert "SIMULATED" in (project / "metrics" / "critique.md").read_text()
    assert_not_blank(project / "plots" / "critique" / "critique.png")
    assert "metrics/headline/critique/toy_steps.json" in dvc(project, "metrics", "show", "--json").stdout


def test_a_critique_param_change_flags_only_the_critique_branch(built: tuple[Path, dict, dict]) -> None:
    project = built[0]
    original = (project / "params.yaml").read_text()
    unbuilt = set(every_stage_params(project)) - set(yaml.safe_load((project / "dvc.lock").read_text())["stages"])
    assert unbuilt and not {stage.split("@")[0] for stage in unbuilt} & CRITIQUE_BRANCH  # only it was built
    try:
        # the changes at once, in one `dvc status`: a stage is flagged when any key it declares changed, so each
        # change alone flags a subset of what they flag together, and build_critiques names each key as modified
        update_params(project, {"critique": CHANGES})
        status = json.loads(dvc(project, "status", "--json").stdout or "{}")
        changed = {stage.split("@")[0] for stage in set(status) - unbuilt} - {"check_params"}
        assert "build_critiques" in changed and changed <= CRITIQUE_BRANCH, changed
        assert modified_params(status[BUILD]) == {f"critique.{key}" for key in CHANGES}, status[BUILD]
    finally:
        (project / "params.yaml").write_text(original)


def test_a_rebuild_with_the_server_stopped_sends_nothing_and_scores_the_same(
        built: tuple[Path, dict, dict]) -> None:
    project, metrics, _ = built
    result = dvc(project, "repro", "-f", BUILD, "score_critiques")
    assert "no request sent" in result.stdout
    assert json.loads((project / "metrics" / "critique.json").read_text()) == metrics


def test_a_fresh_clone_refuses_to_pay_for_critiques_dvc_lock_records(built: tuple[Path, dict, dict],
                                                                     tmp_path: Path) -> None:
    project = copy_project(built[0], tmp_path / "project")  # the others need the critiques this deletes
    shutil.rmtree(project / "critiques" / "toy_steps")
    refused = dvc(project, "repro", BUILD, check=False)
    assert refused.returncode != 0
    assert "dvc pull" in refused.stderr + refused.stdout and BUILD in refused.stderr + refused.stdout
    folder = project / "critiques" / "toy_steps"
    assert not folder.exists() or not any(folder.iterdir()), "the refusal left critiques behind"
    dvc(project, "checkout", "critiques/toy_steps")  # the local cache still has it: back to the committed state
