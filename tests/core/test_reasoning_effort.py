"""endpoints.<key>.reasoning_effort: which profiles take which efforts (check_params's rule, applied again by the
client to a ModelConfig made in code), and the ledger settings it enters only when set."""

from __future__ import annotations

import pytest

from tracevote.core.config_endpoints import ModelConfig, SimConfig, require_effort, with_effort
from tracevote.core.errors import ConfigError
from tracevote.core.profiles import PROFILES

SIM = SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=120)


@pytest.mark.parametrize(("profile", "effort"), [
    ("openai-reasoning", "minimal"), ("openai-reasoning", "low"), ("openai-reasoning", "medium"),
    ("openai-reasoning", "high"), ("local", "low"), ("local", "high"),
    *[(profile, None) for profile in PROFILES],
])
def test_an_effort_the_profile_takes_passes(profile: str, effort: str | None) -> None:
    require_effort("endpoints.x", effort, PROFILES[profile])


@pytest.mark.parametrize(("profile", "effort", "says"), [
    ("local", "minimal", "endpoints.x.reasoning_effort: 'minimal' must be one of low, medium, high (what profile "
                         "local takes), or null"),
    ("deepseek", "high", "endpoints.x.reasoning_effort: 'high' must be null: profile deepseek takes no "
                         "reasoning_effort"),
    ("openai-chat", "low", "must be null: profile openai-chat takes no reasoning_effort"),
    ("llama-cpp-python", "high", "must be null: profile llama-cpp-python takes no reasoning_effort"),
])
def test_an_effort_the_profile_does_not_take_is_refused_in_one_line(profile: str, effort: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says.replace("(", r"\(").replace(")", r"\)")):
        require_effort("endpoints.x", effort, PROFILES[profile])


def model(effort: str | None) -> ModelConfig:
    return ModelConfig(backend="sim", base_url="http://127.0.0.1:9/v1", name="gpt-5-nano", extra_body={},
                       api_key_env="OPENAI_API_KEY", needs_key=False, sim=SIM, profile=PROFILES["openai-reasoning"],
                       endpoint="gpt-5-nano", reasoning_effort=effort)


def test_a_setting_holds_the_effort_only_when_one_is_set() -> None:
    """So a ledger made before the setting existed keeps its name, and changing the effort starts a new one."""
    assert with_effort({"model": "m"}, model(None)) == {"model": "m"}
    assert with_effort({"model": "m"}, model("low")) == {"model": "m", "reasoning_effort": "low"}
    assert with_effort({}, model("high"), key="judge_reasoning_effort") == {"judge_reasoning_effort": "high"}
