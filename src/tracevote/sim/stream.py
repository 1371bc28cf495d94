"""The simulated model's streamed replies: `stream: true` answered with server-sent events, chunk by chunk.

OpenAI's chunk layout, which DeepSeek, vLLM, SGLang and llama.cpp's server follow:

    data: {"id": ..., "object": "chat.completion.chunk", ..., "choices": [{"index": 0,
           "delta": {"role": "assistant", "content": ""}, "logprobs": null, "finish_reason": null}]}
    data: {... "delta": {"content": " the"}, "logprobs": {"content": [{"token": " the", "logprob": -0.01,
           "bytes": [32, 116, 104, 101], "top_logprobs": [...]}]}, "finish_reason": null}]}   one per token
    data: {... "delta": {}, "logprobs": null, "finish_reason": "stop"}]}
    data: {... "choices": [], "usage": {...}}        only with stream_options.include_usage
    data: [DONE]

Each profile's variant is a StreamLayout (LAYOUTS). A "solve" call streams one token per chunk, the very
tokens (and logprobs) of the whole reply to the same request: both come from the same draw (model.py), so
a streamed trace equals the non-streamed one token by token. Any other kind of call streams its whole
reply's text as one content chunk. Events are rendered lazily, one per `next()`: a server that stops
iterating when its client goes away renders no more (the tokens' numbers are drawn up front, vectorized:
that is the cheap part).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import orjson

from tracevote.sim.reasoning import within_budget
from tracevote.sim.render import (
    CREATED,
    Degrade,
    completion_id,
    degraded,
    fingerprint,
    first_tokens,
    item_parts,
    usage_of,
)
from tracevote.sim.request import SimRequest, SimRequestError
from tracevote.sim.split import answer_start, delta_field
from tracevote.sim.tokens import Tokens, Trace, tables

DONE = b"data: [DONE]\n\n"
_BYTES_ARRAY = re.compile(rb'"bytes":\[[0-9,]*\]')


@dataclass(frozen=True)
class StreamLayout:
    """How a provider's chunks differ from OpenAI's (the client's fixtures, tests/fixtures/streams/, show each)."""

    token_bytes: bool = True  # each token's "bytes" as an array of UTF-8 bytes; False: null (llama.cpp)
    usage: Literal["chunk", "finish", "none"] = "chunk"  # chunk: a last chunk with choices [] when
    # stream_options.include_usage asks; finish: always on the finish chunk (DeepSeek); none: never (llama.cpp)
    usage_null: bool = False  # with include_usage, every other chunk carries "usage": null (OpenAI)
    refusal_field: bool = False  # logprobs carries "refusal": null beside "content" (OpenAI, llama.cpp)
    keep_alive_every: int = 0  # a ": keep-alive" comment line before every this many content chunks (DeepSeek)
    finish_content: bool = False  # the finish chunk's delta is {"content": ""} (DeepSeek), else {}


_OPENAI = StreamLayout(usage_null=True, refusal_field=True)
LAYOUTS: dict[str, StreamLayout] = {
    "deepseek": StreamLayout(usage="finish", keep_alive_every=15, finish_content=True),
    "openai-chat": _OPENAI,
    "openai-reasoning": _OPENAI,  # no logprobs: content deltas carry "logprobs": null
    "local": StreamLayout(),  # vLLM and SGLang: -9999.0 for a -inf logprob, bytes arrays, usage on request
    # llama-cpp-python's server as tests/fixtures/llamacpp/chat_top20_stream.json recorded it
    "llama-cpp-python": StreamLayout(token_bytes=False, usage="none", refusal_field=True),
}
KEEP_ALIVE = b": keep-alive\n\n"


class StreamEvent(NamedTuple):
    data: bytes  # one server-sent event, "data: ...\n\n"
    tokens: int  # completion tokens it carries (a content chunk of a solve call: 1)


@dataclass(frozen=True)
class StreamRequest:
    """What a request asks of a stream: `stream` true or false, and whether a usage chunk ends it."""

    stream: bool
    include_usage: bool


def stream_request(request: Mapping[str, Any]) -> StreamRequest:
    """`stream` and `stream_options` checked as OpenAI checks them (HTTP 400, its words)."""
    stream = request.get("stream", False)
    if not isinstance(stream, bool):
        raise SimRequestError(f"stream: expected a boolean, got {stream!r}", 422)
    options = request.get("stream_options")
    if options is None:
        return StreamRequest(stream, False)
    if not stream:
        raise SimRequestError("The 'stream_options' parameter is only allowed when 'stream' is enabled.")
    include_usage = options.get("include_usage", False) if isinstance(options, dict) else None
    if not isinstance(include_usage, bool):
        raise SimRequestError(f"stream_options: expected {{\"include_usage\": true|false}}, got {options!r}", 422)
    return StreamRequest(True, include_usage)


class _Chunks:
    """Renders one reply's chunks: every chunk shares its head (id, created, model, fingerprint)."""

    def __init__(self, req: SimRequest, seed: tuple, layout: StreamLayout, options: StreamRequest) -> None:
        self.req = req
        self.layout = layout
        self.tail = b',"usage":null}\n\n' if options.include_usage and layout.usage_null else b"}\n\n"
        self.head = (b'data: {"id":' + completion_id(req, seed) + b',"object":"chat.completion.chunk","created":'
                     + str(CREATED).encode() + b',"model":' + orjson.dumps(req.model)
                     + b',"system_fingerprint":' + fingerprint(seed) + b',"choices":[')

    def role(self) -> StreamEvent:
        return self._choice(b'{"role":"assistant","content":""}', b"null", b"null", 0)

    def content(self, text: str, item: bytes | None, tokens: int, field: str = "content") -> StreamEvent:
        if item is None:
            logprobs = b"null"
        else:
            if not self.layout.token_bytes:
                item = _BYTES_ARRAY.sub(b'"bytes":null', item)
            refusal = b',"refusal":null' if self.layout.refusal_field else b""
            logprobs = b'{"content":[' + item + b"]" + refusal + b"}"
        return self._choice(b'{"' + field.encode() + b'":' + orjson.dumps(text) + b"}", logprobs, b"null", tokens)

    def finish(self, reason: str, usage: dict[str, Any]) -> StreamEvent:
        delta = b'{"content":""}' if self.layout.finish_content else b"{}"
        event = self._choice(delta, b"null", b'"' + reason.encode() + b'"', 0)
        if self.layout.usage != "finish":
            return event
        return StreamEvent(event.data[: -len(self.tail)] + b',"usage":' + orjson.dumps(usage) + b"}\n\n", 0)

    def usage(self, usage: dict[str, Any]) -> StreamEvent:
        return StreamEvent(self.head + b'],"usage":' + orjson.dumps(usage) + b"}\n\n", 0)

    def _choice(self, delta: bytes, logprobs: bytes, finish: bytes, tokens: int) -> StreamEvent:
        return StreamEvent(self.head + b'{"index":0,"delta":' + delta + b',"logprobs":' + logprobs
                           + b',"finish_reason":' + finish + b"}]" + self.tail, tokens)


def stream_trace(req: SimRequest, trace: Trace, tokens: Tokens, seed: tuple, options: StreamRequest,
                 layout: StreamLayout, degrade: Degrade = "none") -> Iterator[StreamEvent]:
    """A solve call's reply, one token per content chunk (render.render's reply, streamed)."""
    chunks = _Chunks(req, seed, layout, options)
    yield chunks.role()
    n, hidden, finish = within_budget(req, len(tokens.ids), "length" if len(tokens.ids) < trace.length else "stop",
                                      seed)
    tokens = first_tokens(tokens, n)
    texts = tables().text[tokens.ids].tolist()
    items = _item_rows(req, degraded(tokens, degrade), degrade)
    every = layout.keep_alive_every
    start = answer_start(trace, len(texts))  # with a reasoning parser, the tokens before it are thinking
    for index, text in enumerate(texts):
        if every and index % every == 0:
            yield StreamEvent(KEEP_ALIVE, 0)
        field = delta_field(req.reasoning_parser, index, start)
        yield chunks.content(text, None if items is None else b"".join(items[index])[:-1], 1, field)
    usage = usage_of(req, n, hidden)
    yield chunks.finish(finish, usage)
    yield from _closing(chunks, options, usage)


def stream_whole(req: SimRequest, body: bytes, seed: tuple, options: StreamRequest,
                 layout: StreamLayout) -> Iterator[StreamEvent]:
    """Any other kind of call: its whole reply's text as one content chunk."""
    reply = orjson.loads(body)
    choice = reply["choices"][0]
    usage = reply["usage"]
    chunks = _Chunks(req, seed, layout, options)
    yield chunks.role()
    yield chunks.content(choice["message"]["content"], None, usage["completion_tokens"])
    yield chunks.finish(choice["finish_reason"], usage)
    yield from _closing(chunks, options, usage)


def _closing(chunks: _Chunks, options: StreamRequest, usage: dict[str, Any]) -> Iterator[StreamEvent]:
    if options.include_usage and chunks.layout.usage == "chunk":
        yield chunks.usage(usage)
    yield StreamEvent(DONE, 0)


def _item_rows(req: SimRequest, tokens: Tokens, degrade: Degrade) -> list[list[bytes]] | None:
    """Each token's logprobs.content item as fragments (the last ends in a comma), or None without logprobs."""
    if not req.logprobs or degrade == "nologprobs":
        return None
    return item_parts(tokens, req.top_logprobs).tolist()
