"""The response formats the simulated model accepts, checked as OpenAI checks structured outputs.

    checked_response_format({"type": "json_schema", "json_schema": {"name": "s", "strict": True,
        "schema": {"type": "object", "properties": {"score": {"type": "number"}}, "additionalProperties": False}}})
    -> FormatError("response_format.json_schema.schema: 'required' must list every property (missing 'score')")

Absent (or null) is free text. A strict schema follows OpenAI's rules for every object in it: each property
required, and additionalProperties false. The sim checks what a request asks for; what a kind of call answers
to a schema is the kind's business (the grading critic answers ``{"score": x}``).
"""

from __future__ import annotations

import re
from typing import Any

FORMAT_TYPES = ("text", "json_object", "json_schema")
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class FormatError(ValueError):
    """A response_format the server refuses; `status` is the HTTP code (422 for a wrong type, 400 otherwise)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def checked_response_format(value: Any) -> dict[str, Any] | None:
    """The request's response_format when it is one OpenAI accepts; None when absent."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise FormatError(f"response_format: expected an object, got {value!r}", 422)
    if value.get("type") not in FORMAT_TYPES:
        raise FormatError(f"response_format.type: {value.get('type')!r} is not one of {', '.join(FORMAT_TYPES)}")
    if value["type"] == "json_schema":
        _check_json_schema(value.get("json_schema"))
    return value


def json_schema_of(response_format: dict[str, Any] | None) -> dict[str, Any] | None:
    """The schema a checked response_format asks the reply to follow, or None (free text, or any JSON object)."""
    if response_format is None or response_format["type"] != "json_schema":
        return None
    return response_format["json_schema"]["schema"]


def _check_json_schema(spec: Any) -> None:
    where = "response_format.json_schema"
    if not isinstance(spec, dict):
        raise FormatError(f"{where}: expected an object with name and schema, got {spec!r}", 422)
    name, schema, strict = spec.get("name"), spec.get("schema"), spec.get("strict", False)
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise FormatError(f"{where}.name: {name!r} must be 1-64 letters, digits, '_' or '-'")
    if not isinstance(schema, dict):
        raise FormatError(f"{where}.schema: expected a JSON schema object, got {schema!r}", 422)
    if not isinstance(strict, bool):
        raise FormatError(f"{where}.strict: expected a boolean, got {strict!r}", 422)
    if strict:
        if schema.get("type") != "object":
            raise FormatError(f"{where}.schema: a strict schema's root must be of type 'object'")
        _check_strict_object(schema, f"{where}.schema")


def _check_strict_object(schema: dict[str, Any], where: str) -> None:
    """OpenAI's strict mode: every property required, no other properties, the same for nested objects."""
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        raise FormatError(f"{where}.properties: expected an object, got {properties!r}", 422)
    if schema.get("additionalProperties") is not False:
        raise FormatError(f"{where}: 'additionalProperties' is required to be supplied and to be false")
    required = schema.get("required", [])
    missing = [key for key in properties if not isinstance(required, list) or key not in required]
    if missing:
        raise FormatError(f"{where}: 'required' must list every property (missing {missing[0]!r})")
    for key, sub in properties.items():
        if isinstance(sub, dict) and sub.get("type") == "object":
            _check_strict_object(sub, f"{where}.properties.{key}")
