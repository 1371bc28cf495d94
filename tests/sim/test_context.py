"""Issue 43 items 4 and 6: the simulator refuses a request longer than its model's window, in each provider's own
shape; the client names that refusal (ContextLengthError); a ledger stage records that one call as failed for
context and goes on, and a rerun does not ask it again."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.sampling import toy_chain
from tests.sim_servers import requests_by_key
from tracevote.core.config_endpoints import SimConfig
from tracevote.core.errors import ContextLengthError
from tracevote.core.prompt_tokens import prompt_tokens
from tracevote.sampling.replies import paid_reply
from tracevote.sampling.runner import OneCall, run_calls
from tracevote.sim.faults import parse_faults
from tracevote.sim.model import SimModel
from tracevote.sim.server import ServerOptions, running_server
from tracevote.store.calls import Call, CallLedger

SIM = SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=60)
QUESTION = "Find the number of primes below 30.\n\nPlease reason step by step."


def post(base_url: str, model: str, content: str, **fields: Any) -> requests.Response:
    body = {"model": model, "messages": [{"role": "user", "content": content}], **fields}
    return requests.post(f"{base_url}/chat/completions", json=body, timeout=60)


# (profile, model name, server window, request fields, the error's code, words of the provider's message)
SHAPES = [
    ("openai-chat", "gpt-4", None, {"max_tokens": 8190}, "context_length_exceeded",
     "This model's maximum context length is 8192 tokens. However, you requested "),
    ("openai-chat", "gpt-4", None, {"max_tokens": 10}, None, None),  # fits: answered
    ("openai-reasoning", "gpt-5-nano", 64, {"max_completion_tokens": 100}, "context_length_exceeded",
     "This model's maximum context length is 64 tokens. However, you requested "),
    ("deepseek", "deepseek-v4-flash", 100, {"max_tokens": 10}, "invalid_request_error",
     "This model's maximum context length is 100 tokens. However, your messages resulted in "),
    ("local", "qwen-8b", 200, {"max_tokens": 190}, 400,
     "'max_tokens' or 'max_completion_tokens' is too large: 190. This model's maximum context length is 200 tokens "
     "and your request has "),
    # llama.cpp's server cuts max_tokens to fit and refuses only a prompt that fills the window
    ("llama-cpp-python", "tinymath", 200, {"max_tokens": 1000}, None, None),
    ("llama-cpp-python", "tinymath", 20, {"max_tokens": 10}, "context_length_exceeded",
     "This model's maximum context length is 20 tokens. However, you requested "),
]


@pytest.mark.parametrize(("profile", "model", "window", "fields", "code", "words"), SHAPES)
def test_each_profile_refuses_a_too_long_request_in_its_providers_shape(
        profile: str, model: str, window: int | None, fields: dict[str, Any], code: str | int | None,
        words: str | None) -> None:
    with running_server(SimModel(SIM), parse_faults(""), ServerOptions(profile=profile, context_window=window)) as url:
        response = post(url, model, QUESTION, **fields)
    if code is None:
        assert response.status_code == 200, response.text
        return
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == code and error["message"].startswith(words), error
    assert response.headers["X-Tracevote-Simulated"] == "1"


def test_the_simulator_counts_prompts_as_the_check_does() -> None:
    """A request at exactly the window is answered, one token more is refused: the same count as the estimate."""
    messages = [{"role": "user", "content": QUESTION}]
    prompt = prompt_tokens(messages, "gpt-4o").tokens
    with running_server(SimModel(SIM), parse_faults(""), ServerOptions(profile="openai-chat",
                                                                       context_window=prompt + 50)) as url:
        assert post(url, "gpt-4o", QUESTION, max_tokens=50).status_code == 200
        assert post(url, "gpt-4o", QUESTION, max_tokens=51).status_code == 400


def test_the_client_names_the_refusal_and_the_runner_records_it_and_goes_on(tmp_path: Path) -> None:
    """Each toy chain's second call quotes its first reply: with a window the first fits and the second does not,
    every chain records its second call as failed for context, the run ends normally, and a rerun asks nothing."""
    options = ServerOptions(profile="deepseek", context_window=460)
    with running_server(SimModel(SIM), parse_faults(""), options) as url:
        with toy_chain.client_for(url) as client:
            solve = toy_chain.chains(1)[0].next_call([])
            assert solve is not None
            too_long = dataclasses.replace(solve, messages=[{"role": "user", "content": "x" * 2000}])
            with pytest.raises(ContextLengthError) as refused:
                client.reply(too_long.messages, call_key="probe/1", kind="solve")
            assert refused.value.simulated and "maximum context length is 460 tokens" in str(refused.value)

        first = toy_chain.run(tmp_path / "ledger", url, 1)
        assert first.stored == 2 * toy_chain.N_PROBLEMS
        assert 0 < first.context_failed <= toy_chain.N_PROBLEMS, first.render()
        assert "failed for context: " in first.render()
        ledger = CallLedger(tmp_path / "ledger")
        failed = [record for item, _ in toy_chain.problems() for record in ledger.records(item).values()
                  if record.failed_for_context]
        assert len(failed) == first.context_failed and all(r.key.endswith("/check") for r in failed)
        assert all(r.text == "" and r.usd == 0 and r.simulated for r in failed)
        sent = sum(requests_by_key(url).values())
        again = toy_chain.run(tmp_path / "ledger", url, 1)
        assert (again.requested, again.replayed) == (0, 2 * toy_chain.N_PROBLEMS)
        assert sum(requests_by_key(url).values()) == sent


def test_a_pool_sample_refused_for_context_is_counted_and_the_run_goes_on(tmp_path: Path) -> None:
    """Outside a ledger of text replies (a trace pool), the refused call is counted by cause, not stored."""
    options = ServerOptions(profile="deepseek", context_window=300)
    calls = [Call("short", "0", "solve", [{"role": "user", "content": QUESTION}]),
             Call("long", "0", "solve", [{"role": "user", "content": "y" * 3000}])]
    ledger = CallLedger.open_at(tmp_path / "ledger", toy_chain.SETTING, simulated=True)
    with running_server(SimModel(SIM), parse_faults(""), options) as url, toy_chain.client_for(url) as client:
        def bare(call: Call):  # a caller that does not record the failure itself, as the pool's does not
            if call.item_id == "long":
                client.reply(call.messages, call_key="long/0", kind="solve")  # refused: ContextLengthError
            return paid_reply(client, call, toy_chain.PRICING)

        summary = run_calls(ledger, [OneCall(call) for call in calls], bare, concurrency=2)
    assert summary.stored == 1
    assert dict(summary.failures) == {"longer than the model's context window (HTTP 400)": 1}



@pytest.mark.parametrize("profile", ["deepseek", "openai-chat", "openai-reasoning", "local", "llama-cpp-python"])
def test_the_client_names_each_providers_refusal(profile: str) -> None:
    """Whatever the provider's words and code, the client raises ContextLengthError (not a generic 400)."""
    from tracevote.core.config_deepconf import DecodingConfig
    from tracevote.core.profiles import PROFILES
    from tracevote.sampling.client import ChatClient

    base = toy_chain.client_for("http://127.0.0.1:9/v1").model
    with running_server(SimModel(SIM), parse_faults(""), ServerOptions(profile=profile, context_window=50)) as url:
        model = dataclasses.replace(base, base_url=url, profile=PROFILES[profile])  # type: ignore[arg-type]
        temperature = 1.0 if profile == "openai-reasoning" else 0.6  # a reasoning model takes only the default
        decoding = DecodingConfig(temperature=temperature, top_p=None, max_tokens=10, top_logprobs=0)
        with (ChatClient(model, decoding, api_key=None, timeout_s=60, max_retries=1) as client,
              pytest.raises(ContextLengthError) as refused):
            client.reply([{"role": "user", "content": "z" * 400}], call_key="long/0", kind="solve")
    assert refused.value.status == 400 and "maximum context length is 50 tokens" in str(refused.value)
