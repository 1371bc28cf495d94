"""build_critiques, score_critiques and report_critiques over real HTTP to the loopback simulated server: the real
ProcessBench gsm8k file end to end, reruns and raised n_votes pay only for what is new, kill -9 at random moments
loses at most the calls in flight and ends where an uninterrupted build ends, the cost cap refuses before any
request, and scoring refuses what was not built. The claims about a stage's process (the kill and the resume after
it, the refusals' exit and stderr, the report) run processes, as DVC does; the other stage runs, in the test's own
process (tests/stage_here.py)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import FIXTURE_PARAMS, REPO_ROOT, SHARED_DIR
from tests.dvcproject import model_overrides, run_stage
from tests.images import assert_not_blank
from tests.sim_servers import (
    final_state,
    kill_and_resume,
    kill_once_stored,
    ledger_in,
    recording_server,
    requests_by_key,
    stored_under,
    watched_server,
)
from tests.stage_here import run_stage_here
from tracevote.cli.demo import BUILTIN_DELTABENCH, BUILTIN_STEPS, deep_merge, local_steps_dataset, write_params
from tracevote.core.config_datasets import StepsFormat
from tracevote.core.config_endpoints import SimConfig
from tracevote.critique.prompts import BUILTIN_TEMPLATES, steps_digest, tagged_response
from tracevote.datasets.steps import load_step_records
from tracevote.sim.faults import parse_faults
from tracevote.sim.model import SimModel
from tracevote.sim.server import running_server

pytestmark = pytest.mark.slow

SIM = SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=120, critique_noise=0.3)
CONCURRENCY = 4
LEDGERS = Path("critiques/steps")  # the dataset's ledgers folder, in a project
N_VOTES = 3


def project(root: Path, base_url: str, dataset: dict[str, Any], raw: Path, **critique: Any) -> Path:
    """A folder with params.yaml (an OpenAI-compatible endpoint at `base_url`) and one normalized step dataset,
    `steps`, made by the normalize stage from `raw`."""
    params = deep_merge(yaml.safe_load(FIXTURE_PARAMS.read_text()), {
        **model_overrides(backend="openai", base_url=base_url, name="tracevote-sim", needs_key=False, extra_body={}),
        "critique": {"datasets": ["steps"], "n_votes": N_VOTES, "concurrency": CONCURRENCY, "max_tokens": 2000,
                     **critique}})
    params["datasets"] = {**params["datasets"], "steps": dataset}
    root.mkdir(parents=True)
    write_params(root / "params.yaml", params)
    run_stage_here(root, "normalize.py", "--dataset", "steps", "--raw", str(raw), "--out", "data/steps.jsonl")
    return root


def toy_project(root: Path, base_url: str, **critique: Any) -> Path:
    return project(root, base_url, local_steps_dataset(BUILTIN_STEPS), BUILTIN_STEPS, **critique)


def build_command() -> list[str]:
    return [sys.executable, str(REPO_ROOT / "stages" / "build_critiques.py"), "--dataset", "steps",
            "--steps", "data/steps.jsonl", "--critiques", "critiques/steps", "--manifest", "critiques/steps.json"]


def build(root: Path, check: bool = True, *, as_process: bool = False) -> subprocess.CompletedProcess:
    """The stage in this process; `as_process` for a claim about its process (its exit and stderr, a kill)."""
    return (run_stage if as_process else run_stage_here)(root, "build_critiques.py", *build_command()[2:],
                                                         check=check)


def score(root: Path, check: bool = True, *, as_process: bool = False) -> subprocess.CompletedProcess:
    return (run_stage if as_process else run_stage_here)(
        root, "score_critiques.py", "--critiques", "critiques", "--metrics", "metrics/critique.json", "--details",
        "metrics/critique_results.jsonl", "--by-task", "metrics/critique_by_task.csv", check=check)


def metrics_of(root: Path) -> dict[str, Any]:
    score(root)
    return json.loads((root / "metrics" / "critique.json").read_text())


def labels_of(path: Path) -> dict[str, int]:
    """What the build's own simulator would know: each solution's first wrong step, by its steps' digest."""
    rows = json.loads(path.read_text()) if path.suffix == ".json" else [json.loads(line) for line in
                                                                       path.read_text().splitlines()]
    return {steps_digest(row["steps"]): row["label"] for row in rows}


