"""The client shapes each request for its endpoint's provider profile: the exact bodies it builds, each accepted
by the loopback simulator playing that profile, the wrong shape refused there with 400 and never retried, and
a reasoning model's hidden tokens carried into the ledger's CallRecord."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from tests.sim_servers import recording_server
from tracevote.core.config_deepconf import DecodingConfig
from tracevote.core.config_endpoints import ModelConfig, PricingConfig, SimConfig
from tracevote.core.errors import ConfigError, FatalAPIError
from tracevote.core.profiles import PROFILES
from tracevote.critique.critic_prompt import CRITIC
from tracevote.grading.critic import RESPONSE_FORMAT
from tracevote.sampling.client import ChatClient
from tracevote.sampling.replies import paid_reply
from tracevote.sampling.runner import Paid
from tracevote.sampling.stream import stream_completion
from tracevote.sim.model import SimModel
from tracevote.sim.server import ServerOptions, SimServer, start_server, stop_server
from tracevote.store import calls
from tracevote.store.calls import Call, CallRecord

SIM = SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=60)
PRICING = PricingConfig(checked="2026-03", input_cache_miss=0.05, input_cache_hit=0.005, output=0.40)
MESSAGES = [{"role": "user", "content": "What is 2 + 3?\n\nPlease reason step by step, and put your final answer "
                                        "within \\boxed{}."}]
THINKING = {"thinking": {"type": "disabled"}}
VLLM = {"chat_template_kwargs": {"enable_thinking": False}}  # a field only a local server knows
SAMPLING = DecodingConfig(temperature=0.6, top_p=0.95, max_tokens=128, top_logprobs=20)  # a pool's
TEXT = DecodingConfig(temperature=0.3, top_p=None, max_tokens=128, top_logprobs=0)  # a debate's, a critique's
DEFAULT_ONLY = DecodingConfig(temperature=1.0, top_p=None, max_tokens=128, top_logprobs=0)  # on a reasoning model
# the extra_body each profile's endpoint carries in the tests below: what its provider (and only it) knows
EXTRA_BODY = {"deepseek": THINKING, "openai-chat": {}, "openai-reasoning": {}, "local": VLLM, "llama-cpp-python": {}}
# a reasoning model's effort: at its default (medium) it thinks past the tests' small budgets and answers nothing
EFFORT = {"openai-reasoning": "minimal"}
NOWHERE = "http://127.0.0.1:9/v1"  # request_body sends nothing


def model(profile: str, extra_body: dict[str, Any] | None = None, base_url: str = NOWHERE,
          effort: str | None = None) -> ModelConfig:
    return ModelConfig(backend="openai", base_url=base_url, name=f"{profile}-model",
                       extra_body=EXTRA_BODY[profile] if extra_body is None else extra_body, api_key_env="KEY",
                       needs_key=False, sim=SIM, profile=PROFILES[profile], endpoint=profile,
                       reasoning_effort=effort or EFFORT.get(profile))


def client(profile: str, decoding: DecodingConfig, *, base_url: str = NOWHERE,
           extra_body: dict[str, Any] | None = None, effort: str | None = None) -> ChatClient:
    return ChatClient(model(profile, extra_body, base_url, effort), decoding, api_key=None, timeout_s=30,
                      max_retries=2)


LOGPROBS = {"logprobs": True, "top_logprobs": 20}
MINIMAL = {"reasoning_effort": "minimal"}
BODIES = [
    # (profile, decoding, request_body's arguments, the body after model and messages, keys in order)
    ("deepseek", SAMPLING, {}, {"temperature": 0.6, "max_tokens": 128, **LOGPROBS, "top_p": 0.95, **THINKING}),
    ("deepseek", TEXT, {"logprobs": False, "max_tokens": 64}, {"temperature": 0.3, "max_tokens": 64, **THINKING}),
    # DeepSeek has json_object replies: a response_format goes in before the endpoint's own fields
    ("deepseek", TEXT, {"logprobs": False, "extra": {"response_format": {"type": "json_object"}}},
     {"temperature": 0.3, "max_tokens": 128, "response_format": {"type": "json_object"}, **THINKING}),
    ("openai-chat", SAMPLING, {}, {"temperature": 0.6, "max_tokens": 128, **LOGPROBS, "top_p": 0.95}),
    ("openai-chat", TEXT, {"logprobs": False, "extra": {"response_format": RESPONSE_FORMAT}},
     {"temperature": 0.3, "max_tokens": 128, "response_format": RESPONSE_FORMAT}),
    # a reasoning model: max_completion_tokens, and no temperature or top_p at all (only the default is accepted)
    # and the endpoint's reasoning_effort
    ("openai-reasoning", DEFAULT_ONLY, {"logprobs": False}, {"max_completion_tokens": 128, **MINIMAL}),
    ("openai-reasoning", DEFAULT_ONLY, {"logprobs": False, "max_tokens": 64},
     {"max_completion_tokens": 64, **MINIMAL}),
    ("openai-reasoning", DEFAULT_ONLY, {"logprobs": False, "extra": {"response_format": RESPONSE_FORMAT}},
     {"max_completion_tokens": 128, **MINIMAL, "response_format": RESPONSE_FORMAT}),
    ("local", SAMPLING, {}, {"temperature": 0.6, "max_tokens": 128, **LOGPROBS, "top_p": 0.95, **VLLM}),
    ("local", TEXT, {"logprobs": False}, {"temperature": 0.3, "max_tokens": 128, **VLLM}),
]


@pytest.mark.parametrize(("profile", "decoding", "arguments", "expected"), BODIES)
def test_request_body_for_each_profile(profile: str, decoding: DecodingConfig, arguments: dict[str, Any],
                                       expected: dict[str, Any]) -> None:
    body = client(profile, decoding).request_body(MESSAGES, **arguments)
    assert list(body) == ["model", "messages", *expected]  # the order too: what goes over the wire is reproducible
    assert body == {"model": f"{profile}-model", "messages": MESSAGES, **expected}


def test_a_call_that_needs_logprobs_is_refused_before_it_reaches_a_reasoning_model() -> None:
    with pytest.raises(ConfigError, match=r"endpoint openai-reasoning \(openai-reasoning-model, profile "
                                          r"openai-reasoning\) returns no logprobs; a call that needs them cannot"):
        client("openai-reasoning", DEFAULT_ONLY).request_body(MESSAGES)


def test_a_reasoning_model_refuses_top_logprobs_in_the_decoding_before_any_request() -> None:
    with pytest.raises(ConfigError, match=r"decoding.top_logprobs: 5 must be 0-0 \(the most openai-reasoning-model, "
                                          r"profile openai-reasoning, returns\)"):
        client("openai-reasoning", DecodingConfig(temperature=1.0, top_p=None, max_tokens=128, top_logprobs=5))


@contextlib.contextmanager
def playing(profile: str) -> Iterator[SimServer]:
    """A loopback simulated server enforcing `profile`'s rules."""
    server = start_server(SimModel(SIM, answers={MESSAGES[0]["content"].split("\n\n")[0]: 5}),
                          options=ServerOptions(profile=profile))
    try:
        yield server
    finally:
        stop_server(server)


