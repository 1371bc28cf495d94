"""What each param change re-runs in the whole pipeline as a real DVC project, and that switching back costs
nothing. Each group of changes runs on its own copy of one built project, so the groups are independent of each
other and of their order; a file of its own, so `make test` (--dist loadfile) can run it beside tests/test_pipeline.py
on the other worker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.dvcproject import copy_project, dvc, model_overrides, run, update_params
from tests.test_pipeline import build_once, ran_stages

pytestmark = pytest.mark.slow

GRADING = ("build_grading_critic", "grade", "report_grading")
Step = tuple[dict[str, Any], set[str]]  # (params change, stages `dvc repro` must run)

# compare reads the voting results beside the debate's, and view (the explorer) the scores and aggregates: they follow
# every change to them
CONFIDENCE: list[Step] = [({"confidence": {"group_size": 16}}, {"score", "aggregate", "report", "compare", "view"}),
                          ({"confidence": {"token": "chosen"}}, {"score", "aggregate", "report", "compare", "view"})]
EVAL_AND_REPORT: list[Step] = [
    ({"eval": {"repeat": 4}}, {"aggregate", "report", "compare", "view"}),
    ({"report": {"k": 8}}, {"report", "compare", "view"}),
]
# keys no stage declares re-run nothing (the pool's, the critique's and the servers, in one step)
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


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_once(tmp_path_factory)


@pytest.fixture
def own_copy(built: Path, tmp_path: Path) -> Path:
    """`built` copied, for a test that leaves the project changed."""
    return copy_project(built, tmp_path / "project")


def repro_each(project: Path, steps: list[Step]) -> str:
    """Apply each change in turn; after each, `dvc repro` runs exactly its stages. Returns the last one's output."""
    output = ""
    for change, expected in steps:
        update_params(project, change)
        output = dvc(project, "repro").stdout
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


def test_a_confidence_change_reruns_its_stages_and_shows_in_metrics_diff_and_plots(own_copy: Path) -> None:
    repro_each(own_copy, CONFIDENCE)
    assert "(confidence.token: chosen, top_k all kept)" in (own_copy / "metrics/deepconf/toy/report.txt").read_text()
    # every figure, named as a target (dvc.yaml declares only the headline files as metrics)
    summary = "metrics/deepconf/toy/summary.json"
    diff = json.loads(dvc(own_copy, "metrics", "diff", "--targets", summary, "--json").stdout)
    assert any(entry.get("diff") for entry in diff[summary].values())
    plots = json.dumps(json.loads(dvc(own_copy, "plots", "show", "--json").stdout))
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
