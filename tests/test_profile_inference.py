"""Issue 29 item 4: profiles a user can trust. A model name only OpenAI serves selects OpenAI's profile wherever it
is reached (a proxy, a gateway, Azure, loopback); the host decides only for names it does not know. Every paid
stage's opening line says each endpoint's profile and why, and a refusal's hints name the provider called, the
setting that applies (grading.critic.temperature, not decoding) and `profile:` where it would fix the refusal."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO_ROOT, committed_params_text
from tests.dvcproject import project_env, run
from tests.stage_here import run_stage_here
from tracevote.cli.demo import deep_merge, local_dataset, write_params
from tracevote.core.config_endpoints import SimConfig
from tracevote.core.profiles import infer_profile, inferred_profile
from tracevote.sim.model import SimModel
from tracevote.sim.server import ServerOptions, SimServer, start_server, stop_server

CANARY = "sk-canary-7d3a91"
N_ITEMS = 4
CRITIC_DIR = "grading/critic/toy_run"


@pytest.mark.parametrize(("base_url", "name", "profile", "why"), [
    # OpenAI's names decide wherever they are reached
    ("http://127.0.0.1:4000/v1", "gpt-5-nano", "openai-reasoning", "by its model name"),
    ("https://gateway.example.com/openai/v1", "o4-mini", "openai-reasoning", "by its model name"),
    ("https://team.openai.azure.com/openai/v1", "gpt-5.1", "openai-reasoning", "by its model name"),
    ("http://127.0.0.1:4000/v1", "gpt-4o-mini", "openai-chat", "by its model name"),
    ("https://gateway.example.com/v1", "gpt-4.1", "openai-chat", "by its model name"),
    ("https://gateway.example.com/v1", "gpt-4-turbo", "openai-chat", "by its model name"),
    ("https://gateway.example.com/v1", "gpt-5-chat-latest", "openai-chat", "by its model name"),
    ("https://api.openai.com/v1", "ft:gpt-4o-mini-2024-07-18:acme::x1", "openai-chat", "by its model name"),
    ("https://api.deepseek.com", "o3", "openai-reasoning", "by its model name"),
    # names it does not know: the host decides
    ("https://api.deepseek.com", "deepseek-v4-flash", "deepseek", "by its host api.deepseek.com"),
    ("https://api.openai.com/v1", "davinci-002", "openai-chat", "by its host api.openai.com"),
    ("https://team.openai.azure.com/openai/v1", "my-deployment", "openai-chat", "by its host team.openai.azure.com"),
    ("http://gpu1:8000/v1", "Qwen/Qwen3-8B", "local", "by its host gpu1 (no known provider's)"),
    # open-weight names that look like OpenAI's are vLLM's to serve
    ("http://gpu1:8000/v1", "gpt-oss-20b", "local", "by its host gpu1 (no known provider's)"),
    ("http://gpu1:8000/v1", "openai/gpt-oss-120b", "local", "by its host gpu1 (no known provider's)"),
    ("http://gpu1:8000/v1", "olmo-2-7b", "local", "by its host gpu1 (no known provider's)"),
])
def test_a_name_only_openai_serves_decides_and_the_host_decides_the_rest(base_url: str, name: str, profile: str,
                                                                         why: str) -> None:
    assert inferred_profile(base_url, name) == (profile, why)
    assert infer_profile(base_url, name) == profile


@pytest.fixture
def reasoning_server() -> Iterator[SimServer]:
    """A loopback server enforcing OpenAI's reasoning-model rules (max_completion_tokens only, the default
    temperature only, no logprobs, json_schema replies) and OpenAI's key."""
    server = start_server(SimModel(SimConfig(0, 1.0, 0.45, 120)),
                          options=ServerOptions(profile="openai-reasoning", api_key=CANARY))
    try:
        yield server
    finally:
        stop_server(server)


def critic_project(root: Path, base_url: str, **changes: Any) -> Path:
    """The shipped params.yaml with its gpt-5-nano endpoint pointed at `base_url` (a gateway trusted with the
    OpenAI key) and the grading critic on it, grading a small GSM8K-layout run; `changes` merged last."""
    root.mkdir(parents=True)
    raw = root / "toy_raw.jsonl"
    raw.write_text("".join(json.dumps({"question": f"What is {i} + 7?", "answer": f"{i} + 7 = {i + 7}\n#### {i + 7}"})
                           + "\n" for i in range(N_ITEMS)))
    (root / "predictions.jsonl").write_text("".join(json.dumps(
        {"id": f"toy_test_{i}", "thinking": f"Adding 7 to {i} gives {i + 7}.", "content": f"#### {i + 7}"}) + "\n"
        for i in range(N_ITEMS)))
    params = deep_merge(yaml.safe_load(committed_params_text()), {
        "model": {"backend": "openai"},
        "endpoints": {"gpt-5-nano": {"base_url": base_url, "allow_foreign_key": True}},
        "grading": {"critic": {"enabled": True, "endpoint": "gpt-5-nano", "temperature": 1.0, "max_samples": N_ITEMS,
                               "concurrency": 2},
                    "runs": {"toy_run": {"dataset": "toy", "predictions": "predictions.jsonl", "id_key": None}},
                    "workers": 1}})
    params["datasets"]["toy"] = local_dataset(raw, problem_key="question", answer_format="integer")
    write_params(root / "params.yaml", deep_merge(params, changes))
    run_stage_here(root, "normalize.py", "--dataset", "toy", "--raw", str(raw), "--out", "data/toy.jsonl")
    return root