def outcomes(server: SimServer) -> dict[str, int]:
    return server.stats.snapshot()["outcomes"]


@pytest.mark.parametrize("profile", list(PROFILES))
def test_the_clients_own_requests_are_accepted_by_the_profile_it_was_built_for(profile: str) -> None:
    """Text calls (debate, critique), structured critic calls where the profile has json_schema, and sampled
    traces with logprobs where it has logprobs: each answered 200, none refused."""
    played = PROFILES[profile]
    decoding = SAMPLING if played.logprobs else DEFAULT_ONLY
    text_decoding = TEXT if played.sampling_parameters else DEFAULT_ONLY
    with playing(profile) as server:
        with client(profile, text_decoding, base_url=server.base_url) as text:
            reply, _ = text.reply(MESSAGES, call_key="p/text", kind="solve", max_tokens=96)
            assert reply.simulated and reply.text and reply.completion_tokens <= 96
            if played.structured_output == "json_schema":
                structured = [{"role": "user", "content": "Grade.\n<model_reasoning>\n5\n</model_reasoning>"}]
                scored, _ = text.reply(structured, call_key="c/0", kind=CRITIC, extra={"response_format":
                                                                                      RESPONSE_FORMAT})
                assert scored.text.startswith('{"score":')
        if played.logprobs:
            with client(profile, decoding, base_url=server.base_url) as sampler:
                sample = sampler.sample(MESSAGES, problem_id="p", sample_id=0, keep_top_logprobs=True)
                assert sample.top_logprobs is not None and sample.top_logprobs.shape[1] == 20
        assert set(outcomes(server)) == {"ok"}