@pytest.fixture(scope="module")
def processbench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real ProcessBench gsm8k file through normalize and the whole branch, on the simulated server."""
    raw = SHARED_DIR / "data" / "processbench_gsm8k.json"
    if not raw.is_file():
        pytest.skip(f"{raw} is absent (CI places ../shared beside the clone)")
    recipe = yaml.safe_load(FIXTURE_PARAMS.read_text())["datasets"]["processbench_gsm8k"]
    root = tmp_path_factory.mktemp("critique") / "processbench"
    with running_server(SimModel(SIM, first_errors=labels_of(raw)), parse_faults("")) as base_url:
        project(root, base_url, recipe, raw, concurrency=16)
        first = build(root)
        assert "1200 of 1200 critiques missing" in first.stdout
        assert "(SIMULATED: nothing will be spent)" in first.stdout.split("critiques missing")[1].splitlines()[0]
        assert set(requests_by_key(base_url).values()) == {1}, "a critique was requested twice"
        again = build(root)
        assert "no request sent" in again.stdout
        assert set(requests_by_key(base_url).values()) == {1}, "the rerun requested again"
    score(root)
    run_stage(root, "report_critiques.py", "--metrics", "metrics/critique.json", "--details",
          "metrics/critique_results.jsonl", "--by-task", "metrics/critique_by_task.csv", "--table",
          "metrics/critique.md", "--plots", "plots/critique")
    return root


OVERRIDE = "Critique this.\n{problem}\n{tagged_response}\nBox the index of the first wrong paragraph."
TEMPLATES = [
    # (rows, their steps_format, critique.template, the built-in template every request is (None: critique.template),
    #  wording every request has, wording none has)
    (BUILTIN_STEPS, "processbench", None, "processbench", "The following is a math problem", "[Problem]"),
    (BUILTIN_DELTABENCH, "deltabench", None, "deltabench", "The following is a problem", "math problem"),
    (BUILTIN_DELTABENCH, "deltabench", OVERRIDE, None, "Critique this.", "The following is"),  # for every dataset
]


@pytest.mark.parametrize(("raw", "steps_format", "template", "builtin", "has", "lacks"), TEMPLATES)
def test_each_dataset_is_asked_in_its_own_template(tmp_path: Path, raw: Path, steps_format: StepsFormat,
                                                   template: str | None, builtin: StepsFormat | None, has: str,
                                                   lacks: str) -> None:
    with recording_server(SIM) as server:
        root = project(tmp_path / "p", server.base_url, local_steps_dataset(raw, steps_format=steps_format), raw,
                       n_votes=1, template=template)
        build(root)
        sent = server.user_messages()
    text = (BUILTIN_TEMPLATES[builtin].read_text(encoding="utf-8") if builtin else template or "").strip()
    records = load_step_records(root / "data" / "steps.jsonl")
    expected = [text.format(problem=r.problem, tagged_response=tagged_response(r.steps)) for r in records]
    assert sorted(sent) == sorted(expected)  # one vote each: one request per solution
    assert all(has in prompt and lacks not in prompt for prompt in sent)
    manifest = json.loads((root / "critiques" / "steps.json").read_text())
    assert manifest["setting"]["template"] == text  # the ledger's setting names the text its replies answer
    assert metrics_of(root)["solutions"] == len(records)  # scoring finds the ledger this dataset's template names


def test_the_real_processbench_file_is_scored_the_processbench_way(processbench: Path) -> None:
    metrics = json.loads((processbench / "metrics" / "critique.json").read_text())
    assert metrics["simulated"] is True and metrics["solutions"] == 400
    assert (metrics["n_error"], metrics["n_correct"]) == (207, 193)  # ProcessBench's gsm8k subset
    assert metrics["calls"] == 400 * N_VOTES
    lines = (processbench / "metrics" / "critique_results.jsonl").read_text().splitlines()
    results = [json.loads(line) for line in lines]
    records = {r.id: r for r in load_step_records(processbench / "data" / "steps.jsonl")}
    for result in results:
        assert result["label"] == records[result["id"]].label and result["task"] == "gsm8k"
        assert len(result["votes"]) == N_VOTES and result["match"] == (result["prediction"] == result["label"])
    errors = [r for r in results if r["label"] != -1]
    error_acc = sum(r["match"] for r in errors) / len(errors)
    correct_acc = sum(r["match"] for r in results if r["label"] == -1) / (len(results) - len(errors))
    assert metrics["error_accuracy_pct"] == round(100 * error_acc, 2)
    assert metrics["correct_accuracy_pct"] == round(100 * correct_acc, 2)
    assert metrics["f1_pct"] == round(100 * 2 * error_acc * correct_acc / (error_acc + correct_acc), 2)
    # the simulated critic names the first error far more often than a uniform guess over -1..n-1 would
    assert 0.3 < error_acc < 0.95 and 0.3 < correct_acc < 0.95
    assert 0 < metrics["unanimous_pct"] < 100 and 0 < metrics["unparsable_pct"] < 20


def test_the_report_has_the_table_by_task_and_a_plot(processbench: Path) -> None:
    with open(processbench / "metrics" / "critique_by_task.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["dataset"], r["task"], r["n_error"], r["n_correct"]) for r in rows] == [("steps", "gsm8k", "207", "193")]
    table = (processbench / "metrics" / "critique.md").read_text()
    assert table.startswith("**SIMULATED MODEL") and "| steps | gsm8k | 207 | 193 |" in table
    assert_not_blank(processbench / "plots" / "critique" / "critique.png")
    f1_rows = (processbench / "plots" / "critique" / "f1_by_task.csv").read_text().splitlines()
    assert f1_rows[0] == "subset,error_accuracy_pct,correct_accuracy_pct,f1_pct,simulated"  # for the plot's title
    shares = [rows[0][key] for key in ("error_accuracy_pct", "correct_accuracy_pct", "f1_pct")]
    assert f1_rows[1] == ",".join(["steps/gsm8k", *shares, "True"])  # the same percentages as the CSV by task


def test_raising_n_votes_requests_only_the_new_votes(tmp_path: Path) -> None:
    with running_server(SimModel(SIM, first_errors=labels_of(BUILTIN_STEPS)), parse_faults("")) as base_url:
        root = toy_project(tmp_path / "votes", base_url)
        build(root)
        first = metrics_of(root)
        params = yaml.safe_load((root / "params.yaml").read_text())
        params["critique"]["n_votes"] = N_VOTES + 2
        write_params(root / "params.yaml", params)
        refused = score(root, check=False)
        assert refused.returncode != 0 and "build_critiques@steps" in refused.stderr
        build(root)
        keys = {key.rsplit("/", 1)[1] for key, count in requests_by_key(base_url).items() if count == 1}
        assert keys == {str(vote) for vote in range(N_VOTES + 2)}
        assert set(requests_by_key(base_url).values()) == {1}
    assert metrics_of(root)["calls"] == 12 * (N_VOTES + 2) and first["calls"] == 12 * N_VOTES


def test_kill_at_random_moments_resumes_exactly_and_ends_as_an_uninterrupted_build(tmp_path: Path) -> None:
    labels = labels_of(BUILTIN_STEPS)
    with running_server(SimModel(SIM, first_errors=labels), parse_faults("")) as base_url:
        uninterrupted = toy_project(tmp_path / "uninterrupted", base_url, n_votes=8)
        build(uninterrupted)
    total = len(stored_under(uninterrupted / LEDGERS))
    assert total == 12 * 8
    with watched_server(SIM, first_errors=labels) as slow:
        root = toy_project(tmp_path / "killed", slow.base_url, n_votes=8)
        kill_and_resume(slow, build_command(), root, LEDGERS, total=total, concurrency=CONCURRENCY, seed=7,
                        logs=tmp_path, finish=lambda: build(root, as_process=True))
    assert final_state(ledger_root(root)) == final_state(ledger_root(uninterrupted))
    assert metrics_of(root) == metrics_of(uninterrupted)


def test_the_cost_cap_refuses_before_any_request(tmp_path: Path) -> None:
    with running_server(SimModel(SIM), parse_faults("")) as base_url:
        root = toy_project(tmp_path / "capped", base_url, max_cost_usd=0.0001)
        refused = build(root, check=False, as_process=True)
        assert requests_by_key(base_url) == Counter()
    assert refused.returncode != 0 and "critique.max_cost_usd" in refused.stderr


def test_an_unfinished_build_refuses_to_score_and_writes_nothing(tmp_path: Path) -> None:
    with watched_server(SIM, admit=1) as gated:  # the other 35 critiques wait: the kill lands mid-build
        root = toy_project(tmp_path / "partial", gated.base_url)
        kill_once_stored(build_command(), root, lambda: len(stored_under(root / LEDGERS)), 1, tmp_path / "build.log")
    assert len(stored_under(root / LEDGERS)) == 1
    failed = score(root, check=False, as_process=True)
    assert failed.returncode != 0 and "critiques/steps.json" in failed.stderr and "make repro" in failed.stderr
    assert not (root / "metrics" / "critique.json").exists()


def ledger_root(root: Path) -> Path:
    ledger = ledger_in(root / LEDGERS)
    assert ledger is not None, f"no ledger under {root}"
    return ledger.root
