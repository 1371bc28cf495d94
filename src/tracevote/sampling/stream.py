"""A streamed chat completion (`stream: true`), read token by token so the caller can stop it early.

The request is the one ChatClient.sample sends, plus `stream: true` and `stream_options: {include_usage: true}`
(every profile accepts it: OpenAI and DeepSeek send the usage in a last chunk whose `choices` is empty, vLLM and
SGLang too; llama.cpp's server ignores it and sends none). The reply is Server-Sent Events: `data: {chunk}`
lines, `: keep-alive` comment lines, blank lines between events, `data: [DONE]` at the end. Each chunk's
`logprobs.content` items are read by ingest's own reader (rows sorted best first and cut to k) and each token's
C_i is computed by store.logprobs.token_confidence, so a streamed trace has the tokens and confidences the
non-streamed parse of the same completion gives.

After each chunk that carries tokens the observer sees them (a TokenBatch); when it returns "stop" the
connection is closed at once (the server stops generating) and what arrived is returned with stop reason
"confidence". A server's usage is taken when it sends one; otherwise the completion tokens are the tokens
received, labelled usage_source "client" and prompt_tokens None (the client does not tokenize the prompt).

Failures before any token reached the observer are retried as every call (TransientError); after that they raise
client.StreamBroken with what arrived, since a retry would feed the observer the trace again.
"""

from __future__ import annotations

import http.client
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, NoReturn

import numpy as np
import orjson
import requests
import urllib3

from tracevote.core.retry import TransientError
from tracevote.core.simulated import FINGERPRINT_PREFIX, SIMULATED_HEADER, SOLVE
from tracevote.sampling.client import ChatClient, StreamBroken
from tracevote.sampling.ingest import read_items
from tracevote.sampling.ingest_fast import usage_counts
from tracevote.store.logprobs import clean_logprobs, token_confidence

StopReason = Literal["finished", "length", "confidence"]
UsageSource = Literal["server", "client"]
Observer = Callable[["TokenBatch"], Literal["stop"] | None]
_READ_SIZE = 1 << 16  # bytes asked of the socket at a time; read1 returns what has arrived
_DONE = b"[DONE]"


@dataclass(frozen=True, eq=False)
class TokenBatch:
    """The tokens of one chunk, as the observer sees them; `offset` is the first one's index in the trace."""

    offset: int
    tokens: list[str]
    token_logprobs: np.ndarray  # float32 [m], NaN where absent
    top_logprobs: np.ndarray  # float32 [m, k], best first, NaN where absent
    token_confidence: np.ndarray  # float32 [m]: C_i, as ingest computes it
    top_tokens: list[list[str]] | None


@dataclass(frozen=True, eq=False)
class Streamed:
    """A streamed trace as received: whole, or up to the chunk at which the observer stopped it."""

    text: str
    tokens: list[str]
    token_logprobs: np.ndarray  # float32 [n]
    top_logprobs: np.ndarray  # float32 [n, k]
    top_tokens: list[list[str]] | None
    token_confidence: np.ndarray  # float32 [n]
    finish_reason: str | None  # the server's; None when the observer stopped the stream first
    stop_reason: StopReason
    prompt_tokens: int | None  # None: the server sent no usage
    completion_tokens: int
    usage_source: UsageSource  # "client": completion_tokens are the tokens received, counted here
    latency_s: float
    chunks: int  # data events read (chunks), [DONE] not counted
    done: bool  # the server's `data: [DONE]` arrived
    simulated: bool

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)


def stream_body(client: ChatClient, messages: list[dict[str, str]], *, sample_key: str,
                max_tokens: int | None = None) -> dict[str, Any]:
    """The non-streamed request body plus stream and stream_options (where the profile knows the field)."""
    body = client.request_body(messages, max_tokens=max_tokens, sample_key=sample_key)
    body["stream"] = True
    known = client.model.profile.known_fields
    if known is None or "stream_options" in known:
        body["stream_options"] = {"include_usage": True}
    return body


def stream_completion(client: ChatClient, messages: list[dict[str, str]], *, sample_key: str,
                      observer: Observer | None = None, max_tokens: int | None = None, kind: str = SOLVE,
                      keep_top_tokens: bool = False) -> Streamed:
    """One streamed trace through `client` (its endpoints, headers, key, timeouts, retries and breaker)."""
    payload = orjson.dumps(stream_body(client, messages, sample_key=sample_key, max_tokens=max_tokens))

    def read(response: requests.Response, started: float) -> Streamed:
        reader = _StreamReader(client.decoding.top_logprobs, keep_top_tokens, observer, client.redact)
        reader.simulated = response.headers.get(SIMULATED_HEADER) == "1"
        return reader.read(response, started)

    return client.call_streamed(payload, sample_key, kind, read)


class SSEDecoder:
    """Server-Sent Events, fed bytes as they arrive, out as each event's data (its `data:` lines joined by "\\n").

    >>> decoder = SSEDecoder()
    >>> decoder.feed(b': keep-alive\\n\\ndata: {"a"'), decoder.feed(b':1}\\r\\n\\ndata: [DONE]\\n\\n')
    ([], [b'{"a":1}', b'[DONE]'])
    """

    def __init__(self) -> None:
        self._pending = b""  # an incomplete line
        self._data: list[bytes] = []  # the current event's data lines

    def feed(self, chunk: bytes) -> list[bytes]:
        lines = (self._pending + chunk).split(b"\n")
        self._pending = lines.pop()
        events = []
        for line in lines:
            line = line.removesuffix(b"\r")
            if not line:
                if self._data:
                    events.append(b"\n".join(self._data))
                    self._data = []
            elif line.startswith(b"data:"):
                self._data.append(line[6:] if line[5:6] == b" " else line[5:])
            # comment lines (": ...") and the fields event, id and retry carry nothing a completion needs
        return events

    def close(self) -> list[bytes]:
        """The last event when the stream ended without its blank line."""
        events = self.feed(b"\n\n") if self._pending or self._data else []
        return events


