"""Issue 30 item 1: every paid stage, run alone as `dvc repro <stage>@<dataset>` runs it, refuses exactly what
check_params refuses, before any request: the same one line, a non-zero exit, nothing sent to the server.

Each stage's script runs in this process, with the command line dvc.yaml gives it and DVC_STAGE set as DVC sets it
(what made a stage narrow the problems to its declared keys); two rows also go through real `dvc repro`.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import FIXTURE_PARAMS
from tests.core.test_check_params import REFUSALS
from tests.dvcproject import copy_project, dvc, make_project, model_overrides, one_dataset
from tests.sim_servers import module_server, requests_by_key
from tests.stage_here import run_script_here
from tracevote.cli.demo import BUILTIN_PROBLEMS, local_dataset
from tracevote.core.config import load_params
from tracevote.core.config_endpoints import SimConfig
from tracevote.core.prompt_tokens import prompt_tokens
from tracevote.datasets.problems import load_problems
from tracevote.debate.context import agent_prompts
from tracevote.debate.protocol import Debate
from tracevote.sim.faults import parse_faults
from tracevote.sim.model import SimModel
from tracevote.sim.server import ServerOptions, running_server
from tracevote.store.calls import CallLedger

pytestmark = pytest.mark.slow

PAID_STAGES = ("build_pool@toy", "build_online@toy", "build_pool_model@toy-qwen", "build_debate@toy",
               "build_critiques@toy_steps", "build_grading_critic@gsm")
SIM = SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=60)
SECRET = "s3cret-pw"
DEEPSEEK_ENTRY = yaml.safe_load(FIXTURE_PARAMS.read_text(encoding="utf-8"))["endpoints"]["deepseek"]


def _base_url(url: str) -> dict[str, Any]:
    return {"endpoints": {"deepseek": {"base_url": url}}}


def _keyed(url: str | None, env: str = "DEEPSEEK_API_KEY") -> dict[str, Any]:
    """The endpoint at `url` (None: the test's loopback server) sent the key in `env`."""
    return {"endpoints": {"deepseek": {"api_key_env": env, "needs_key": True, **({"base_url": url} if url else {})}}}


# Issue 30's cases, on top of check_params's own table: typos that paid with a default, endpoint fields that
# ended in a traceback or paid, a key sent where it does not belong, and metadata addresses.
HOSTILE: list[tuple[dict[str, Any], str]] = [
    ({"debate": {"agnets": 6}}, "debate.agnets: unknown key (did you mean agents? known: agents,"),
    ({"pool": {"n_poll": 32}}, "pool.n_poll: unknown key (did you mean n_pool? known:"),
    ({"critique": {"n_vote": 8}}, "critique.n_vote: unknown key (did you mean n_votes? known:"),
    ({"endpoints": {"deepseek": {"pricing": {"outptu": 1.0}}}},
     "endpoints.deepseek.pricing.outptu: unknown key (did you mean output? known:"),
    (_base_url("file:///etc/passwd"),
     "endpoints.deepseek.base_url: 'file:///etc/passwd' must be an http(s) URL with a host"),
    (_base_url("ftp://example.com/v1"),
     "endpoints.deepseek.base_url: 'ftp://example.com/v1' must be an http(s) URL with a host"),
    (_base_url("api.deepseek.com"),
     "endpoints.deepseek.base_url: 'api.deepseek.com' must be an http(s) URL with a host"),
    (_base_url("http://"), "endpoints.deepseek.base_url: 'http://' must be an http(s) URL with a host"),
    (_base_url("http://127.0.0.1:port/v1"),
     "endpoints.deepseek.base_url: 'http://127.0.0.1:port/v1' must be an http(s) URL with a host"),
    ({"endpoints": {"a/b": DEEPSEEK_ENTRY}}, "endpoints.a/b.key: 'a/b' must be 1-64 letters"),
    ({"endpoints": {"deepseek": {"api_key_env": "MY KEY"}}},
     "endpoints.deepseek.api_key_env: 'MY KEY' must be an environment variable name"),
    # issue 30 item 3: link-local and cloud metadata addresses, whatever their spelling
    (_base_url("http://169.254.169.254/latest"),
     "base_url: 'http://169.254.169.254/latest' must be a model server, not a link-local address"),
    (_base_url("http://2852039166/v1"), "base_url: 'http://2852039166/v1' must be a model server, not a link-local"),
    (_base_url("http://[fd00:ec2::254]/v1"), "must be a model server, not a cloud metadata service's address"),
    (_base_url("http://[::ffff:169.254.169.254]/v1"), "must be a model server, not a link-local address"),
    (_base_url("http://metadata.google.internal/computeMetadata/v1"),
     "must be a model server, not a cloud metadata service's name"),
    # a provider's key goes to that provider's hosts only, over https
    (_keyed(None, "OPENAI_API_KEY"), "must be an https URL of openai.com: it would be sent $OPENAI_API_KEY"),
    (_keyed("https://api.deepseek.com.evil.example/v1"),
     "'https://api.deepseek.com.evil.example/v1' must be an https URL of deepseek.com"),
    (_keyed("http://api.deepseek.com"), "'http://api.deepseek.com' must be an https URL of deepseek.com"),
    (_keyed(f"https://me:{SECRET}@gateway.example/v1"),
     "'https://***@gateway.example/v1' must be an https URL of deepseek.com"),
]
ROWS = REFUSALS + HOSTILE


server = module_server(SIM)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, server: str) -> Path:
    """Every paid stage on the loopback server, with its inputs normalized: a valid params.yaml pays."""
    root = tmp_path_factory.mktemp("refusals")
    gsm = root / "gsm_raw.jsonl"
    gsm.write_text("".join(json.dumps({"question": f"What is {i} + 7?", "answer": f"{i} + 7 = {i + 7}\n#### {i + 7}"})
                           + "\n" for i in range(3)))
    predictions = root / "predictions.jsonl"
    predictions.write_text("".join(json.dumps({"id": f"gsm_test_{i}", "thinking": f"{i} plus 7 is {i + 7}.",
                                               "content": f"#### {i + 7}"}) + "\n" for i in range(3)))
    overrides = one_dataset("toy", BUILTIN_PROBLEMS)
    overrides["datasets"]["gsm"] = local_dataset(gsm, problem_key="question", answer_format="integer")
    overrides["grading"]["runs"] = {"gsm": {"dataset": "gsm", "predictions": str(predictions), "id_key": None}}
    params = {**overrides, **model_overrides(backend="openai", base_url=server, name="tracevote-sim",
                                             needs_key=False, extra_body={}, sim={"mean_tokens": 60}),
              "decoding": {"max_tokens": 200, "top_logprobs": 5}, "pool": {"n_pool": 2, "concurrency": 4},
              "eval": {"k": [1, 2], "repeat": 2}, "report": {"k": 2},
              "online": {"warmup": 1, "live": {"datasets": ["toy"], "methods": ["low"], "budget": 2}},
              "debate": {**overrides["debate"], "agents": 3, "problems": [0, 0], "max_tokens": 200},
              "critique": {**overrides["critique"], "n_votes": 1, "max_tokens": 200},
              "grading": {**overrides["grading"], "critic": {"enabled": True, "max_samples": 2}}}
    params["deepconf"] = {**overrides["deepconf"], "endpoints": ["qwen"]}  # a second model: build_pool_model
    params["endpoints"]["qwen"] = {**DEEPSEEK_ENTRY, "profile": "deepseek", "base_url": server, "name": "qwen-sim",
                                   "extra_body": {}, "api_key_env": "QWEN_API_KEY", "needs_key": False, "sim": None}
    project = make_project(root / "project", params)
    dvc(project, "repro", "normalize")
    return project


