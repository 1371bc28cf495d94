"""The debate branch through `dvc repro` in a real DVC project on the loopback simulated server: its outputs,
what a debate param change re-runs, a rebuild with the server stopped (no call, same metrics), and the
fresh-clone guard."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.debate.test_build import sim_answers
from tests.dvcproject import copy_project, dvc, make_project, run, update_params
from tests.images import assert_not_blank
from tests.sim_servers import requests_by_key
from tests.test_pipeline import changed_stages, small_sim_params
from tracevote.core.config_endpoints import SimConfig
from tracevote.core.stage_params import every_stage_params
from tracevote.sim.faults import parse_faults
from tracevote.sim.model import SimModel
from tracevote.sim.server import running_server

pytestmark = pytest.mark.slow

DEBATE_BRANCH = {"build_debate", "score_debate", "compare", "view"}  # view: the explorer shows the debates
BUILT = ("compare", "view")  # the debate branch and what it needs; the report, critique and grading branches unbuilt


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict, dict]]:
    """A project whose debate branch (and what it needs) was built against a sim server that is stopped once the
    build is done; its first metrics and the server's request counts by call key."""
    with running_server(SimModel(SimConfig(0, 1.0, 0.45, 150), sim_answers()), parse_faults("")) as base_url:
        params = small_sim_params(backend="openai", base_url=base_url)
        params["debate"] = {**params["debate"], "max_tokens": 400, "concurrency": 4}
        project = make_project(tmp_path_factory.mktemp("debate") / "project", params)
        result = dvc(project, "repro", *BUILT)
        requests = requests_by_key(base_url)
    for stage in ("build_debate@toy", "score_debate", "compare", "build_pool@toy"):
        assert f"Running stage '{stage}'" in result.stdout, stage
    run(project, "git", "add", "-A")
    run(project, "git", "commit", "-qm", "first run")
    yield project, json.loads((project / "metrics" / "debate.json").read_text()), requests


def test_the_branch_writes_flat_metrics_details_and_the_comparison(built: tuple[Path, dict, dict]) -> None:
    project, metrics, requests = built
    assert metrics["simulated"] is True and metrics["problems"] == 12
    assert all(isinstance(value, int | float | bool) for value in metrics.values()), "dvc metrics needs flat values"
    debate_calls = {key: count for key, count in requests.items() if "/r" in key or key.endswith("/rank")}
    assert debate_calls and set(debate_calls.values()) == {1}, "a debate call was requested twice"
    details = json.loads((project / "metrics" / "debate_results.json").read_text())
    assert details["simulated"] is True and {p["stop"] for p in details["problems"]} <= {
        "round0", "round1", "ranking", "round2"}
    assert (project / "metrics" / "debate.md").read_text().count("\n| toy | toy-") == 12
    table = (project / "metrics" / "compare" / "compare.md").read_text()
    assert "SIMULATED" in table and "Debate (DyLAN, 4 agents" in table and "Cons@16" in table
    assert_not_blank(project / "plots" / "accuracy_vs_tokens.png")
    shown = dvc(project, "metrics", "show", "--json").stdout
    assert "metrics/headline/debate.json" in shown


def test_a_debate_param_change_flags_only_the_debate_branch(built: tuple[Path, dict, dict]) -> None:
    project = built[0]
    original = (project / "params.yaml").read_text()
    declared = every_stage_params(project)  # every stage's params keys, by its address
    unbuilt = set(declared) - set(yaml.safe_load((project / "dvc.lock").read_text())["stages"])
    assert unbuilt and not {stage.split("@")[0] for stage in unbuilt} & DEBATE_BRANCH
    # no stage left unbuilt reads the key, so the change could flag none of them either
    assert "debate.temperature" in declared["build_debate@toy"]
    assert [stage for stage in unbuilt if {"debate", "debate.temperature"} & set(declared[stage])] == []
    try:
        update_params(project, {"debate": {"temperature": 0.5}})
        changed = changed_stages(project) - {stage.split("@")[0] for stage in unbuilt}
        assert "build_debate" in changed and changed <= DEBATE_BRANCH
    finally:
        (project / "params.yaml").write_text(original)


def test_a_rebuild_with_the_server_stopped_sends_nothing_and_scores_the_same(
        built: tuple[Path, dict, dict]) -> None:
    project, metrics, _ = built
    result = dvc(project, "repro", "-f", "build_debate@toy", "score_debate")
    assert "no request sent" in result.stdout
    assert json.loads((project / "metrics" / "debate.json").read_text()) == metrics
    assert dvc(project, "metrics", "diff", "--json").stdout.strip() in ("", "{}")


def test_a_fresh_clone_refuses_to_pay_for_debates_dvc_lock_records(built: tuple[Path, dict, dict],
                                                                   tmp_path: Path) -> None:
    project = copy_project(built[0], tmp_path / "project")  # the others need the debates this deletes
    shutil.rmtree(project / "debates" / "toy")
    refused = dvc(project, "repro", "build_debate@toy", check=False)
    assert refused.returncode != 0
    assert "dvc pull" in refused.stderr + refused.stdout and "build_debate@toy" in refused.stderr + refused.stdout
    assert not (project / "debates" / "toy").exists() or not any((project / "debates" / "toy").iterdir())
    dvc(project, "checkout", "debates/toy")  # the local cache still has it: back to the committed state
