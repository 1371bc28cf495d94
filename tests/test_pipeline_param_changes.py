"""What each param change re-runs in the whole pipeline as a real DVC project (one by `dvc exp run` with no
target), and that switching back costs nothing. Each group of changes runs on its own copy of one built project, so
the groups are independent of each other and of their order; a file of its own, so `make test` (--dist loadfile) can
run it beside tests/test_pipeline.py on the other worker."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.dvcproject import copy_project, dvc, model_overrides, run, update_params
from tests.test_pipeline import pipeline_template, ran_stages

pytestmark = pytest.mark.slow

GRADING = ("build_grading_critic", "grade", "report_grading")
Step = tuple[dict[str, Any], set[str]]  # (params change, stages `dvc repro` must run)

# compare reads the voting results beside the debate's, and view (the explorer) the scores and aggregates: they follow
# every change to them
CONFIDENCE_STAGES = {"score", "aggregate", "report", "compare", "view"}
EVAL_AND_REPORT: list[Step] = [
    ({"eval": {"repeat": 4}}, {"aggregate", "report", "compare", "view"}),
    ({"report": {"k": 8}}, {"report", "compare", "view"}),
]
# keys no stage declares re-run nothing but check_params (the pool's, the critique's and the servers, in one step)
UNDECLARED: list[Step] = [
    ({"pool": {"concurrency": 2, "max_cost_usd": 1.0, "request_timeout_s": 30},
      "critique": {"concurrency": 2, "max_cost_usd": 1.0},
      **model_overrides(base_url=["http://gpu1:8000/v1", "http://gpu2:8000/v1"], needs_key=True, profile=None,
                        api_key_env="VLLM_API_KEY")},
     set()),
]
# the pool is also graded (grading run pool_toy): its manifest changes, so its grading stages follow
POOL_SIZE: list[Step] = [
    ({"pool": {"n_pool": 20}}, {"build_pool", "score", "aggregate", "report", "compare", "view", *GRADING}),
]
# a new pool, whose traces the simulator draws as before: the same grades, so report_grading stands
TEMPERATURE: list[Step] = [
    ({"decoding": {"temperature": 0.7}}, {"build_pool", "score", "aggregate", "report", "compare", "view",
                                          *GRADING[:2]}),
]
# view (the explorer) shows the critiques: it follows their ledgers and declares the keys they were built under
CRITIQUE: list[Step] = [
    ({"critique": {"n_votes": 3}}, {"build_critiques", "score_critiques", "report_critiques", "view"}),
    # a new ledger; the simulator answers every temperature above 0 alike, so the scores and the report stand
    ({"critique": {"temperature": 0.5}}, {"build_critiques", "score_critiques", "view"}),
]


@pytest.fixture
def own_copy(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Path:
    """The project tests/test_pipeline.py builds once per run, copied for a test that leaves it changed."""
    return copy_project(pipeline_template(tmp_path_factory), tmp_path / "project")


def repro_each(project: Path, steps: list[Step]) -> str:
    """Apply each change in turn; after each, `dvc repro` runs exactly its stages. Returns the last one's output."""
    output = ""
    for change, expected in steps:
        update_params(project, change)
        output = dvc(project, "repro").stdout
        # check_params reads the whole file: every valid change re-runs it (the undeclared keys' step: only it)
        assert "Running stage 'check_params'" in output, (change, output)
        assert ran_stages(output) == expected, (change, output)
    return output


def stage_output(output: str, stage: str) -> str:
    """What `stage` printed in a `dvc repro`'s output: from its "Running stage" line to the next stage's."""
    sections = output.split("Running stage '")
    found = [section for section in sections if section.startswith((f"{stage}'", f"{stage}@"))]
    assert len(found) == 1, output
    return found[0]


@pytest.mark.parametrize("steps", [EVAL_AND_REPORT, UNDECLARED, CRITIQUE],
                         ids=["eval-and-report", "undeclared-keys", "critique"])