def stage(root: Path, script: str, *args: str) -> subprocess.CompletedProcess:
    return run(root, sys.executable, str(REPO_ROOT / "stages" / script), *args,
               env=project_env({"OPENAI_API_KEY": CANARY}), check=False)


def build_critic(root: Path, *, as_process: bool = True) -> subprocess.CompletedProcess:
    """The stage as a process; in this process (not `as_process`) where the claim is its hint, not its process."""
    args = ("--run", "toy_run", "--gold", "data/toy.jsonl", "--critic", CRITIC_DIR)
    if as_process:
        return stage(root, "build_grading_critic.py", *args)
    return run_stage_here(root, "build_grading_critic.py", *args, check=False, env={"OPENAI_API_KEY": CANARY})


def test_the_critic_on_the_shipped_gpt5_nano_endpoint_behind_a_gateway_sends_no_refused_request(
        tmp_path: Path, reasoning_server: SimServer) -> None:
    root = critic_project(tmp_path / "gateway", reasoning_server.base_url)
    built = build_critic(root)
    assert built.returncode == 0, built.stdout + built.stderr
    assert ("model gpt-5-nano (endpoint gpt-5-nano, profile openai-reasoning by its model name)"
            in built.stdout)
    assert reasoning_server.stats.snapshot()["outcomes"] == {"ok": N_ITEMS}
    leaked = [path for path in root.rglob("*") if path.is_file() and CANARY.encode() in path.read_bytes()]
    assert leaked == []


def test_a_refusal_names_the_critics_settings_and_the_profile_that_fits(tmp_path: Path,
                                                                       reasoning_server: SimServer) -> None:
    """Set to the wrong profile (local: max_tokens and temperature 0), the server refuses; the one line says
    which settings sent it (grading.critic, not decoding), that the profile was set, and no DeepSeek hint."""
    root = critic_project(tmp_path / "wrong", reasoning_server.base_url,
                          endpoints={"gpt-5-nano": {"profile": "local"}}, grading={"critic": {"temperature": 0.0}})
    failed = build_critic(root)
    errors = [line for line in failed.stderr.splitlines() if line.startswith("error: ")]
    assert failed.returncode == 2 and len(errors) == 1, failed.stderr
    assert "HTTP 400" in errors[0]
    assert "Check grading.critic (temperature 0.0, max_tokens 4096)" in errors[0]
    assert "endpoints.gpt-5-nano (extra_body {}, profile local, reasoning_effort low)" in errors[0]
    assert "decoding" not in errors[0] and "DeepSeek" not in errors[0] and "deepseek" not in errors[0]
    assert ("The profile is local, as endpoints.gpt-5-nano.profile sets it; if the server is another provider's "
            "(OpenAI's behind a gateway, say), set endpoints.gpt-5-nano.profile: openai-reasoning") in errors[0]
    assert "Traceback" not in failed.stderr
    assert "400" in reasoning_server.stats.snapshot()["outcomes"]


def test_a_refusal_under_an_inferred_profile_suggests_the_profile_that_fits(tmp_path: Path) -> None:
    """A gateway to OpenAI under a name the project does not know (an alias): the host decides (local), the
    server refuses max_tokens, and the hint names `profile: openai-reasoning`."""
    server = start_server(SimModel(SimConfig(0, 1.0, 0.45, 120)), options=ServerOptions(profile="openai-reasoning"))
    try:
        root = critic_project(tmp_path / "alias", server.base_url, endpoints={"gpt-5-nano": {"name": "nano-alias"}},
                              grading={"critic": {"temperature": 1.0}})
        failed = build_critic(root, as_process=False)
    finally:
        stop_server(server)
    assert failed.returncode == 2, failed.stdout + failed.stderr
    assert "profile local by its host 127.0.0.1 (no known provider's)" in failed.stdout
    assert ("The profile local was inferred by its host 127.0.0.1 (no known provider's); if the server is another "
            "provider's (OpenAI's behind a gateway, say), set endpoints.gpt-5-nano.profile: openai-reasoning"
            in failed.stderr)


def test_a_404_on_an_openai_endpoint_gives_openais_hint(tmp_path: Path, reasoning_server: SimServer) -> None:
    root = critic_project(tmp_path / "404", reasoning_server.base_url + "/no/such/path")
    failed = build_critic(root, as_process=False)
    assert failed.returncode == 2, failed.stdout + failed.stderr
    assert "answered 404" in failed.stderr and "OpenAI's is https://api.openai.com/v1" in failed.stderr
    assert "DeepSeek" not in failed.stderr
