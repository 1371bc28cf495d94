"""The whole pipeline as a real DVC project: what each param change flags, metrics diff, plots (what each change
re-runs: tests/test_pipeline_param_changes.py)."""

from __future__ import annotations

import copy
import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
import vl_convert
import yaml

from tests.conftest import REPO_ROOT
from tests.dvcproject import (
    built_once,
    copy_project,
    dvc,
    make_project,
    model_overrides,
    one_dataset,
    run,
    update_params,
)
from tests.images import assert_not_blank
from tracevote.cli.demo import BUILTIN_PROBLEMS, local_dataset
from tracevote.explorer.sitefiles import read_data

pytestmark = pytest.mark.slow

# the live online run's stages exist only for online.live.datasets, empty in these projects (tests/test_live_stage.py
# runs them)
LIVE_STAGES = {"build_online", "score_online"}
# the study's other models' stages exist only for deepconf.endpoints, empty here too (tests/test_study_models.py)
MODEL_STAGES = {"build_pool_model", "score_model", "aggregate_model"}
# the study report's exist only for study.datasets, empty here (tests/test_study_pipeline.py runs it)
STUDY_STAGES = {"study"}
ALL_STAGES = (set(yaml.safe_load((REPO_ROOT / "dvc.yaml").read_text())["stages"]) - {"check_params"} - LIVE_STAGES
              - MODEL_STAGES - STUDY_STAGES)


def small_sim_params(problems: Path = BUILTIN_PROBLEMS, **model: Any) -> dict[str, Any]:
    """A fast simulated experiment: 12 problems x 16 samples of ~150 tokens."""
    return {
        **one_dataset("toy", problems),
        **model_overrides(**{"backend": "sim", "name": "tracevote-sim", "needs_key": False, "extra_body": {},
                             "sim": {"mean_tokens": 150}, **model}),
        "decoding": {"max_tokens": 400, "top_logprobs": 5},
        "pool": {"n_pool": 16, "concurrency": 4},
        "confidence": {"group_size": 32, "tail_tokens": 32},
        "eval": {"k": [1, 2, 4, 8, 16], "repeat": 8},
        "report": {"k": 16},
    }


def summary_methods(summary: dict[str, Any]) -> list[str]:
    """The offline methods of a report's summary.json: pass1, cons, each measure's weighted and filtered votes; and
    pass_at_k, avg_at_k, which have a headline file each too."""
    return [key.removesuffix("_std_pct") for key in summary
            if key.endswith("_std_pct") and not key.startswith("online_")]


def changed_stages(project: Path) -> set[str]:
    status = json.loads(dvc(project, "status", "--json").stdout or "{}")
    # any params.yaml edit flags check_params; nothing depends on it
    return {stage.split("@")[0] for stage in status} - {"check_params"}


def ran_stages(output: str) -> set[str]:
    """The stages (foreach groups by their group's name) that ran: "Running stage 'score@toy'" -> "score"."""
    return set(re.findall(r"Running stage '([A-Za-z_]+)[@']", output)) - {"check_params"}


# K=16 is the whole pool of 16 samples: one working set per problem (as K=512 is with the default pool)
NO_SPREAD_AT_16 = "warning: K=16 has one distinct working set per problem"


