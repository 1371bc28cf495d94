"""The simulator plays each provider profile: it refuses, with the provider's own status and words, what that
provider refuses, and answers what it accepts with a body in that provider's shape (OpenAI's reasoning models
report hidden reasoning tokens, billed inside completion_tokens and bounded by max_completion_tokens)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tracevote.core.config_endpoints import SimConfig
from tracevote.core.profiles import PROFILES, infer_profile
from tracevote.core.simulated import SOLVE
from tracevote.critique.critic_prompt import CRITIC
from tracevote.grading.critic import RESPONSE_FORMAT
from tracevote.sim.model import SimModel
from tracevote.sim.request import SimRequestError, parse_request

SIM = SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=120)
PROMPT = ("Find the number of primes below 30.\n\nPlease reason step by step, and put your final answer within "
          "\\boxed{}.")
THINKING = {"thinking": {"type": "disabled"}}  # DeepSeek's own field (params.yaml's deepseek endpoint sends it)
JSON_OBJECT = {"response_format": {"type": "json_object"}}
JSON_SCHEMA = {"response_format": RESPONSE_FORMAT}  # the grading critic's structured replies
UNRECOGNIZED = "Unrecognized request argument supplied: "
USE_MAX_COMPLETION = ("Unsupported parameter: 'max_tokens' is not supported with this model. "
                      "Use 'max_completion_tokens' instead.")
ONLY_DEFAULT = "with this model. Only the default (1) value is supported."
NOT_SUPPORTED = "is not supported with this model."


def request(**fields: Any) -> dict[str, Any]:
    """The least a chat-completions request carries, plus `fields`."""
    return {"model": "m", "messages": [{"role": "user", "content": PROMPT}], **fields}


REFUSED = [
    # (profile, request fields, status, what the error says)
    # OpenAI answers a field it does not document, such as DeepSeek's `thinking`, with 400
    ("openai-chat", THINKING, 400, f"{UNRECOGNIZED}thinking"),
    ("openai-reasoning", THINKING, 400, f"{UNRECOGNIZED}thinking"),
    ("openai-chat", {"chat_template_kwargs": {"enable_thinking": False}}, 400, f"{UNRECOGNIZED}chat_template_kwargs"),
    ("deepseek", {"top_k": 20}, 400, f"{UNRECOGNIZED}top_k"),  # vLLM's, not DeepSeek's
    # a reasoning model: max_completion_tokens, the default temperature and top_p, no logprobs
    ("openai-reasoning", {"max_tokens": 512}, 400, USE_MAX_COMPLETION),
    ("openai-reasoning", {"temperature": 0}, 400, f"'temperature' does not support 0 {ONLY_DEFAULT}"),
    ("openai-reasoning", {"temperature": 0.3}, 400, f"'temperature' does not support 0.3 {ONLY_DEFAULT}"),
    ("openai-reasoning", {"top_p": 0.9}, 400, f"Unsupported value: 'top_p' does not support 0.9 {ONLY_DEFAULT}"),
    ("openai-reasoning", {"logprobs": True}, 400, f"Unsupported parameter: 'logprobs' {NOT_SUPPORTED}"),
    ("openai-reasoning", {"logprobs": True, "top_logprobs": 5}, 400, "'logprobs' is not supported"),
    ("openai-reasoning", {"top_logprobs": 5}, 400, f"Unsupported parameter: 'top_logprobs' {NOT_SUPPORTED}"),
    # reasoning_effort: OpenAI's documented values on its reasoning models, none on its chat models; gpt-oss's three
    ("openai-reasoning", {"reasoning_effort": "extreme"}, 400,
     "Invalid value: 'extreme'. Supported values are: 'minimal', 'low', 'medium', and 'high'."),
    ("openai-chat", {"reasoning_effort": "low"}, 400, f"Unsupported parameter: 'reasoning_effort' {NOT_SUPPORTED}"),
    ("local", {"reasoning_effort": "minimal"}, 400, "Supported values are: 'low', 'medium', and 'high'."),
    # DeepSeek has json_object replies, not json_schema
    ("deepseek", JSON_SCHEMA, 400, "This response_format type is unavailable now"),
    # what every profile refuses is still refused under each
    ("local", {"temperature": 2.5}, 400, "temperature: 2.5 is out of range [0, 2]"),
    ("openai-reasoning", {"max_completion_tokens": 0}, 400, "max_completion_tokens: 0 must be >= 1"),
    ("openai-reasoning", {"max_completion_tokens": "512"}, 422, "max_completion_tokens: expected an integer"),
]


@pytest.mark.parametrize(("profile", "fields", "status", "message"), REFUSED)
def test_each_profile_refuses_what_its_provider_refuses(profile: str, fields: dict[str, Any], status: int,
                                                        message: str) -> None:
    with pytest.raises(SimRequestError) as refused:
        parse_request(request(**fields), PROFILES[profile])
    assert (refused.value.status, message in str(refused.value)) == (status, True), str(refused.value)


ACCEPTED = [
    # (profile, request fields): each as the provider accepts it
    ("deepseek", {**THINKING, "temperature": 0, "max_tokens": 300, "logprobs": True, "top_logprobs": 20}),
    ("deepseek", {**THINKING, **JSON_OBJECT, "temperature": 0.6, "top_p": 0.95}),
    ("openai-chat", {"temperature": 0.3, "top_p": 0.9, "max_tokens": 300, "logprobs": True, "top_logprobs": 20}),
    ("openai-chat", {"max_completion_tokens": 300, **JSON_SCHEMA}),  # chat models take the newer field too
    ("openai-chat", JSON_OBJECT),
    ("openai-reasoning", {}),  # no temperature: the default
    # a 300-token budget leaves room for an answer only at a low effort (the default, medium, thinks ~1,200)
    ("openai-reasoning", {"temperature": 1, "top_p": 1, "max_completion_tokens": 300, "reasoning_effort": "minimal"}),
    ("openai-reasoning", {"temperature": 1.0, "logprobs": False, "reasoning_effort": "low", **JSON_SCHEMA}),
    # vLLM, SGLang, llama.cpp ignore fields they do not know, DeepSeek's included
    ("local", {"chat_template_kwargs": {"enable_thinking": False}, "top_k": 20, **THINKING}),
    ("local", {"temperature": 0, "max_tokens": 300, "logprobs": True, "top_logprobs": 5, **JSON_SCHEMA}),
]


@pytest.mark.parametrize(("profile", "fields"), ACCEPTED)
def test_each_profile_accepts_and_answers_its_providers_requests(profile: str, fields: dict[str, Any]) -> None:
    played = PROFILES[profile]
    limit = fields.get(played.token_limit_field, 4096)
    body = orjson.loads(SimModel(SIM).complete_bytes(request(**fields), "p/0", profile=played))
    choice, usage = body["choices"][0], body["usage"]
    assert isinstance(choice["message"]["content"], str) and choice["message"]["content"]
    assert choice["finish_reason"] in ("stop", "length")
    assert (choice["logprobs"] is not None) == bool(fields.get("logprobs"))
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert 1 <= usage["completion_tokens"] <= limit
    if played.reasoning_tokens:  # hidden reasoning, billed as output: inside completion_tokens and the limit
        hidden = usage["completion_tokens_details"]["reasoning_tokens"]
        assert 0 < hidden < usage["completion_tokens"]
    else:
        assert "completion_tokens_details" not in usage


@pytest.mark.parametrize("max_completion_tokens", [40, 130, 4096])
def test_reasoning_tokens_stay_within_max_completion_tokens(max_completion_tokens: int) -> None:
    """Whatever the budget, a truncated trace (40) included, visible plus hidden never pass it."""
    model, reasoning = SimModel(SIM), PROFILES["openai-reasoning"]
    for key in range(12):
        body = orjson.loads(model.complete_bytes(request(max_completion_tokens=max_completion_tokens), f"p/{key}",
                                                 profile=reasoning))
        usage = body["usage"]
        hidden = usage["completion_tokens_details"]["reasoning_tokens"]
        assert 0 <= hidden <= usage["completion_tokens"] <= max_completion_tokens


@pytest.mark.parametrize(("profile", "fields", "structured"), [
    ("openai-chat", JSON_SCHEMA, True),
    ("openai-reasoning", JSON_SCHEMA, True),
    ("local", JSON_SCHEMA, True),
    ("deepseek", {}, False),  # free text, a verdict line after the filler
])
def test_the_critic_gets_a_bare_score_object_where_the_profile_has_json_schema(profile: str, fields: dict[str, Any],
                                                                               structured: bool) -> None:
    critic = request(**fields)
    critic["messages"] = [{"role": "user", "content": "Grade.\n<model_reasoning>\nSo 10.\n</model_reasoning>"}]
    body = orjson.loads(SimModel(SIM).complete_bytes(critic, "critic-1/0", kind=CRITIC, profile=PROFILES[profile]))
    text = body["choices"][0]["message"]["content"]
    assert (set(orjson.loads(text)) == {"score"}) if structured else text.startswith("I compared the reasoning")


def test_every_profile_is_played_by_the_same_model() -> None:
    """Only the provider's rules differ: the visible reply to one call is the same under every profile."""
    texts = {name: orjson.loads(SimModel(SIM).complete_bytes(request(), "p/3", kind=SOLVE, profile=profile))
             ["choices"][0]["message"]["content"] for name, profile in PROFILES.items()}
    assert len(set(texts.values())) == 1, texts