def stage_command(project: Path, stage: str) -> list[str]:
    """The stage's command as dvc.yaml gives it (`python stages/<script> --dataset toy ...`), without `python`."""
    from dvc.repo import Repo

    with Repo(str(project)) as repo:
        (found,) = repo.stage.collect(f"{project / 'dvc.yaml'}:{stage}")
    return shlex.split(found.cmd)[1:]


def run_stage_here(project: Path, stage: str, argv: list[str], monkeypatch: pytest.MonkeyPatch,
                   capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Run the stage's script in this process as `dvc repro <stage>` would: its exit code and stderr."""
    code, _, err = run_stage_output(project, stage, argv, monkeypatch, capsys)
    return code, err


def run_stage_output(project: Path, stage: str, argv: list[str], monkeypatch: pytest.MonkeyPatch,
                     capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """run_stage_here's exit code, with its stdout and stderr."""
    done = run_script_here(project, project / argv[0], argv[1:], monkeypatch, capsys, env={"DVC_STAGE": stage})
    return done.returncode, done.stdout, done.stderr


@pytest.fixture(scope="module")
def commands(project: Path) -> dict[str, list[str]]:
    return {stage: stage_command(project, stage) for stage in ("check_params", *PAID_STAGES)}


def sent(server: str) -> int:
    return sum(requests_by_key(server).values())


def write_changed(project: Path, change: dict[str, Any]) -> str:
    """params.yaml with `change` merged in; returns the text to restore."""
    from tracevote.cli.demo import deep_merge, write_params

    original = (project / "params.yaml").read_text(encoding="utf-8")
    write_params(project / "params.yaml", deep_merge(yaml.safe_load(original), change))
    return original


@pytest.mark.parametrize(("change", "message"), ROWS, ids=[f"row{i}" for i in range(len(ROWS))])
def test_every_paid_stage_refuses_what_check_params_refuses(
        project: Path, server: str, commands: dict[str, list[str]], change: dict[str, Any], message: str,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    before = sent(server)
    original = write_changed(project, change)
    try:
        code, line = run_stage_here(project, "check_params", commands["check_params"], monkeypatch, capsys)
        assert code == 2 and message in line, line
        assert line.startswith("error: params.yaml: ") and line.count("\n") == 1, line
        for stage in PAID_STAGES:
            assert run_stage_here(project, stage, commands[stage], monkeypatch, capsys) == (2, line), stage
    finally:
        (project / "params.yaml").write_text(original, encoding="utf-8")
    assert sent(server) == before
    assert SECRET not in line


@pytest.mark.parametrize(("stage", "change", "message"), [
    ("build_debate@toy", {"debate": {"agnets": 6}}, "debate.agnets: unknown key (did you mean agents?"),
    ("build_pool@toy", _base_url("file:///etc/passwd"),
     "endpoints.deepseek.base_url: 'file:///etc/passwd' must be an http(s) URL with a host"),
])
def test_dvc_repro_of_one_paid_stage_refuses_before_any_request(project: Path, server: str, stage: str,
                                                                change: dict[str, Any], message: str) -> None:
    before = sent(server)
    original = write_changed(project, change)
    try:
        failed = dvc(project, "repro", stage, check=False)
    finally:
        (project / "params.yaml").write_text(original, encoding="utf-8")
    output = failed.stdout + failed.stderr
    assert failed.returncode != 0
    assert f"Running stage '{stage}'" in output and f"error: params.yaml: {message}" in output
    assert "Traceback" not in output
    assert sent(server) == before


def test_with_valid_params_each_paid_stage_pays(project: Path, server: str, commands: dict[str, list[str]],
                                               tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """The control: the refusals above sent nothing because of the params, not because a stage cannot send. It
    pays in a copy, so the project the refusals run in stays unbuilt whatever order the tests run in."""
    paid = copy_project(project, tmp_path / "paid")
    for stage in PAID_STAGES:  # in dvc.yaml's order: the critic grades the pool build_pool makes
        before = sent(server)
        code, err = run_stage_here(paid, stage, commands[stage], monkeypatch, capsys)
        assert code == 0, f"{stage}: {err}"
        assert sent(server) > before, stage


def test_each_paid_stage_refuses_a_request_longer_than_its_window_before_any_request(
        project: Path, server: str, commands: dict[str, list[str]], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 43 item 1: a window too small for prompt + max_tokens is refused in one line naming the endpoint, the
    largest prompt, the window and what would fit; nothing is sent (the server would answer the calls)."""
    endpoints = yaml.safe_load((project / "params.yaml").read_text(encoding="utf-8"))["endpoints"]
    before = sent(server)
    original = write_changed(project, {"endpoints": {key: {"context_window": 250} for key in endpoints}})
    try:
        for stage in PAID_STAGES:
            code, err = run_stage_here(project, stage, commands[stage], monkeypatch, capsys)
            assert code == 2, f"{stage}: {err}"
            assert err.startswith("error: endpoint ") and err.count("\n") == 1, err
            assert "the largest prompt, " in err and "its context window 250 (as set in context_window)" in err, err
            assert "nothing was sent. Would fit: " in err, err
    finally:
        (project / "params.yaml").write_text(original, encoding="utf-8")
    assert sent(server) == before


def test_the_write_ups_gpt4_debate_is_refused_before_any_request(
        project: Path, server: str, commands: dict[str, list[str]], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 43: `... 0 0 gpt-4 gpt-4` (4 agents, three worked examples, max_tokens 3072) on gpt-4's 8,192 tokens:
    round 1 quotes four replies and cannot fit, so build_debate refuses with the line that says what would."""
    before = sent(server)
    original = write_changed(project, {"endpoints": {"deepseek": {"name": "gpt-4", "profile": "openai-chat"}},
                                       "debate": {"agents": 4, "max_tokens": 3072, "examples": "builtin_aime"}})
    try:
        code, err = run_stage_here(project, "build_debate@toy", commands["build_debate@toy"], monkeypatch, capsys)
    finally:
        (project / "params.yaml").write_text(original, encoding="utf-8")
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("error: endpoint deepseek (gpt-4): the largest prompt, toy-")
    assert "(debate round 1, quoting 4 replies of up to max_tokens)" in err
    assert "its context window 8,192 (gpt-4's documented window" in err and "Would fit: debate.max_tokens <= " in err
    assert sent(server) == before


def test_a_debate_whose_window_is_unknown_runs_to_its_end_recording_what_the_server_refused(
        project: Path, commands: dict[str, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 43 item 4: a server with a smaller window than anyone said (an unknown name: unchecked) refuses the
    rounds that quote replies; each such call is recorded as failed for context, the debate ends (those agents
    cast no vote), the stage exits 0 saying so, and a rerun sends nothing."""
    paid = copy_project(project, tmp_path / "paid")
    write_changed(paid, {"debate": {"problems": [0, 3]}})
    params = load_params(paid / "params.yaml")
    problems = load_problems(paid / "data" / "toy.jsonl")[:4]
    round0 = max(prompt_tokens(agent_prompts(Debate(problem, params.debate, params.answers))[0].messages,
                               "tracevote-sim").tokens for problem in problems)
    window = round0 + params.debate.max_tokens + 16  # round 0 fits; a round quoting replies does not
    argv = commands["build_debate@toy"]
    weak = SimModel(dataclasses.replace(SIM, accuracy=0.05))  # agents that rarely agree: the debates go on
    with running_server(weak, parse_faults(""), ServerOptions(context_window=window)) as small:
        write_changed(paid, _base_url(small))
        code, out, err = run_stage_output(paid, "build_debate@toy", argv, monkeypatch, capsys)
        assert code == 0, err
        assert "build_debate@toy: endpoint deepseek: largest prompt " in err  # said once: unchecked
        assert "context window unknown, unchecked (set endpoints.deepseek.context_window)" in err
        assert "  failed for context: " in out, out
        requested = sum(requests_by_key(small).values())
        assert run_stage_output(paid, "build_debate@toy", argv, monkeypatch, capsys)[0] == 0
        assert sum(requests_by_key(small).values()) == requested  # recorded: not asked again
    (ledger_root,) = (paid / "debates" / "toy").glob("tracevote-sim-*")
    ledger = CallLedger(ledger_root)
    stored = {(problem.id, str(key)): record for problem in problems
              for key, record in ledger.records(problem.id).items()}
    failed = [key for (_, key), record in stored.items() if record.failed_for_context]
    assert failed and not any(key.startswith("r0/") for key in failed), sorted(stored)
    assert json.loads((paid / "debates" / "toy.json").read_text())["finished"] == 4
    code, _, err = run_stage_output(paid, "score_debate", stage_command(paid, "score_debate"), monkeypatch, capsys)
    assert code == 0, err
    metrics = json.loads((paid / "metrics" / "debate.json").read_text())
    assert metrics["context_failed_calls"] == len(failed) and metrics["problems"] == 4  # shown as failed
