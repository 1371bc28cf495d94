"""The simulated server's `n`: several choices in one reply, as vLLM, SGLang and OpenAI send them.

Choice i of a request whose X-Tracevote-Sample key is "<problem>/<s>" is exactly the reply a lone request for
"<problem>/<s+i>" gets (its text, logprobs and finish reason drawn from that key alone), so a pool comes out
trace for trace the same with `n` and without. The usage counts the prompt once (one prefill) and the completion
tokens of every choice. A fault that spoils a reply's logprobs (nologprobs, sentinel) strikes only its last
choice, as a server that lost one sequence sends; the others (truncated, drop, 429, ...) strike the whole reply.

Where the profile's provider does not honour n (DeepSeek; llama.cpp, see core.profiles) or the server was started
with --ignore-n (ServerOptions.ignore_n), a request with n gets one choice, as llama-cpp-python's server answers;
with --refuse-n (ServerOptions.refuse_n), HTTP 500 "Only one completion choice is allowed", as llama.cpp's own
llama-server answers.
`n` with `stream: true` is refused (400): tracevote streams one trace per request (the live path).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import orjson

from tracevote.core.profiles import Profile
from tracevote.sim.render import Degrade
from tracevote.sim.request import ReasoningField, SimRequestError

if TYPE_CHECKING:
    from tracevote.sim.model import SimModel

MAX_N = 128  # OpenAI's bound
N_REFUSED = "Only one completion choice is allowed"  # llama.cpp's llama-server, HTTP 500, for n other than 1
_CHOICES = b'"choices":['
_USAGE = b'],"usage":'


def requested_n(request: Mapping[str, Any]) -> int:
    """The request's n (1 when absent); SimRequestError for a value OpenAI refuses, and for n > 1 with a stream."""
    n = request.get("n", 1)
    if n is None:
        return 1
    if isinstance(n, bool) or not isinstance(n, int):
        raise SimRequestError(f"n: expected an integer, got {n!r}", 422)
    if not 1 <= n <= MAX_N:
        raise SimRequestError(f"n: {n} must be between 1 and {MAX_N}")
    if n > 1 and request.get("stream"):
        raise SimRequestError("n > 1 is not supported with stream: true by this simulated server")
    return n


def choices_served(request: Mapping[str, Any], profile: Profile, ignore_n: bool) -> int:
    """How many choices the reply holds: n where the server honours it, else 1."""
    return requested_n(request) if profile.honours_n and not ignore_n else 1


def choice_keys(sample_key: str | None, n: int) -> list[str | None]:
    """The sample key each choice is drawn from: "p/4", 3 -> ["p/4", "p/5", "p/6"]; a key without a sample
    number gets "<key>#<i>" for i > 0; no key, None for each (each draws the prompt's next counter value)."""
    if sample_key is None:
        return [None] * n
    head, _, tail = sample_key.rpartition("/")
    if head and tail.isdigit():
        return [f"{head}/{int(tail) + i}" for i in range(n)]
    return [sample_key] + [f"{sample_key}#{i}" for i in range(1, n)]


def complete_n(model: SimModel, request: Mapping[str, Any], sample_key: str | None, n: int, *, degrade: Degrade,
               kind: str, profile: Profile, reasoning_parser: ReasoningField | None = None) -> bytes:
    """The reply with n choices, each the lone reply of its own key (the last one degraded by `degrade`)."""
    lone = {key: value for key, value in request.items() if key != "n"}
    bodies = [model.complete_bytes(lone, key, degrade=degrade if i == n - 1 else "none", kind=kind, profile=profile,
                                   reasoning_parser=reasoning_parser)
              for i, key in enumerate(choice_keys(sample_key, n))]
    return merged(bodies)


def merged(bodies: list[bytes]) -> bytes:
    """One-choice replies as one reply: the first's envelope, every choice (indexed in order), the usage summed
    with the prompt counted once."""
    first = bodies[0]
    head = first[: first.index(_CHOICES) + len(_CHOICES)]
    choices, usages = [], []
    for index, body in enumerate(bodies):
        start, end = body.index(_CHOICES) + len(_CHOICES), body.rindex(_USAGE)
        choice = body[start:end]
        choices.append(choice.replace(b'{"index":0,', b'{"index":%d,' % index, 1))
        usages.append(orjson.loads(b'{"usage":' + body[end + len(_USAGE):])["usage"])
    tail = orjson.loads(b'{"usage":' + first[first.rindex(_USAGE) + len(_USAGE):])
    tail["usage"] = _summed(usages)
    return head + b",".join(choices) + b"]," + orjson.dumps(tail)[1:]


def _summed(usages: list[dict[str, Any]]) -> dict[str, Any]:
    """The first usage with every choice's completion tokens (and hidden reasoning tokens) added up."""
    usage = dict(usages[0])
    completion = sum(int(u["completion_tokens"]) for u in usages)
    usage["completion_tokens"] = completion
    usage["total_tokens"] = int(usage["prompt_tokens"]) + completion
    if isinstance(usage.get("completion_tokens_details"), dict):
        hidden = sum(int(u["completion_tokens_details"].get("reasoning_tokens", 0)) for u in usages)
        usage["completion_tokens_details"] = {**usage["completion_tokens_details"], "reasoning_tokens": hidden}
    return usage
