"""build_debate and score_debate over real HTTP to the loopback simulated server: reruns pay for nothing, kill -9
at random moments loses at most the calls in flight and ends where an uninterrupted build ends, and the scores come
from the ledger alone. The claims about a stage's process (the kill and the resume after it, the cost cap's and
a missing call's refusals) run processes, as DVC does; the other stage runs, in the test's own process
(tests/stage_here.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import FIXTURE_PARAMS, REPO_ROOT
from tests.dvcproject import model_overrides, one_dataset, run_stage
from tests.sim_servers import (
    final_state,
    kill_and_resume,
    kill_once_stored,
    ledger_in,
    requests_by_key,
    stored_under,
    watched_server,
)
from tests.stage_here import run_stage_here
from tracevote.cli.demo import BUILTIN_PROBLEMS, deep_merge, with_overrides, write_params
from tracevote.core.config_endpoints import SimConfig
from tracevote.datasets.local import read_local_rows
from tracevote.sim.faults import parse_faults
from tracevote.sim.model import SimModel
from tracevote.sim.server import running_server

pytestmark = pytest.mark.slow

# agents that often disagree, so some of the 12 debates reach round 2 (at 0.45 none did once each model's name
# seeded its own replies)
SIM = SimConfig(seed=0, signal=1.0, accuracy=0.3, mean_tokens=120)
CONCURRENCY = 4
LEDGERS = Path("debates/toy")  # the dataset's ledgers folder, in a project


def project(root: Path, base_url: str, **debate: Any) -> Path:
    """A folder with params.yaml (an OpenAI-compatible endpoint at `base_url`) and the normalized demo problems."""
    params = yaml.safe_load(FIXTURE_PARAMS.read_text())
    overrides = deep_merge(one_dataset("toy", BUILTIN_PROBLEMS), {
        **model_overrides(backend="openai", base_url=base_url, name="tracevote-sim", needs_key=False, extra_body={}),
        "debate": {"concurrency": CONCURRENCY, "max_tokens": 400, **debate}})
    params = with_overrides(params, overrides)
    root.mkdir(parents=True)
    write_params(root / "params.yaml", params)
    run_stage_here(root, "normalize.py", "--dataset", "toy", "--raw", str(BUILTIN_PROBLEMS), "--out", "data/toy.jsonl")
    return root


def build_command() -> list[str]:
    return [sys.executable, str(REPO_ROOT / "stages" / "build_debate.py"), "--dataset", "toy",
            "--problems", "data/toy.jsonl", "--debates", "debates/toy", "--manifest", "debates/toy.json"]


def build(root: Path, check: bool = True, *, as_process: bool = False) -> subprocess.CompletedProcess:
    """The stage in this process; `as_process` for a claim about its process (its exit and stderr, a kill)."""
    return (run_stage if as_process else run_stage_here)(root, "build_debate.py", *build_command()[2:], check=check)


def score(root: Path) -> dict[str, Any]:
    run_stage_here(root, "score_debate.py", "--debates", "debates", "--metrics", "metrics/debate.json",
                   "--details", "metrics/debate_results.json", "--table", "metrics/debate.md")
    return json.loads((root / "metrics" / "debate.json").read_text())


def sim_answers() -> dict[str, int]:
    """What build_debate's own simulator would know: each problem's gold answer."""
    return {row["problem"]: int(row["answer"]) for row in read_local_rows(BUILTIN_PROBLEMS)}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("debate") / "uninterrupted"
    with running_server(SimModel(SIM, sim_answers()), parse_faults("")) as base_url:
        project(root, base_url)
        first = build(root)
        assert "unfinished" in first.stdout
        assert set(requests_by_key(base_url).values()) == {1}, "a call was requested twice"
        again = build(root)
        assert "no request sent" in again.stdout
        assert set(requests_by_key(base_url).values()) == {1}, "the rerun requested again"
    return root


def test_a_built_debate_scores_offline_with_every_metric(uninterrupted: Path) -> None:
    metrics = score(uninterrupted)
    assert metrics["simulated"] is True and metrics["problems"] == 12
    assert {"accuracy_pct", "accuracy_toy_pct", "api_calls_per_problem", "prompt_tokens_per_problem",
            "completion_tokens_per_problem", "consensus_pct", "stop_round0_pct", "stop_round1_pct",
            "stop_ranking_pct", "judge_fallbacks", "unanswered"} <= set(metrics)
    shares = sum(metrics[f"stop_{stop}_pct"] for stop in ("round0", "round1", "ranking", "round2", "rounds"))
    assert shares == pytest.approx(100.0, abs=0.05), "percent of the problems, each rounded to two decimals"
    assert metrics["consensus_pct"] < 100.0, "no debate reached round 2"
    details = json.loads((uninterrupted / "metrics" / "debate_results.json").read_text())
    calls = sum(p["calls"] for p in details["problems"])
    assert calls == len(stored_under(uninterrupted / LEDGERS)), "every stored call belongs to a debate's path"
    for problem in details["problems"]:
        assert problem["correct"] == (problem["final_answer"] == problem["gold"])
        assert len(problem["answers"]["round0"]) >= 3
    assert details["total_calls"] == calls == metrics["total_calls"]
    assert details["failed"] == [p["problem_id"] for p in details["problems"] if not p["correct"]]
    assert metrics["wrong"] == len(details["failed"]) and metrics["correct"] + metrics["wrong"] == 12
    table = (uninterrupted / "metrics" / "debate.md").read_text()
    assert "SIMULATED" in table and table.count("\n| toy | toy-") == 12
    assert f"Calls: {calls} in all" in table and ", ".join(details["failed"]) in table


def test_a_ledger_missing_calls_refuses_to_score(uninterrupted: Path, tmp_path: Path) -> None:
    with watched_server(SIM, sim_answers(), admit=5) as gated:  # the rest wait: the kill lands mid-build
        root = project(tmp_path / "partial", gated.base_url)
        kill_once_stored(build_command(), root, lambda: len(stored_under(root / LEDGERS)), 5, tmp_path / "build.log")
    assert len(stored_under(root / LEDGERS)) == 5
    manifest = root / "debates" / "toy.json"
    manifest.write_text((uninterrupted / "debates" / "toy.json").read_text())  # a manifest claiming all is done
    failed = run_stage(root, "score_debate.py", "--debates", "debates", "--metrics", "m.json", "--details", "d.json",
                       "--table", "d.md", check=False)
    assert failed.returncode != 0 and "incomplete" in failed.stderr and "run build_debate" in failed.stderr
    assert not (root / "m.json").exists()


def test_kill_at_random_moments_resumes_exactly_and_ends_as_an_uninterrupted_build(
        uninterrupted: Path, tmp_path: Path) -> None:
    total = len(stored_under(uninterrupted / LEDGERS))
    with watched_server(SIM, sim_answers()) as slow:
        root = project(tmp_path / "killed", slow.base_url)
        kill_and_resume(slow, build_command(), root, LEDGERS, total=total, concurrency=CONCURRENCY, seed=11,
                        logs=tmp_path, finish=lambda: build(root, as_process=True))
    assert final_state(ledger_root(root)) == final_state(ledger_root(uninterrupted))
    assert score(root) == score(uninterrupted)


def test_the_cost_cap_refuses_before_any_request(tmp_path: Path) -> None:
    with running_server(SimModel(SIM, sim_answers()), parse_faults("")) as base_url:
        root = project(tmp_path / "capped", base_url, max_cost_usd=0.0001)
        refused = build(root, check=False, as_process=True)
        assert requests_by_key(base_url) == Counter()
    assert refused.returncode != 0 and "debate.max_cost_usd" in refused.stderr


def ledger_root(root: Path) -> Path:
    ledger = ledger_in(root / LEDGERS)
    assert ledger is not None, f"no ledger under {root}"
    return ledger.root


def set_problems(root: Path, span: list[int] | None) -> None:
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["debate"]["problems"] = span
    write_params(root / "params.yaml", params)


def test_widening_the_problem_range_requests_only_the_new_debates(uninterrupted: Path, tmp_path: Path) -> None:
    with running_server(SimModel(SIM, sim_answers()), parse_faults("")) as base_url:
        root = project(tmp_path / "ranged", base_url, problems=[2, 4])
        build(root)
        first = requests_by_key(base_url)
        assert {key.split("/")[0] for key in first} == {"toy-03", "toy-04", "toy-05"}, "[2, 4] is rows 3-5"
        assert score(root)["problems"] == 3
        set_problems(root, [0, 40])  # past the end: stops at the last problem, as the write-up's script does
        widened = build(root)
        again = requests_by_key(base_url)
    assert "9 of 12 debates" in widened.stdout and set(again.values()) == {1}, "a stored debate was requested again"
    assert {key for key in again if key.split("/")[0] in {"toy-03", "toy-04", "toy-05"}} == set(first)
    assert len(list((root / LEDGERS).glob("*/ledger.json"))) == 1, "the range is not part of the ledger's setting"
    assert score(root) == score(uninterrupted), "the same debates as one build over every problem"


def test_scoring_refuses_debates_of_another_range(uninterrupted: Path, tmp_path: Path) -> None:
    root = tmp_path / "other_range"
    shutil.copytree(uninterrupted, root)
    set_problems(root, [0, 3])
    failed = run_stage_here(root, "score_debate.py", "--debates", "debates", "--metrics", "m.json", "--details",
                            "d.json", "--table", "d.md", check=False)
    assert failed.returncode != 0 and "debate.problems null (every problem), params.yaml says [0, 3]" in failed.stderr
    assert "run build_debate@toy" in failed.stderr