@pytest.mark.parametrize(("base_url", "name", "profile"), [
    ("https://api.deepseek.com", "deepseek-v4-flash", "deepseek"),
    ("https://api.deepseek.com/v1", "deepseek-reasoner", "deepseek"),
    ("https://API.DeepSeek.com", "deepseek-chat", "deepseek"),  # host names are case-insensitive
    ("https://api.openai.com/v1", "gpt-4o-mini", "openai-chat"),
    ("https://api.openai.com/v1", "gpt-4.1", "openai-chat"),
    ("https://api.openai.com/v1", "gpt-4o", "openai-chat"),
    ("https://api.openai.com/v1", "gpt-5-nano", "openai-reasoning"),
    ("https://api.openai.com/v1", "gpt-5", "openai-reasoning"),
    ("https://api.openai.com/v1", "GPT-5-mini", "openai-reasoning"),
    ("https://api.openai.com/v1", "o1", "openai-reasoning"),
    ("https://api.openai.com/v1", "o3-mini", "openai-reasoning"),
    ("https://api.openai.com/v1", "o4-mini", "openai-reasoning"),
    ("https://eu.api.openai.com/v1", "gpt-5-nano", "openai-reasoning"),  # a regional host of OpenAI's
    # a name only OpenAI serves picks OpenAI's profile wherever it is reached (a proxy, a gateway, a look-alike)
    ("http://127.0.0.1:8000/v1", "gpt-5-nano", "openai-reasoning"),
    ("https://api.openai.com.example.net/v1", "gpt-5-nano", "openai-reasoning"),
    # other names: the host says who serves it (open weights run anywhere)
    ("http://gpu1:8000/v1", "Qwen/Qwen3-8B", "local"),
    ("http://localhost:30000/v1", "deepseek-v4-flash", "local"),
    ("https://openrouter.ai/api/v1", "openai/gpt-5-nano", "local"),
    ("https://notdeepseek.com", "deepseek-v4-flash", "local"),
])
def test_infer_profile(base_url: str, name: str, profile: str) -> None:
    assert infer_profile(base_url, name) == profile


@pytest.mark.parametrize("profile", ["openai-chat", "local", "deepseek"])
def test_max_completion_tokens_bounds_a_chat_model_too(profile: str) -> None:
    """OpenAI's chat models honour max_completion_tokens (max_tokens is its deprecated alias): sent, it wins."""
    model = SimModel(SIM)
    for key in range(12):
        body = orjson.loads(model.complete_bytes(request(max_completion_tokens=30, max_tokens=4096), f"p/{key}",
                                                 profile=PROFILES[profile]))
        assert body["usage"]["completion_tokens"] <= 30
