"""Endpoints on standalone simulated servers (model.backend openai, each endpoint's profile set explicitly), through
`dvc repro` in a real DVC project: what a method needs of its endpoint's provider is refused before any request,
in one line naming the setting (each server counts no request; two refusals through `dvc repro`, the others through
their stage's command as dvc.yaml gives it), and a debate whose agents and judge are on two providers sends each call
to its own endpoint, shaped for that endpoint's profile."""

from __future__ import annotations

import contextlib
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.debate.test_build import sim_answers
from tests.dvcproject import built_once, copy_project, dvc, run, update_params
from tests.stage_here import run_script_here
from tests.test_paid_stage_refusals import stage_command
from tests.test_profiles_pipeline import build_base, ledger, records
from tracevote.core.config_endpoints import SimConfig
from tracevote.debate.prompts import ANSWER, RANK, REVISE
from tracevote.sim.model import SimModel
from tracevote.sim.server import ServerOptions, SimServer, start_server, stop_server

pytestmark = pytest.mark.slow

RUN = "handwritten"
THINKING = {"thinking": {"type": "disabled"}}
# endpoint -> the profile its server plays (set explicitly: a loopback host would be inferred as local)
PLAYED = {"deepseek": "deepseek", "gpt-4o-mini": "openai-chat", "gpt-5-nano": "openai-reasoning"}


@contextlib.contextmanager
def servers() -> Iterator[dict[str, SimServer]]:
    """A simulated server per endpoint, each enforcing its endpoint's profile."""
    started = {endpoint: start_server(SimModel(SimConfig(0, 1.0, 0.45, 150), sim_answers()),
                                      options=ServerOptions(profile=profile)) for endpoint, profile in PLAYED.items()}
    try:
        yield started
    finally:
        for server in started.values():
            stop_server(server)


# the reasoning model thinks least, so the debate's 400-token budget holds its hidden reasoning and an answer
EFFORT = {"gpt-5-nano": {"reasoning_effort": "minimal"}}


def pointed_at(running: dict[str, SimServer]) -> dict[str, Any]:
    """Params overrides: every endpoint on its own server, its profile explicit, no key needed."""
    return {"model": {"backend": "openai"}, "endpoints": {
        endpoint: {"base_url": server.base_url, "profile": PLAYED[endpoint], "needs_key": False,
                   **EFFORT.get(endpoint, {})}
        for endpoint, server in running.items()}}


def requests(running: dict[str, SimServer]) -> dict[str, Counter[str]]:
    """Each server's requests by kind of call."""
    return {endpoint: Counter(server.stats.snapshot()["by_kind"]) for endpoint, server in running.items()}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, SimServer]]]:
    """A committed project whose datasets are normalized, every endpoint on its own server: a copy of the base project
    tests/test_profiles_pipeline.py builds once per run (hand-written predictions as grading run `handwritten`, the
    critic on, DeepSeek's `thinking` field on its endpoint), then pointed at the servers."""
    base = built_once(tmp_path_factory, "profiles-base", lambda folder: build_base(folder / "project"))
    with servers() as running:
        root = copy_project(base / "project", tmp_path_factory.mktemp("endpoints") / "project")
        update_params(root, pointed_at(running))
        run(root, "git", "commit", "-qam", "endpoints on their servers")
        yield root, running


NO_LOGPROBS = ("deepconf.endpoint: 'gpt-5-nano' must be an endpoint that returns logprobs: DeepConf's confidence is "
               "made of them, and gpt-5-nano (profile openai-reasoning) returns none")


def default_only(section: str, temperature: float) -> str:
    return (f"{section}.temperature: {temperature:g} must be 1: endpoint gpt-5-nano (gpt-5-nano, profile "
            f"openai-reasoning) accepts only the default temperature; set {section}.temperature: 1")


def unknown_field(endpoint: str, profile: str) -> str:
    return (f"endpoints.{endpoint}.extra_body: 'thinking' must be a field {profile} accepts ({profile} answers an "
            f"unknown request field with HTTP 400; 'thinking' is DeepSeek's own)")


