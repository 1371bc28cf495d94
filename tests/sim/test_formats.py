"""The response formats the simulated model accepts: OpenAI's structured-output rules, checked per request."""

from __future__ import annotations

from typing import Any

import pytest

from tracevote.core.profiles import PROFILES
from tracevote.grading.critic import RESPONSE_FORMAT
from tracevote.sim.request import SimRequestError, parse_request

OPENAI_CHAT = PROFILES["openai-chat"]  # json_schema replies (DeepSeek refuses them: tests/sim/test_profiles.py)

SCORE = {"score": {"type": "number"}}


def request(response_format: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": "Grade this."}], "response_format": response_format}


def schema_format(schema: dict[str, Any], *, strict: Any = True, name: Any = "critic_score") -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": name, "strict": strict, "schema": schema}}


STRICT = {"type": "object", "properties": SCORE, "required": ["score"], "additionalProperties": False}


@pytest.mark.parametrize("response_format", [
    None,
    {"type": "text"},
    {"type": "json_object"},
    RESPONSE_FORMAT,  # the critic's
    schema_format({"type": "object", "properties": SCORE}, strict=False),  # not strict: no strict rules
    schema_format({"type": "object", "properties": {"a": {"type": "object", "properties": SCORE, "required": ["score"],
                                                           "additionalProperties": False}},
                   "required": ["a"], "additionalProperties": False}),
])
def test_accepted_formats_reach_the_request(response_format: Any) -> None:
    assert parse_request(request(response_format), OPENAI_CHAT).response_format == response_format


@pytest.mark.parametrize(("response_format", "status", "message"), [
    ("json", 422, "response_format: expected an object"),
    ({"type": "xml"}, 400, "response_format.type: 'xml' is not one of text, json_object, json_schema"),
    ({"type": "json_schema"}, 422, "response_format.json_schema: expected an object with name and schema"),
    (schema_format(STRICT, name="critic score"), 400, "json_schema.name: 'critic score' must be 1-64"),
    (schema_format(STRICT, strict="yes"), 422, "json_schema.strict: expected a boolean"),
    (schema_format({**STRICT, "type": "array"}), 400, "a strict schema's root must be of type 'object'"),
    (schema_format({k: v for k, v in STRICT.items() if k != "additionalProperties"}), 400,
     "'additionalProperties' is required to be supplied and to be false"),
    (schema_format({**STRICT, "required": []}), 400, "'required' must list every property (missing 'score')"),
    (schema_format({**STRICT, "properties": {"a": {"type": "object", "properties": SCORE}}, "required": ["a"]}),
     400, "json_schema.schema.properties.a: 'additionalProperties' is required"),
])
def test_refused_formats_name_the_field(response_format: Any, status: int, message: str) -> None:
    with pytest.raises(SimRequestError) as refused:
        parse_request(request(response_format), OPENAI_CHAT)
    assert refused.value.status == status and message in str(refused.value)
