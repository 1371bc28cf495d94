"""The simulated model's hidden reasoning (tracevote.sim.reasoning): on the openai-reasoning profile a reply spends
reasoning tokens that grow with reasoning_effort, seeded per call, out of max_completion_tokens; a budget the
reasoning uses up returns empty content with finish_reason "length", as OpenAI's reasoning models do."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tracevote.core.config_endpoints import SimConfig
from tracevote.core.profiles import PROFILES
from tracevote.critique.critic_prompt import CRITIC
from tracevote.sim.model import SimModel
from tracevote.sim.reasoning import EFFORT_MEAN_TOKENS, hidden_tokens

SIM = SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=120)
CRITIC_PROMPT = "Grade.\n<model_reasoning>\nSo 10.\n</model_reasoning>"


def critic_reply(budget: int, effort: str | None, key: str, profile: str = "openai-reasoning") -> dict[str, Any]:
    request: dict[str, Any] = {"model": "gpt-5-nano", "messages": [{"role": "user", "content": CRITIC_PROMPT}],
                               PROFILES[profile].token_limit_field: budget}
    if effort is not None:
        request["reasoning_effort"] = effort
    return orjson.loads(SimModel(SIM).complete_bytes(request, key, kind=CRITIC, profile=PROFILES[profile]))


def test_more_effort_thinks_more_tokens_on_average() -> None:
    means = {effort: sum(hidden_tokens(effort, (0, f"k{i}")) for i in range(200)) / 200
             for effort in EFFORT_MEAN_TOKENS}
    assert means["minimal"] < means["low"] < means["medium"] < means["high"]
    for effort, mean in EFFORT_MEAN_TOKENS.items():
        assert 0.8 * mean < means[effort] < 1.2 * mean, (effort, means[effort])


def test_the_reasoning_is_seeded_per_call() -> None:
    assert hidden_tokens("low", (0, "a/0")) == hidden_tokens("low", (0, "a/0"))
    assert len({hidden_tokens("low", (0, f"a/{i}")) for i in range(20)}) > 10


@pytest.mark.parametrize("key", [f"critic-{i}/0" for i in range(8)])
def test_a_budget_with_room_gets_an_answer_and_reports_its_reasoning_tokens(key: str) -> None:
    body = critic_reply(4096, "low", key)
    usage, choice = body["usage"], body["choices"][0]
    hidden = usage["completion_tokens_details"]["reasoning_tokens"]
    assert choice["finish_reason"] == "stop" and choice["message"]["content"]
    assert 0 < hidden < usage["completion_tokens"] <= 4096
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


@pytest.mark.parametrize("key", [f"critic-{i}/0" for i in range(8)])
def test_a_budget_the_reasoning_uses_up_returns_empty_content_cut_for_length(key: str) -> None:
    body = critic_reply(64, "high", key)
    usage, choice = body["usage"], body["choices"][0]
    assert (choice["message"]["content"], choice["finish_reason"]) == ("", "length")
    assert usage["completion_tokens"] == usage["completion_tokens_details"]["reasoning_tokens"] == 64


def test_no_effort_sent_reasons_at_the_default_medium() -> None:
    """512 tokens, the critic's old budget: at the default effort most replies are empty (the issue's 4/4)."""
    empty = sum(critic_reply(512, None, f"critic-{i}/0")["choices"][0]["message"]["content"] == "" for i in range(20))
    assert empty >= 15


def test_a_profile_without_hidden_reasoning_spends_none() -> None:
    body = critic_reply(64, None, "critic-0/0", profile="openai-chat")
    assert body["choices"][0]["message"]["content"] and "completion_tokens_details" not in body["usage"]
