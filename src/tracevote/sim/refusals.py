"""What the simulator's server refuses, in DeepSeek's order of checks and its error shape
({"error": {"message", "type", "param", "code"}}): a wrong key, no balance, an unknown kind of call, a bad
body or parameter, a top-k over the server's cap, `n` where refused, a model outside the allow-list, a
prompt past the context window."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from tracevote.core.profiles import PROFILES
from tracevote.sim.context import context_refusal
from tracevote.sim.kinds import KNOWN_KINDS, UnknownKindError
from tracevote.sim.nchoices import N_REFUSED, requested_n
from tracevote.sim.request import SimRequestError, parse_request
from tracevote.sim.stream import stream_request

if TYPE_CHECKING:
    from tracevote.sim.server import ServerOptions


def check_request(options: ServerOptions, authorization: str | None, kind: str,
                   body: bytes) -> tuple[dict[str, Any], tuple[int, dict[str, Any]] | None]:
    """(the request, None), or (_, (status, error payload)) in DeepSeek's order of checks; the kind of
    call, which DeepSeek never sees, is checked once the account is known to be good."""
    refusal = auth_refusal(options, authorization)
    if refusal is not None:
        return {}, refusal
    if options.no_balance:
        return {}, (402, error_body("Insufficient Balance", "unknown_error", "invalid_request_error"))
    if kind not in KNOWN_KINDS:
        return {}, (400, error_body(str(UnknownKindError(kind)), "invalid_request_error", "invalid_request_error"))
    try:
        request = orjson.loads(body)
        if not isinstance(request, dict):
            raise ValueError("not an object")
        parsed = parse_request(request, PROFILES[options.profile])
        stream_request(request)
        requested_n(request)
    except (orjson.JSONDecodeError, ValueError) as exc:
        status = exc.status if isinstance(exc, SimRequestError) else 400
        message = str(exc) if isinstance(exc, SimRequestError) else "Invalid request body: not a JSON object"
        return {}, (status, error_body(message, "invalid_request_error", "invalid_request_error"))
    if parsed.top_logprobs > options.max_top_logprobs:
        message = f"top_logprobs {parsed.top_logprobs} exceeds this server's limit of {options.max_top_logprobs}"
        return {}, (400, error_body(message, "invalid_request_error", "invalid_request_error"))
    if options.refuse_n and requested_n(request) > 1:
        return {}, (500, error_body(N_REFUSED, "server_error", "500"))
    if options.models is not None and parsed.model not in options.models:
        return {}, (400, error_body("Model Not Exist", "invalid_request_error", "invalid_request_error"))
    return request, context_refusal(request, parsed.max_tokens, options.profile, options.context_window)


def auth_refusal(options: ServerOptions, authorization: str | None) -> tuple[int, dict[str, Any]] | None:
    if options.api_key is None or authorization == f"Bearer {options.api_key}":
        return None
    if not authorization or not authorization.startswith("Bearer "):
        message = "Authentication Fails (auth header format should be Bearer sk-...)"
    else:  # like DeepSeek: only the last four characters of the key come back
        message = f"Authentication Fails, Your api key: ****{authorization[-4:]} is invalid"
    return 401, error_body(message, "authentication_error", "invalid_request_error")


def error_body(message: str, kind: str, code: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}