REFUSALS = [
    # (the profile the client was built for, its extra_body, the profile the server plays, what the server says)
    # a DeepSeek-shaped body at OpenAI: `thinking` is the first thing refused, then max_tokens and temperature
    ("deepseek", THINKING, "openai-reasoning", "Unrecognized request argument supplied: thinking"),
    ("deepseek", {}, "openai-reasoning", "Use 'max_completion_tokens' instead"),
    ("openai-chat", {}, "openai-reasoning", "Use 'max_completion_tokens' instead"),
    ("deepseek", THINKING, "openai-chat", "Unrecognized request argument supplied: thinking"),
    ("local", VLLM, "openai-chat", "Unrecognized request argument supplied: chat_template_kwargs"),
    ("local", VLLM, "deepseek", "Unrecognized request argument supplied: chat_template_kwargs"),
]


@pytest.mark.parametrize(("built_for", "extra_body", "server_plays", "says"), REFUSALS)
def test_a_body_shaped_for_another_provider_is_refused_with_400_and_not_retried(
        built_for: str, extra_body: dict[str, Any], server_plays: str, says: str) -> None:
    with playing(server_plays) as server, client(built_for, TEXT, base_url=server.base_url,
                                                 extra_body=extra_body) as wrong:
        with pytest.raises(FatalAPIError) as refused:
            wrong.reply(MESSAGES, call_key="p/0", kind="solve")
        assert refused.value.status == 400 and says in str(refused.value)
        assert f"profile {built_for}" in str(refused.value)  # the message points at the profile setting
        assert outcomes(server) == {"400": 1}  # one request: a 400 is not worth asking again


# a DeepSeek-shaped body sent by hand to a reasoning model, mended one field at a time: each mend meets the next
# refusal, in OpenAI's order, until the body is one a reasoning model takes
DEEPSEEK_SHAPED = {"max_tokens": 512, "temperature": 0, **THINKING}
MENDED = [
    (DEEPSEEK_SHAPED, 400, "Unrecognized request argument supplied: thinking"),
    ({"max_tokens": 512, "temperature": 0}, 400,
     "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."),
    ({"max_completion_tokens": 512, "temperature": 0}, 400,
     "Unsupported value: 'temperature' does not support 0 with this model. Only the default (1) value is supported."),
    ({"max_completion_tokens": 512}, 200, None),
]


@pytest.mark.parametrize(("fields", "status", "message"), MENDED)
def test_a_deepseek_shaped_body_is_refused_by_a_reasoning_model_until_mended(fields: dict[str, Any], status: int,
                                                                            message: str | None) -> None:
    with playing("openai-reasoning") as server:
        answer = requests.post(f"{server.base_url}/v1/chat/completions",
                               json={"model": "gpt-5-nano", "messages": MESSAGES, **fields}, timeout=30)
    assert answer.status_code == status
    if message is not None:
        assert answer.json()["error"] == {"message": message, "type": "invalid_request_error", "param": None,
                                          "code": "invalid_request_error"}


