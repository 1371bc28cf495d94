"""The grading critic on gpt-5-nano (profile openai-reasoning) through `dvc repro` in a real DVC project, against a
standalone simulated server that spends hidden reasoning out of max_completion_tokens as OpenAI's reasoning models
do (tracevote.sim.reasoning), counting every request:

- the shipped settings (reasoning_effort low, grading.critic.max_tokens 4096) get scored replies;
- a budget the reasoning uses up stops the stage with the line naming the budget, the effort, what to raise and
  what was spent; nothing is kept, so a rerun asks again, and after raising the budget the replies are scored;
- the command line (`grade --enable-critic`) grading the run's predictions file shares the pipeline's ledger: run
  after the stage it sends no request, and run first it leaves the stage nothing to ask;
- the debate meets the same error, naming its own budget.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import hang_guard_s
from tests.dvcproject import copy_project, dvc, make_project, project_env, run, update_params
from tests.test_pipeline import small_sim_params
from tracevote.cli.demo import BUILTIN_GSM8K, BUILTIN_PREDICTIONS, local_dataset
from tracevote.core.config_endpoints import SimConfig
from tracevote.critique.critic_prompt import CRITIC
from tracevote.sim.model import SimModel
from tracevote.sim.server import ServerOptions, SimServer, start_server, stop_server
from tracevote.store.calls import CallLedger

pytestmark = pytest.mark.slow

RUN = "handwritten"
STAGE = f"build_grading_critic@{RUN}"
PREDICTIONS = Path("predictions") / "gsm8k.jsonl"
ITEMS = 7  # the hand-written predictions of items with a reference solution
SPENT = ("error: endpoints.gpt-5-nano (gpt-5-nano) spent the whole budget of 64 tokens (grading.critic.max_tokens) "
         "on hidden reasoning at reasoning_effort high and answered nothing (call critic-")
RAISE = ("and is not kept. Raise grading.critic.max_tokens or set endpoints.gpt-5-nano.reasoning_effort lower (low "
         "or medium), then run again: it asks again. The run stopped here: every reply at this setting would end "
         "the same way")


@pytest.fixture(scope="module")
def server() -> Iterator[SimServer]:
    started = start_server(SimModel(SimConfig(0, 1.0, 0.45, 150)), options=ServerOptions(profile="openai-reasoning"))
    try:
        yield started
    finally:
        stop_server(started)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory, server: SimServer) -> Path:
    """A committed project: the hand-written GSM8K predictions as grading run `handwritten` of the dataset gsm8k,
    its critic on gpt-5-nano (the shipped endpoint and budget) at the simulated server, nothing asked yet; both
    datasets normalized."""
    params = small_sim_params()
    params["datasets"]["gsm8k"] = local_dataset(BUILTIN_GSM8K, problem_key="question", answer_format="integer")
    params["grading"] = {"runs": {RUN: {"dataset": "gsm8k", "predictions": str(PREDICTIONS)}}, "workers": 1,
                         "critic": {"enabled": True, "endpoint": "gpt-5-nano", "temperature": 1.0}}
    project = make_project(tmp_path_factory.mktemp("reasoning_critic") / "project", params)
    update_params(project, {"model": {"backend": "openai"}, "endpoints": {"gpt-5-nano": {
        "base_url": server.base_url, "profile": "openai-reasoning", "needs_key": False}}})
    (project / "predictions").mkdir()
    lines = BUILTIN_PREDICTIONS.read_text().splitlines()
    (project / PREDICTIONS).write_text("\n".join(line.replace("demo_gsm8k_test_", "gsm8k_test_") for line in lines)
                                       + "\n")
    dvc(project, "add", str(PREDICTIONS))
    dvc(project, "repro", "normalize@gsm8k", "normalize@toy")  # toy: the debate's
    run(project, "git", "add", "-A")
    run(project, "git", "commit", "-qm", "the critic on gpt-5-nano")
    return project


@pytest.fixture
def project(base: Path, tmp_path: Path) -> Path:
    return copy_project(base, tmp_path / "project")


def asked(server: SimServer) -> int:
    """The critic requests the server has answered so far (its /_stats)."""
    return server.stats.snapshot()["by_kind"].get(CRITIC, 0)


def stored_replies(project: Path) -> list[dict]:
    """Every critic reply in the run's ledgers: (text, finish reason, reasoning tokens) as the ledger keeps them."""
    replies = []
    for meta in sorted((project / "grading" / "critic" / RUN).glob(f"*/{CallLedger.META}")):
        ledger = CallLedger(meta.parent)
        for log in sorted((ledger.root / ledger.LOGS).glob("*.tvf")):
            replies += [{"text": r.text, "finish": r.finish_reason, "reasoning": r.reasoning_tokens}
                        for r in ledger.records(log.stem).values()]
    return replies


def grade_cli(project: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tracevote", "grade", "--dataset", "gsm8k", "--pred-path",
                           str(PREDICTIONS), "--enable-critic", "--json"], cwd=project, env=project_env(),
                          capture_output=True, text=True, timeout=hang_guard_s())


@dataclass(frozen=True)
class Staged:
    """The base project after `dvc repro` of the critic's stage (committed), then the command line on it."""

    project: Path
    stage_output: str
    stage_asked: int  # critic requests the stage sent
    graded: subprocess.CompletedProcess[str]  # `grade --enable-critic` run after the stage
    cli_asked: int  # critic requests the command line sent