REFUSALS = [
    # (params change, the stage asked to run, the one line it fails with, the folder it must not have written, whether
    # through real `dvc repro`: the other rows run the stage's command from dvc.yaml in this process, with DVC_STAGE
    # set as DVC sets it (tests/stage_here.py, as tests/test_paid_stage_refusals.py does), since what DVC adds, running
    # the command and failing with its line, is the same for every row and proved by the rows marked True)
    ({"deepconf": {"endpoint": "gpt-5-nano"}}, "check_params", NO_LOGPROBS, None, False),
    ({"deepconf": {"endpoint": "gpt-5-nano"}}, "build_pool@toy", NO_LOGPROBS, "pools/toy", False),
    ({"debate": {"endpoint": "gpt-5-nano"}}, "build_debate@toy", default_only("debate", 0.3), "debates/toy", False),
    ({"debate": {"judge_endpoint": "gpt-5-nano"}}, "build_debate@toy", default_only("debate", 0.3), "debates/toy",
     False),
    ({"critique": {"endpoint": "gpt-5-nano"}}, "build_critiques@toy_steps", default_only("critique", 0.7),
     "critiques/toy_steps", True),
    ({"grading": {"critic": {"enabled": True, "endpoint": "gpt-5-nano", "temperature": 0.3}}},
     f"build_grading_critic@{RUN}", default_only("grading.critic", 0.3), f"grading/critic/{RUN}", True),
    # DeepSeek's `thinking` sent to OpenAI would be answered with 400 for every call
    ({"endpoints": {"gpt-4o-mini": {"extra_body": THINKING}}, "critique": {"endpoint": "gpt-4o-mini"}},
     "build_critiques@toy_steps", unknown_field("gpt-4o-mini", "openai-chat"), "critiques/toy_steps", False),
    ({"endpoints": {"gpt-5-nano": {"extra_body": THINKING}}, "debate": {"endpoint": "gpt-5-nano", "temperature": 1}},
     "build_debate@toy", unknown_field("gpt-5-nano", "openai-reasoning"), "debates/toy", False),
    # an endpoint no method names is checked too: it is one edit away from being used
    ({"endpoints": {"gpt-4o-mini": {"extra_body": THINKING}}}, "check_params",
     unknown_field("gpt-4o-mini", "openai-chat"), None, False),
]


@pytest.fixture(scope="module")
def commands(project: tuple[Path, dict[str, SimServer]]) -> dict[str, list[str]]:
    """Each refusal's stage's command as dvc.yaml gives it, by the stage's address."""
    return {stage: stage_command(project[0], stage) for stage in {row[1] for row in REFUSALS}}


def refusal(root: Path, stage: str, through_dvc: bool, command: list[str], monkeypatch: pytest.MonkeyPatch,
            capsys: pytest.CaptureFixture[str]) -> subprocess.CompletedProcess:
    """`dvc repro <stage>`, or the stage's command run here as DVC runs it (no API key in the environment)."""
    if through_dvc:
        return dvc(root, "repro", stage, check=False)
    return run_script_here(root, root / command[0], command[1:], monkeypatch, capsys, env={"DVC_STAGE": stage},
                           without_api_keys=True)


@pytest.mark.parametrize(("change", "stage", "message", "folder", "through_dvc"), REFUSALS)
def test_a_setting_the_endpoints_provider_refuses_stops_before_any_request(
        project: tuple[Path, dict[str, SimServer]], commands: dict[str, list[str]], change: dict, stage: str,
        message: str, folder: str | None, through_dvc: bool, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    root, running = project
    before = requests(running)
    update_params(root, change)
    try:
        refused = refusal(root, stage, through_dvc, commands[stage], monkeypatch, capsys)
    finally:
        run(root, "git", "checkout", "--", "params.yaml")
    errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert refused.returncode != 0 and errors == [f"error: params.yaml: {message}"], refused.stdout + refused.stderr
    assert "Traceback" not in refused.stdout + refused.stderr
    assert not through_dvc or f"Running stage '{stage}'" in refused.stdout
    assert requests(running) == before and sum(sum(kinds.values()) for kinds in before.values()) == 0
    assert folder is None or not (root / folder).exists()


def test_the_agents_and_the_judge_each_call_their_own_endpoint_shaped_for_its_profile(
        project: tuple[Path, dict[str, SimServer]], tmp_path: Path) -> None:
    """Agents on gpt-4o-mini (openai-chat), the judge on gpt-5-nano (openai-reasoning: max_completion_tokens, no
    temperature): every call answered, none refused, each server asked only for its own kinds of call."""
    with servers() as running:
        root = copy_project(project[0], tmp_path / "project")
        update_params(root, {**pointed_at(running), "debate": {"endpoint": "gpt-4o-mini",
                                                               "judge_endpoint": "gpt-5-nano", "temperature": 1}})
        result = dvc(root, "repro", "build_debate@toy")
        asked = requests(running)
        outcomes = {endpoint: server.stats.snapshot()["outcomes"] for endpoint, server in running.items()}
    assert ("build_debate: agents on gpt-4o-mini (endpoint gpt-4o-mini, profile openai-chat as set); judge on "
            "gpt-5-nano (endpoint gpt-5-nano, profile openai-reasoning as set)") in result.stdout
    # each call stored was asked for once, of the server its endpoint names
    stored = Counter(record.kind for record in records(ledger(root / "debates" / "toy", judge_model="gpt-5-nano")))
    assert asked["gpt-4o-mini"] == Counter({kind: stored[kind] for kind in (ANSWER, REVISE) if stored[kind]})
    assert asked["gpt-5-nano"] == Counter({RANK: stored[RANK]}) and stored[RANK] > 0
    assert stored[ANSWER] >= 12 * 3 and not asked["deepseek"]
    assert set(outcomes["gpt-4o-mini"]) == set(outcomes["gpt-5-nano"]) == {"ok"}