def build_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A committed project in which `dvc repro` ran every stage once, copied for the module asking: built once per
    run and shared by every xdist worker (tests/dvcproject.py's built_once), so this file,
    tests/test_pipeline_param_changes.py and the others that ask cost one build between them wherever they run."""
    return copy_project(pipeline_template(tmp_path_factory), tmp_path_factory.mktemp("pipeline") / "project")


def pipeline_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project build_once copies, built once per run for every xdist worker: read it or copy it, never change
    it (other workers read it at the same time)."""
    return built_once(tmp_path_factory, "pipeline", lambda folder: build_template(folder / "project")) / "project"


def build_template(root: Path) -> None:
    project = make_project(root, small_sim_params())
    result = dvc(project, "repro")
    assert ran_stages(result.stdout) == ALL_STAGES
    assert "SIMULATED" in result.stdout
    assert NO_SPREAD_AT_16 in result.stdout  # the report stage prints its report
    run(project, "git", "add", "-A")
    run(project, "git", "commit", "-qm", "first run")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_once(tmp_path_factory)


def test_outputs_say_simulated(built: Path) -> None:
    summary = json.loads((built / "metrics" / "deepconf" / "toy" / "summary.json").read_text())
    assert summary["simulated"] is True and summary["k"] == 16 and summary["working_sets"] == 1
    report = (built / "metrics" / "deepconf" / "toy" / "report.txt").read_text().splitlines()
    assert [line for line in report if line.startswith("warning:")] == [
        f"{NO_SPREAD_AT_16}: its std is 0, and its spread and interval reflect only the problems' resampling, "
        "not the traces'"]
    assert {"pass1_pct", "cons_pct", "bottom10_pct", "tail_top10_pct", "cons_tie_rate_pct",
            "valid_per_problem_min"} <= set(summary)
    headlines = built / "metrics" / "headline"
    methods = [*summary_methods(summary), "online_low", "online_high"]  # every method the report ranks
    assert sorted(path.relative_to(headlines).as_posix() for path in headlines.rglob("*.json")) == sorted([
        "critique/toy_steps.json", "debate.json", "grading/pool_toy.json",
        *(f"deepconf/toy/{method}.json" for method in methods)])
    for method in ("cons", "tail_top10"):
        row = json.loads((headlines / "deepconf" / "toy" / f"{method}.json").read_text())
        assert row["simulated"] is True and row["k"] == 16 and row["accuracy_pct"] == summary[f"{method}_pct"]
        assert (row["ci_low_pct"], row["ci_high_pct"]) == (summary[f"{method}_ci_low_pct"],
                                                           summary[f"{method}_ci_high_pct"])
    results = json.loads((built / "metrics" / "deepconf" / "toy" / "results.json").read_text())
    assert results["simulated"] is True and len(results["problems"]) == 12
    manifest = json.loads((built / "pools" / "toy.json").read_text())
    assert manifest["simulated"] is True and manifest["samples"] == 12 * 16
    header = (built / "plots" / "deepconf" / "toy" / "accuracy_vs_k.csv").read_text().splitlines()[0].split(",")
    assert header[:3] == ["k", "pass1", "pass1_std"] and "bottom10_top10" in header
    for plot in ("accuracy_vs_k.png", "confidence.png"):
        assert_not_blank(built / "plots" / "deepconf" / "toy" / plot)
    explorer = read_data(built / "explorer", "index")  # the view stage's site: every method, marked simulated
    assert explorer["simulated"] is True
    assert [(section["view"], section["label"]) for section in explorer["sections"]] == [
        ("pool", "DeepConf pool: toy (deepseek)"), ("debate", "Debate: toy"), ("critique", "Critique: toy_steps"),
        ("grading", "Grading: pool_toy"), ("compare", "Compare: voting beside debate")]
    assert len(read_data(built / "explorer", "pool0/index")["problems"]) == 12


def drawn_title(spec: dict[str, Any]) -> str:
    """The title Vega draws for a filled Vega-Lite spec (rendered to SVG by vl-convert, as a browser would)."""
    svg = vl_convert.vegalite_to_svg(spec)
    title = re.search(r'<g class="mark-group role-title[^"]*".*?<text[^>]*>(.*?)</text>', svg, re.DOTALL)
    assert title, svg[:500]
    return html.unescape(title.group(1))


def test_the_dvc_plot_titles_say_simulated(built: Path) -> None:
    drawn = json.loads(dvc(built, "plots", "show", "--json").stdout)["data"]
    specs = {name: entry[0]["content"] for name, entry in drawn.items() if entry and entry[0]["type"] == "vega"}
    assert set(specs) == {"accuracy_vs_k_avg", "accuracy_vs_k_bottom10", "accuracy_vs_k_lowest", "accuracy_vs_k_tail",
                          "accuracy_vs_tokens", "critique_f1_by_task"}
    for name, spec in specs.items():
        assert drawn_title(spec).startswith("SIMULATED: "), name
    # the same chart of a real model's data: the title without the word
    real = copy.deepcopy(specs["critique_f1_by_task"])
    for row in real["data"]["values"]:
        row["simulated"] = "False"
    assert drawn_title(real).startswith("critique: F1 per dataset/task (endpoint deepseek, backend sim)")


@pytest.mark.parametrize(
    ("change", "flagged"),
    [({"prompt": {"system": "Be brief."}}, {"build_pool"}),
     # the debate, the critique and the grading critic (grading.critic.model null) share the model
     ({"model": {"sim": {"signal": 2.0}}}, {"build_pool", "build_debate", "build_critiques", "build_grading_critic"}),
     ({"decoding": {"max_tokens": 300}}, {"build_pool"})],
)
def test_model_prompt_and_decoding_changes_flag_build_pool(built: Path, change: dict, flagged: set[str]) -> None:
    original = (built / "params.yaml").read_text()
    try:
        update_params(built, change)
        assert changed_stages(built) == flagged
    finally:
        (built / "params.yaml").write_text(original)


def test_adding_a_dataset_runs_only_its_fetch_and_normalize(built: Path, shared_data: Path) -> None:
    gsm8k = shared_data / "gsm8k_test.jsonl"
    if not gsm8k.is_file():
        pytest.skip(f"{gsm8k} is absent from ../shared/data")
    original, lock = (built / "params.yaml").read_text(), (built / "dvc.lock").read_text()
    try:
        update_params(built, {"datasets": {"gsm8k": {**local_dataset(gsm8k, problem_key="question"),
                                                     "answer_format": "integer"}}})
        status = json.loads(dvc(built, "status", "--json").stdout or "{}")
        assert set(status) - {"check_params"} == {"fetch@gsm8k", "normalize@gsm8k"}
        result = dvc(built, "repro")
        assert ran_stages(result.stdout) == {"fetch", "normalize"}
        ran = [line for line in result.stdout.splitlines() if line.startswith("Running stage")]
        assert ran == ["Running stage 'check_params':", "Running stage 'fetch@gsm8k':",
                       "Running stage 'normalize@gsm8k':"]
        assert len((built / "data" / "gsm8k.jsonl").read_text().splitlines()) == 1319
    finally:
        (built / "params.yaml").write_text(original)
        (built / "dvc.lock").write_text(lock)
        for leftover in ("data/gsm8k.jsonl", "data/raw/gsm8k.jsonl"):
            (built / leftover).unlink(missing_ok=True)