def test_each_param_change_reruns_exactly_its_stages(own_copy: Path, steps: list[Step]) -> None:
    repro_each(own_copy, steps)


def in_flow_style(params_file: Path) -> str:
    """params.yaml rewritten as the project's own is written: mappings of plain values in flow style
    (`source: {hf_dataset: null, ...}`) with explicit nulls; `dvc exp run -S` reflows both. Returns the text."""
    params = yaml.safe_load(params_file.read_text())
    params_file.write_text(yaml.safe_dump(params, sort_keys=False, default_flow_style=None, width=1000))
    return params_file.read_text()


def test_a_confidence_change_by_exp_run_or_by_hand_reruns_its_stages_and_shows_in_metrics_diff_and_plots(
        own_copy: Path) -> None:
    # the first change by `dvc exp run` with no target, which runs every stage of dvc.yaml that never ran: here,
    # once every stage has run, what the key affects (the test moved from tests/test_pipeline_experiments.py, so
    # that one built copy serves both changes)
    project = own_copy
    before = in_flow_style(project / "params.yaml")
    assert "source: {" in before and ": null" in before
    run(project, "git", "add", "-A")
    run(project, "git", "commit", "-qm", "every method, params in flow style")
    locked = yaml.safe_load((project / "dvc.lock").read_text())["stages"]
    group_size = 2 * yaml.safe_load(before)["confidence"]["group_size"]
    result = dvc(project, "exp", "run", "-S", f"confidence.group_size={group_size}")
    assert ran_stages(result.stdout) == CONFIDENCE_STAGES, result.stdout
    after = (project / "params.yaml").read_text()
    assert after != before  # -S rewrote params.yaml (its layout and its nulls) ...
    expected = yaml.safe_load(before)
    expected["confidence"]["group_size"] = group_size
    assert yaml.safe_load(after) == expected
    relocked = yaml.safe_load((project / "dvc.lock").read_text())["stages"]
    # ... to no effect: fetch, normalize and every other method's stage are locked as they were (check_params,
    # which nothing depends on, reads the whole file)
    untouched = [name for name in locked
                 if not re.match(r"(score|aggregate|report|compare|view|check_params)(@|$)", name)]
    assert {name: relocked[name] for name in untouched} == {name: locked[name] for name in untouched}

    # the second by hand, then `dvc repro`
    repro_each(project, [({"confidence": {"token": "chosen"}}, CONFIDENCE_STAGES)])
    assert "(confidence.token: chosen, top_k all kept)" in (project / "metrics/deepconf/toy/report.txt").read_text()
    # every figure, named as a target (dvc.yaml declares only the headline files as metrics)
    summary = "metrics/deepconf/toy/summary.json"
    diff = json.loads(dvc(project, "metrics", "diff", "--targets", summary, "--json").stdout)
    assert any(entry.get("diff") for entry in diff[summary].values())
    plots = json.dumps(json.loads(dvc(project, "plots", "show", "--json").stdout))
    assert "bottom10_top10" in plots and '"k"' in plots


def test_a_temperature_change_starts_a_new_pool_and_switching_back_costs_nothing(own_copy: Path) -> None:
    # after the pool's growth, as in the one sequence this was split from: from the first pool of 16 the new pool's
    # grades once differed (report_grading ran), so the group keeps that order
    output = repro_each(own_copy, [*POOL_SIZE, *TEMPERATURE])
    assert "no request sent" not in stage_output(output, "build_pool")  # a new setting: a new pool
    assert len(list((own_copy / "pools" / "toy").iterdir())) == 2  # beside the old one
    run(own_copy, "git", "checkout", "--", "params.yaml")  # back to the first run's setting
    result = dvc(own_copy, "repro", "build_pool")
    assert ran_stages(result.stdout) == {"build_pool"}
    assert "no request sent" in result.stdout
    assert len(list((own_copy / "pools" / "toy").iterdir())) == 2