@pytest.fixture(scope="module")
def staged(base: Path, server: SimServer, tmp_path_factory: pytest.TempPathFactory) -> Staged:
    project = copy_project(base, tmp_path_factory.mktemp("staged") / "project")
    before = asked(server)
    result = dvc(project, "repro", STAGE)
    stage_asked = asked(server) - before
    run(project, "git", "add", "-A")
    run(project, "git", "commit", "-qm", "the critic's replies")
    before = asked(server)
    graded = grade_cli(project)
    return Staged(project, result.stdout, stage_asked, graded, asked(server) - before)


def test_the_shipped_settings_get_scored_replies(staged: Staged) -> None:
    assert f"{ITEMS} of {ITEMS} critic replies missing" in staged.stage_output
    assert staged.stage_asked == ITEMS
    replies = stored_replies(staged.project)
    assert len(replies) == ITEMS and all(reply["text"] and reply["reasoning"] > 0 for reply in replies)
    assert all(reply["finish"] == "stop" for reply in replies)
    scores = json.loads(staged.graded.stdout)
    assert scores["critic_scored"] + scores["critic_unparsable"] == ITEMS and scores["critic_scored"] >= ITEMS - 2


def test_a_budget_spent_on_hidden_reasoning_stops_with_the_named_error_and_a_rerun_asks_again(
        project: Path, server: SimServer) -> None:
    tight = {"grading": {"critic": {"max_tokens": 64}}, "endpoints": {"gpt-5-nano": {"reasoning_effort": "high"}}}
    update_params(project, tight)
    for attempt in range(2):  # nothing is kept: the rerun asks again, and fails the same way
        before = asked(server)
        failed = dvc(project, "repro", STAGE, check=False)
        errors = [line for line in failed.stderr.splitlines() if line.startswith("error: ")]
        assert failed.returncode != 0 and "Traceback" not in failed.stdout + failed.stderr, attempt
        assert len(errors) == 1 and errors[0].startswith(SPENT) and RAISE in errors[0], errors
        assert "that reply would cost $0.0000" in errors[0] and "(SIMULATED: nothing was spent)" in errors[0]
        assert "(64 output tokens)" in errors[0]
        assert f"{ITEMS} of {ITEMS} critic replies missing" in failed.stdout, attempt
        assert 1 <= asked(server) - before <= ITEMS, attempt  # the run stopped; the calls in flight landed
        assert stored_replies(project) == [], attempt
    # raised past what high effort thinks (~4,800 tokens on average): room for the reasoning and the reply
    update_params(project, {"grading": {"critic": {"max_tokens": 32000}}})
    before = asked(server)
    result = dvc(project, "repro", STAGE)
    assert f"{ITEMS} of {ITEMS} critic replies missing" in result.stdout and asked(server) - before == ITEMS
    assert len(stored_replies(project)) == ITEMS and all(reply["text"] for reply in stored_replies(project))


def test_the_command_line_after_the_stage_asks_nothing(staged: Staged) -> None:
    graded = staged.graded
    assert graded.returncode == 0, graded.stderr
    assert staged.cli_asked == 0, "the command line paid again for replies the pipeline holds"
    assert f"shares that run's ledger in grading/critic/{RUN}" in graded.stderr
    assert f"holds all {ITEMS} critic replies; no request sent" in graded.stderr
    assert json.loads(graded.stdout)["critic_scored"] >= ITEMS - 2
    # the run's manifest is the stage's, untouched: DVC sees nothing to re-run
    project = staged.project
    assert json.loads((project / "grading" / "critic" / RUN / "manifest.json").read_text())["run"] == RUN
    assert STAGE not in json.loads(dvc(project, "status", "--json").stdout or "{}")


def test_the_stage_after_the_command_line_asks_nothing(project: Path, server: SimServer) -> None:
    before = asked(server)
    graded = grade_cli(project)
    assert graded.returncode == 0, graded.stderr
    assert asked(server) - before == ITEMS
    result = dvc(project, "repro", STAGE)
    assert f"holds all {ITEMS} critic replies; no request sent" in result.stdout
    assert asked(server) - before == ITEMS, "the stage paid again for replies the command line holds"


def test_a_debate_on_the_reasoning_model_names_its_own_budget(project: Path, server: SimServer) -> None:
    """The same error in the debate (every method that asks for text): it names debate.max_tokens, keeps nothing."""
    update_params(project, {"debate": {"endpoint": "gpt-5-nano", "judge_endpoint": "gpt-5-nano", "temperature": 1,
                                       "max_tokens": 64},
                            "endpoints": {"gpt-5-nano": {"reasoning_effort": "high"}}})
    failed = dvc(project, "repro", "build_debate@toy", check=False)
    errors = [line for line in failed.stderr.splitlines() if line.startswith("error: ")]
    assert failed.returncode != 0 and len(errors) == 1, failed.stdout + failed.stderr
    assert errors[0].startswith("error: endpoints.gpt-5-nano (gpt-5-nano) spent the whole budget of 64 tokens "
                                "(debate.max_tokens) on hidden reasoning at reasoning_effort high"), errors[0]
    assert "Raise debate.max_tokens or set endpoints.gpt-5-nano.reasoning_effort lower" in errors[0]
    logs = list((project / "debates" / "toy").rglob("*.tvf"))
    assert all(not CallLedger(log.parent.parent).records(log.stem) for log in logs), "an empty reply was kept"