@pytest.mark.parametrize(("profile", "hidden"), [
    ("openai-reasoning", True),
    ("openai-chat", False),
    ("deepseek", False),
    ("local", False),
])
def test_reasoning_tokens_flow_into_the_call_record(profile: str, hidden: bool) -> None:
    decoding = TEXT if PROFILES[profile].sampling_parameters else DEFAULT_ONLY
    call = Call(item_id="p", key="r0/a0", kind="solve", messages=MESSAGES, max_tokens=96)
    with playing(profile) as server, client(profile, decoding, base_url=server.base_url) as text:
        paid: Paid[CallRecord] = paid_reply(text, call, PRICING)
    record = paid.reply
    assert calls.decode(paid.payload) == record  # the ledger stores exactly this record
    assert (record.reasoning_tokens > 0) == hidden
    # hidden reasoning is output: inside completion_tokens, within the limit, and priced as output
    assert record.reasoning_tokens < record.completion_tokens <= 96
    assert paid.completion_tokens == record.completion_tokens
    assert record.usd == pytest.approx((record.prompt_tokens * 0.05 + record.completion_tokens * 0.40) / 1e6)


@pytest.mark.parametrize("profile", ["deepseek", "openai-chat", "local"])
def test_a_decoding_seed_sends_one_repeatable_seed_per_trace_where_sampling_parameters_are_taken(profile: str) -> None:
    seeded = client(profile, dataclasses.replace(SAMPLING, seed=7))
    first, again = (seeded.request_body(MESSAGES, sample_key="p-00/0") for _ in range(2))
    other = seeded.request_body(MESSAGES, sample_key="p-00/1")
    assert first["seed"] == again["seed"] != other["seed"]
    assert 0 <= first["seed"] < 2**31
    assert "seed" not in client(profile, SAMPLING).request_body(MESSAGES, sample_key="p-00/0")


def test_the_seed_sent_changes_with_decoding_seed_and_stays_with_it_on_the_wire() -> None:
    """decoding.seed is mixed into each trace's seed: another decoding.seed sends another seed for the same trace (a
    repeat of a study under a new seed draws new traces from an engine that honours it), the same one the same
    seed, both in a pool's request and in a live run's stream; read from the bodies the server received."""
    keys = ("p-00/0", "p-00/1")
    with recording_server(SIM) as server:
        for seed in (7, 7, 8):
            with client("deepseek", dataclasses.replace(SAMPLING, seed=seed), base_url=server.base_url) as sampler:
                for key in keys:
                    problem_id, sample_id = key.split("/")
                    sampler.sample(MESSAGES, problem_id=problem_id, sample_id=int(sample_id), keep_top_logprobs=False)
                    stream_completion(sampler, MESSAGES, sample_key=key, keep_top_logprobs=False)
        sent = [body["seed"] for body in server.bodies]
    assert len(sent) == 3 * 2 * 2
    by_seed = [sent[i:i + 4] for i in range(0, 12, 4)]  # per decoding.seed: each key, pooled then streamed
    for seeds in by_seed:
        assert seeds[0] == seeds[1] != seeds[2] == seeds[3]  # a trace's seed, whichever way it is asked for
    assert by_seed[0] == by_seed[1]  # the same decoding.seed: the same seeds
    assert not set(by_seed[0]) & set(by_seed[2])  # another decoding.seed: another seed for every trace


def test_a_reasoning_model_gets_no_seed_as_it_gets_no_temperature() -> None:
    seeded = client("openai-reasoning", dataclasses.replace(DEFAULT_ONLY, seed=7))
    assert "seed" not in seeded.request_body(MESSAGES, logprobs=False, sample_key="p-00/0")
