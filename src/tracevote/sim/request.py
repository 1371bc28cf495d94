"""What the simulated model accepts: a chat-completions request, checked the way the provider whose profile the
server plays checks it (DeepSeek by default; tracevote.core.profiles).

    parse_request({"model": "m", "messages": [{"role": "user", "content": "P"}], "top_logprobs": 5})
    -> SimRequestError("top_logprobs requires logprobs to be true"), status 400
    parse_request({"model": "gpt-5-nano", "messages": [...], "max_tokens": 512}, PROFILES["openai-reasoning"])
    -> SimRequestError("Unsupported parameter: 'max_tokens' is not supported with this model. Use
       'max_completion_tokens' instead."), status 400
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from tracevote.core.config_endpoints import PROFILE_EFFORTS
from tracevote.core.profiles import DEFAULT_TEMPERATURE, PROFILES, Profile
from tracevote.sim.formats import FormatError, checked_response_format

MAX_TOP_LOGPROBS = 20
# where a server's reasoning parser puts a reply's thinking (sim/split.py): SGLang's, DeepSeek's and older vLLM's
# field, or newer vLLM's
ReasoningField = Literal["reasoning_content", "reasoning"]
PROMPT_SUFFIX = "\n\nPlease reason"


class SimRequestError(ValueError):
    """The request is not one the simulated model accepts; `status` is the HTTP code a server returns."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class SimRequest:
    model: str
    prompt: str  # the last user message
    temperature: float
    max_tokens: int
    logprobs: bool
    top_logprobs: int
    response_format: dict[str, Any] | None = None  # checked as OpenAI checks it (sim/formats.py); None: free text
    reasoning: bool = False  # the profile reports hidden reasoning tokens (billed as output)
    reasoning_parser: ReasoningField | None = None  # the server splits a solve reply's thinking into this field
    reasoning_effort: str | None = None  # as sent; None: the model's default (sim/reasoning.py)


def problem_of(prompt: str) -> str:
    """The problem part of a prompt: "P\\n\\nPlease reason step by step, ..." -> "P"."""
    return prompt.split(PROMPT_SUFFIX, 1)[0].strip()


def parse_request(request: Mapping[str, Any], profile: Profile = PROFILES["deepseek"]) -> SimRequest:
    """Check a chat-completions request as `profile`'s provider does: 422 for wrong types, 400 for bad values,
    unknown fields, and what the profile does not take."""
    _check_profile(request, profile)
    prompt = _user_prompt(request.get("messages"))
    model = request.get("model")
    if not isinstance(model, str) or not model:
        raise SimRequestError("model: a model name is required", 400)
    temperature = _number(request, "temperature", 1.0)
    top_p = _number(request, "top_p", 1.0)  # checked, not modelled
    # OpenAI's chat models honour max_completion_tokens too (max_tokens is its deprecated alias): it wins when sent
    limit_field = "max_completion_tokens" if "max_completion_tokens" in request else profile.token_limit_field
    max_tokens = _integer(request, limit_field, 4096)
    top_logprobs = _integer(request, "top_logprobs", 0)
    logprobs = request.get("logprobs", False)
    if not isinstance(logprobs, bool):
        raise SimRequestError(f"logprobs: expected a boolean, got {logprobs!r}", 422)
    if not 0.0 <= temperature <= 2.0:
        raise SimRequestError(f"temperature: {temperature} is out of range [0, 2]")
    if not 0.0 < top_p <= 1.0:
        raise SimRequestError(f"top_p: {top_p} is out of range (0, 1]")
    if max_tokens < 1:
        raise SimRequestError(f"{limit_field}: {max_tokens} must be >= 1")
    if not 0 <= top_logprobs <= MAX_TOP_LOGPROBS:
        raise SimRequestError(f"top_logprobs: {top_logprobs} must be between 0 and {MAX_TOP_LOGPROBS}")
    if top_logprobs and not logprobs:
        raise SimRequestError("top_logprobs requires logprobs to be true")
    return SimRequest(model, prompt, temperature, max_tokens, logprobs, top_logprobs,
                      response_format=_response_format(request, profile), reasoning=profile.reasoning_tokens,
                      reasoning_effort=_reasoning_effort(request, profile))


def _check_profile(request: Mapping[str, Any], profile: Profile) -> None:
    """HTTP 400 where `profile`'s provider refuses: an unknown field (OpenAI's words), and for a reasoning model
    max_tokens, a non-default temperature or top_p, and logprobs (OpenAI's words)."""
    if profile.known_fields is not None:
        unknown = sorted(set(request) - profile.known_fields)
        if unknown:
            raise SimRequestError(f"Unrecognized request argument supplied: {unknown[0]}")
    if profile.token_limit_field == "max_completion_tokens" and "max_tokens" in request:
        raise SimRequestError("Unsupported parameter: 'max_tokens' is not supported with this model. "
                              "Use 'max_completion_tokens' instead.")
    if not profile.sampling_parameters:
        for key in ("temperature", "top_p"):
            if key in request and request[key] != DEFAULT_TEMPERATURE:
                raise SimRequestError(f"Unsupported value: '{key}' does not support {request[key]!r} with this "
                                      f"model. Only the default ({DEFAULT_TEMPERATURE:g}) value is supported.")
    if not profile.logprobs:
        for key in ("logprobs", "top_logprobs"):
            if request.get(key):
                raise SimRequestError(f"Unsupported parameter: '{key}' is not supported with this model.")



def _reasoning_effort(request: Mapping[str, Any], profile: Profile) -> str | None:
    """reasoning_effort as the profile's server checks it: OpenAI's reasoning models take minimal, low, medium and
    high (OpenAI's words for any other value), its chat models none; vLLM serving gpt-oss takes low, medium and
    high; DeepSeek and llama.cpp ignore it."""
    if "reasoning_effort" not in request:
        return None
    value = request["reasoning_effort"]
    takes = PROFILE_EFFORTS.get(profile.name)
    if profile.name == "openai-chat":
        raise SimRequestError("Unsupported parameter: 'reasoning_effort' is not supported with this model.")
    if takes is None:
        return None
    if value not in takes:
        listed = ", ".join(f"'{effort}'" for effort in takes[:-1]) + f", and '{takes[-1]}'"
        raise SimRequestError(f"Invalid value: {value!r}. Supported values are: {listed}.")
    return value


def _response_format(request: Mapping[str, Any], profile: Profile) -> dict[str, Any] | None:
    """The requested response_format, checked as OpenAI checks it (sim/formats.py); json_schema only where the
    profile has it (DeepSeek answers it with 400)."""
    value = request.get("response_format")
    if isinstance(value, dict) and value.get("type") == "json_schema" and profile.structured_output != "json_schema":
        raise SimRequestError("This response_format type is unavailable now")
    try:
        return checked_response_format(value)
    except FormatError as exc:
        raise SimRequestError(str(exc), exc.status) from None


def _user_prompt(messages: Any) -> str:
    if not isinstance(messages, list) or not messages:
        raise SimRequestError("messages: a non-empty list of messages is required", 400)
    users = [m.get("content") for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    if not users or not isinstance(users[-1], str):
        raise SimRequestError("messages: no user message with text content", 400)
    return users[-1]


def _number(request: Mapping[str, Any], key: str, default: float) -> float:
    value = request.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SimRequestError(f"{key}: expected a number, got {value!r}", 422)
    return float(value)


def _integer(request: Mapping[str, Any], key: str, default: int) -> int:
    value = request.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise SimRequestError(f"{key}: expected an integer, got {value!r}", 422)
    return value