@dataclass
class _StreamReader:
    k: int
    keep_top_tokens: bool
    observer: Observer | None
    redact: Callable[[str], str]
    simulated: bool = False
    text: list[str] = field(default_factory=list)
    batches: list[TokenBatch] = field(default_factory=list)
    n_tokens: int = 0
    chunks: int = 0
    finish_reason: str | None = None
    usage: tuple[int, int] | None = None
    done: bool = False
    stopped: bool = False

    def read(self, response: requests.Response, started: float) -> Streamed:
        decoder = SSEDecoder()
        while not (self.done or self.stopped):
            data = self._read_some(response)
            events = decoder.feed(data) if data else decoder.close()
            for event in events:
                self._event(event)
                if self.done or self.stopped:
                    break
            if not data:
                break
        if not (self.done or self.stopped or self.finish_reason):
            self._fail("stream cut", f"the stream ended after {self.chunks} chunks without a finish_reason "
                                     f"or data: [DONE]")
        return self._result(started)

    def _read_some(self, response: requests.Response) -> bytes:
        try:
            return response.raw.read1(_READ_SIZE)
        except urllib3.exceptions.ReadTimeoutError as exc:
            self._fail("timeout", self.redact(str(exc)))
        except (urllib3.exceptions.ProtocolError, urllib3.exceptions.DecodeError, http.client.HTTPException,
                OSError) as exc:
            self._fail("connection", self.redact(str(exc)))

    def _event(self, data: bytes) -> None:
        if data == _DONE:
            self.done = True
            return
        self.chunks += 1
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            self._fail("malformed chunk", f"chunk {self.chunks} is not JSON ({exc}): {data[:80]!r}")
        if not isinstance(chunk, dict):
            self._fail("malformed chunk", f"chunk {self.chunks} is not a JSON object: {data[:80]!r}")
        if chunk.get("error") is not None:
            self._fail("stream error", f"the server sent an error in chunk {self.chunks}: "
                                       f"{self.redact(_error_text(chunk['error']))}")
        if str(chunk.get("system_fingerprint", "")).startswith(FINGERPRINT_PREFIX):
            self.simulated = True
        self.usage = usage_counts(chunk) or self.usage
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            self._fail("malformed chunk", f"chunk {self.chunks} has no choices list")
        for choice in choices:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self._choice(choice)

    def _choice(self, choice: dict[str, Any]) -> None:
        delta = choice.get("delta")
        content = delta.get("content") if isinstance(delta, dict) else None
        if isinstance(content, str):
            self.text.append(content)
        logprobs = choice.get("logprobs")
        items = logprobs.get("content") if isinstance(logprobs, dict) else None
        if items:
            self._tokens(items)
        if choice.get("finish_reason") is not None:
            self.finish_reason = choice["finish_reason"]

    def _tokens(self, items: list[Any]) -> None:
        try:
            tokens, chosen, top, top_tokens, _ = read_items(items, self.k, self.keep_top_tokens)
        except TransientError as exc:
            self._fail("malformed chunk", f"chunk {self.chunks}: {exc.detail}")
        batch = TokenBatch(self.n_tokens, tokens, clean_logprobs(chosen), clean_logprobs(top),
                           token_confidence(top, chosen).astype(np.float32), top_tokens)
        self.batches.append(batch)
        self.n_tokens += len(tokens)
        if self.observer is not None and self.observer(batch) == "stop":
            self.stopped = True

    def _fail(self, cause: str, detail: str) -> NoReturn:
        if self.n_tokens and self.observer is not None:
            raise StreamBroken(cause, detail, self._result(0.0))
        raise TransientError(cause, detail)

    def _result(self, started: float) -> Streamed:
        stop_reason: StopReason = "confidence" if self.stopped else (
            "length" if self.finish_reason == "length" else "finished")
        prompt, completion = self.usage if self.usage is not None else (None, self.n_tokens)
        batches = self.batches
        return Streamed(
            text="".join(self.text), tokens=[token for batch in batches for token in batch.tokens],
            token_logprobs=_joined([batch.token_logprobs for batch in batches], (0,)),
            top_logprobs=_joined([batch.top_logprobs for batch in batches], (0, self.k)),
            top_tokens=[row for batch in batches for row in batch.top_tokens or []] if self.keep_top_tokens else None,
            token_confidence=_joined([batch.token_confidence for batch in batches], (0,)),
            finish_reason=None if self.stopped else self.finish_reason, stop_reason=stop_reason,
            prompt_tokens=prompt, completion_tokens=completion,
            usage_source="server" if self.usage is not None else "client",
            latency_s=time.monotonic() - started if started else 0.0, chunks=self.chunks, done=self.done,
            simulated=self.simulated)


def _joined(parts: list[np.ndarray], empty_shape: tuple[int, ...]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.empty(empty_shape, dtype=np.float32)


def _error_text(error: Any) -> str:
    """error.message of an OpenAI-style error object, else the object itself, shortened."""
    message = error.get("message") if isinstance(error, dict) else error
    return " ".join(str(message).split())[:300]
