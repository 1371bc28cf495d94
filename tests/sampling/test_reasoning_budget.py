"""A reply whose whole budget went to hidden reasoning (tracevote.sampling.reasoning_budget): against the simulated
server playing OpenAI's reasoning models it is a ReasoningBudgetError naming the budget, the effort, what to raise
and what the reply cost, asked once (no retry pays for it again); a budget with room gets the answer."""

from __future__ import annotations

import dataclasses

import pytest

from tests.sampling.test_profiles import DEFAULT_ONLY, NOWHERE, PRICING, client, model, playing
from tracevote.core.config_endpoints import ModelConfig
from tracevote.core.errors import ReasoningBudgetError
from tracevote.critique.critic_prompt import CRITIC
from tracevote.sampling.client import ChatClient
from tracevote.sampling.ingest import Reply
from tracevote.sampling.reasoning_budget import all_reasoning, effort_lever

GRADE = [{"role": "user", "content": "Grade.\n<model_reasoning>\nSo 5.\n</model_reasoning>"}]


def endpoint(profile: str, effort: str | None, base_url: str = NOWHERE) -> ModelConfig:
    """The tests' endpoint of `profile` at `effort` (None: none sent), priced as gpt-5-nano is."""
    return dataclasses.replace(model(profile, base_url=base_url), reasoning_effort=effort, pricing=PRICING)


def priced_client(base_url: str, effort: str) -> ChatClient:
    return ChatClient(endpoint("openai-reasoning", effort, base_url), DEFAULT_ONLY, api_key=None, timeout_s=30,
                      max_retries=2)


@pytest.mark.parametrize(("reply", "profile", "effort", "spent"), [
    # OpenAI: empty content, cut for length, every completion token a reasoning token
    (Reply("", "length", 300, 0, 64, reasoning_tokens=64), "openai-reasoning", "high", True),
    (Reply("  \n", "length", 300, 0, 64, reasoning_tokens=64), "openai-reasoning", None, True),
    # an answer cut short, or an empty reply that stopped on its own: kept (scored or counted unparsable)
    (Reply('{"sco', "length", 300, 0, 64, reasoning_tokens=60), "openai-reasoning", "low", False),
    (Reply("", "stop", 300, 0, 40, reasoning_tokens=40), "openai-reasoning", "low", False),
    # a model without hidden reasoning that wrote nothing before its limit: not this error
    (Reply("", "length", 300, 0, 64), "openai-chat", None, False),
    # vLLM serving gpt-oss reports no reasoning tokens: an effort set and an empty reply cut for length is the same
    (Reply("", "length", 300, 0, 64), "local", "high", True),
    (Reply("", "length", 300, 0, 64), "local", None, False),
])
def test_what_counts_as_a_budget_spent_on_reasoning(reply: Reply, profile: str, effort: str | None,
                                                    spent: bool) -> None:
    assert all_reasoning(reply, endpoint(profile, effort)) is spent


@pytest.mark.parametrize(("profile", "effort", "lever"), [
    ("openai-reasoning", None, "or set endpoints.openai-reasoning.reasoning_effort lower (minimal or low)"),
    ("openai-reasoning", "high", "or set endpoints.openai-reasoning.reasoning_effort lower (low or medium)"),
    ("openai-reasoning", "low", "or set endpoints.openai-reasoning.reasoning_effort lower (minimal)"),
    ("local", "high", "or set endpoints.local.reasoning_effort lower (low or medium)"),
    ("openai-reasoning", "minimal", "(endpoints.openai-reasoning.reasoning_effort is already minimal, the lowest it "
                                    "takes)"),
    ("local", "low", "(endpoints.local.reasoning_effort is already low, the lowest it takes)"),
])
def test_the_error_names_the_efforts_below(profile: str, effort: str | None, lever: str) -> None:
    assert effort_lever(endpoint(profile, effort)) == lever


def test_a_budget_spent_on_hidden_reasoning_is_an_error_asked_once() -> None:
    with playing("openai-reasoning") as server, priced_client(server.base_url, "high") as tight:
        with pytest.raises(ReasoningBudgetError) as spent:
            tight.reply(GRADE, call_key="critic-1/0", kind=CRITIC, max_tokens=64)
        asked = server.stats.snapshot()["requests"]
    message = str(spent.value)
    assert message.startswith("endpoints.openai-reasoning (openai-reasoning-model) spent the whole budget of 64 "
                              "tokens (decoding.max_tokens) on hidden reasoning at reasoning_effort high and "
                              "answered nothing (call critic-1/0); that reply would cost $")
    cost = 64 * PRICING.output / 1e6  # the prompt's tokens on top
    assert float(message.split("cost $")[1].split(" ")[0]) > cost
    assert ("(64 output tokens) and is not kept. Raise decoding.max_tokens or set "
            "endpoints.openai-reasoning.reasoning_effort lower (low or medium), then run again: it asks again"
            ) in message
    assert asked == 1  # not retried: the same budget would be spent again


def test_a_budget_with_room_gets_the_answer() -> None:
    with playing("openai-reasoning") as server, client("openai-reasoning", DEFAULT_ONLY, base_url=server.base_url,
                                                       effort="low") as roomy:
        reply, _ = roomy.reply(GRADE, call_key="critic-1/0", kind=CRITIC, max_tokens=4096)
    assert reply.text and reply.finish_reason == "stop" and 0 < reply.reasoning_tokens < reply.completion_tokens
