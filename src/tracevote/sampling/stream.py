"""A streamed chat completion (`stream: true`), read token by token so the caller can stop it early.

The request is the one ChatClient.sample sends, plus `stream: true` and `stream_options: {include_usage: true}`
(every profile accepts it: OpenAI and DeepSeek send the usage in a last chunk whose `choices` is empty, vLLM and
SGLang too; llama.cpp's server ignores it and sends none). The reply is Server-Sent Events: `data: {chunk}`
lines, `: keep-alive` comment lines, blank lines between events, `data: [DONE]` at the end.

Three rooms read it, each with a library at its door:
- reading the stream (stream_reads): the body through requests' connection pool, read by urllib3
  (`HTTPResponse.read1`, which takes the HTTP chunked framing off) on a thread of its own, so a wait for the next
  read can end on time or on a cancel; a body read to its end gives its connection back to the pool, a stream
  stopped early is shut down and closed (the server stops generating);
- turning events into tokens (stream_events): sseclient-py frames the events, orjson decodes each chunk, ingest's
  item reader reads its logprobs items and each token's C_i is computed as ingest computes it
  (ingest_fast.stored_measures), so a streamed trace has the tokens and confidences the non-streamed parse of the
  same completion gives, bit for bit;
- deciding when to hand a batch on (stream_hold): tokens held back into batches far from a possible stop, handed
  over as they come near one (the observer's `want` count), at once on a cancel.

When the observer returns "stop" the connection is closed at once and what arrived is returned with stop reason
"confidence"; the stop rule decides on the tokens alone, so it stops at the same token however they were batched.
A server's usage is taken when it sends one; otherwise the completion tokens are the tokens received, labelled
usage_source "client", and prompt_tokens is None (the client does not tokenize the prompt).

Failures before any token reached the observer are retried as every call (TransientError); after that they raise
client.StreamBroken with what arrived, since a retry would feed the observer the trace again, unless the caller
gives stream_completion a `restart` hook: the hook hears of the broken attempt (and resets its observer), and the
attempt is then retried from the start as any failed call (the live run's, sampling.live_retry).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, NoReturn

import numpy as np
import orjson
import requests

from tracevote.core.retry import TransientError
from tracevote.core.simulated import SIMULATED_HEADER, SOLVE
from tracevote.sampling.client import ChatClient, StreamBroken
from tracevote.sampling.ingest import FINISH_REASONS, SENTINELS_ONLY, sentinels_only
from tracevote.sampling.ingest_fast import stored_measures
from tracevote.sampling.stream_events import EventReader, event_data
from tracevote.sampling.stream_hold import HOLD_CHUNKS, HOLD_S, UNCOUNTED_CHUNKS, UNCOUNTED_HOLD_S, Hold
from tracevote.sampling.stream_reads import Reads, RecordedReads, ResponseReads, finish_arrived

__all__ = ["HOLD_CHUNKS", "HOLD_S", "UNCOUNTED_CHUNKS", "UNCOUNTED_HOLD_S", "Observer", "Streamed", "TokenBatch",
           "read_stream", "stream_body", "stream_completion"]

StopReason = Literal["finished", "length", "confidence"]
UsageSource = Literal["server", "client"]
# an observer answers each batch with "stop", or how many more tokens it can take before it could stop (the reader
# then holds no more than that many back), or None
Observer = Callable[["TokenBatch"], Literal["stop"] | int | None]


@dataclass(frozen=True, eq=False)
class TokenBatch:
    """The tokens of the chunks one batch brought, as the observer sees them; `offset` is the first one's index in
    the trace."""

    offset: int
    tokens: list[str]
    token_logprobs: np.ndarray  # float32 [m], NaN where absent
    top_logprobs: np.ndarray | None  # float32 [m, k], best first, NaN where absent; None unless kept
    token_confidence: np.ndarray  # float32 [m]: C_i, as ingest computes it
    top_tokens: list[list[str]] | None


@dataclass(frozen=True, eq=False)
class Streamed:
    """A streamed trace as received: whole, or up to the chunk at which the observer stopped it."""

    text: str
    tokens: list[str]
    token_logprobs: np.ndarray  # float32 [n]
    top_logprobs: np.ndarray | None  # float32 [n, k]; None unless kept (keep_top_logprobs)
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
    # the server's finish_reason arrived before the client stopped reading: it had generated the whole trace, so a
    # stop here (finish_reason None) saved the server nothing
    server_finished: bool
    reasoning: str = ""  # the deltas' reasoning_content (or reasoning): a server with a reasoning parser's thinking

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
                      keep_top_logprobs: bool = True, keep_top_tokens: bool = False,
                      batch_chunks: int = HOLD_CHUNKS,
                      hold_s: float | None = HOLD_S, want: int | None = None,
                      cancel: threading.Event | None = None,
                      restart: Callable[[StreamBroken], None] | None = None) -> Streamed:
    """One streamed trace through `client` (its endpoints, headers, key, timeouts, retries and breaker).

    Tokens are held back and handed to the observer together once `batch_chunks` chunks were read, or `hold_s`
    seconds after the first of them arrived (whether or not more arrive meanwhile), or at the stream's end,
    whichever comes first. `want`: how many tokens the observer can take before it could stop, before it has seen
    any (its later answers say after); the client holds no more than that. While the observer has not said (`want`
    None, or it answered None), it could stop at any token, and the client holds at most UNCOUNTED_CHUNKS or
    UNCOUNTED_HOLD_S. `cancel`: once set, the held tokens go to the observer at once, and the observer (which knows
    why) closes the stream. `batch_chunks` 1 with `hold_s` None hands over every read's tokens at once.
    `keep_top_logprobs` false: the batches and the result carry no top-k, only C_i (as ChatClient.sample's; a live
    run keeps nothing more). `restart`: a stream that breaks after its first tokens is handed to it (its
    StreamBroken, with what arrived), then asked again from its start under the client's retries, as any failed
    attempt; the hook resets the observer, or raises to end the retries."""
    payload = orjson.dumps(stream_body(client, messages, sample_key=sample_key, max_tokens=max_tokens))

    def read(response: requests.Response, started: float) -> Streamed:
        hold = Hold(batch_chunks, hold_s, counted=observer is None or want is not None, want=want, cancel=cancel)
        reader = _StreamReader(EventReader(client.decoding.top_logprobs, keep_top_tokens, client.redact), hold,
                               observer, keep_top_logprobs)
        reader.simulated = response.headers.get(SIMULATED_HEADER) == "1"
        try:
            return reader.read(ResponseReads(response.raw, client.redact), started)
        except StreamBroken as broken:
            if restart is None:
                raise
            restart(broken)
            raise TransientError(broken.cause, broken.detail) from None

    return client.call_streamed(payload, sample_key, kind, read)


def read_stream(pieces: Iterable[bytes], *, top_logprobs: int, observer: Observer | None = None,
                keep_top_logprobs: bool = True, keep_top_tokens: bool = False, batch_chunks: int = 1) -> Streamed:
    """A stream's bytes, given as they were read, parsed as stream_completion parses a response (benchmarks and
    tests feed it recorded bytes without a server): each piece a read, tokens handed over every `batch_chunks`
    chunks (at a piece's end) and at the end."""
    hold = Hold(batch_chunks, None, counted=observer is None)
    reader = _StreamReader(EventReader(top_logprobs, keep_top_tokens, str), hold, observer, keep_top_logprobs)
    return reader.read(RecordedReads(pieces), time.monotonic())


@dataclass
class _StreamReader:
    """One stream read: events in through `events`, batches out to the observer when `hold` says."""

    events: EventReader
    hold: Hold
    observer: Observer | None
    keep_top_logprobs: bool
    simulated: bool = False
    batches: list[TokenBatch] = field(default_factory=list)
    n_tokens: int = 0
    stopped: bool = False
    finish_unread: bool = False  # the finish_reason was among the bytes that had arrived when the observer stopped
    held_since: float | None = None  # when the read that brought the oldest held token arrived
    read_at: float = 0.0  # when the last read arrived

    def read(self, reads: Reads, started: float) -> Streamed:
        try:
            for data in event_data(self._reads(reads)):
                if self.stopped:  # the rest of an event cut short by the stop: not the server's
                    break
                self.events.event(data)
                if self.events.done:
                    break
            if not self.stopped:
                if self.events.pending:
                    self._hand_over()
                if not self.stopped:
                    self._check_end()
        except TransientError as failure:
            reads.close()
            self._fail(failure)
        except BaseException:  # the observer's own error, or ^C: the reading thread ends before it goes up
            reads.close()
            raise
        if self.stopped:
            reads.close()
            self.finish_unread = finish_arrived(reads.arrived())
        else:
            reads.finish()
        return self._result(started)

    def _reads(self, reads: Reads) -> Iterator[bytes]:
        """The reads, as the event parser asks for them; before each, the held tokens go over when they are due,
        and while the next is awaited with tokens held, they go over at their deadline (or on a cancel)."""
        while True:
            if self.events.pending:
                self.held_since = self.held_since or self.read_at
                if self.hold.due(len(self.events.pending), time.monotonic() - self.held_since):
                    self._hand_over()
                    if self.stopped:
                        return
                    continue
            held_for = None if self.held_since is None else time.monotonic() - self.held_since
            data = reads.next(None if held_for is None else self.hold.wait_s(held_for))
            if data is None:  # nothing arrived in time: the loop's top hands the tokens over if they are due
                continue
            if not data:
                return
            self.read_at = time.monotonic()
            yield data

    def _hand_over(self) -> None:
        """The held tokens to the observer, as one TokenBatch."""
        tokens, chosen, top, top_tokens = self.events.take_tokens()
        self.held_since = None
        token_logprobs, confidence, top_logprobs = stored_measures(chosen, top, self.keep_top_logprobs)
        batch = TokenBatch(self.n_tokens, tokens, token_logprobs, top_logprobs, confidence, top_tokens)
        self.batches.append(batch)
        self.n_tokens += len(tokens)
        if self.observer is not None:
            answer = self.observer(batch)
            self.stopped = answer == "stop"
            self.hold.heard(answer)

    def _check_end(self) -> None:
        """The checks ingest makes of a whole completion, on a stream that ran to its end."""
        events = self.events
        if not (events.done or events.finish_reason):
            raise TransientError("stream cut", f"the stream ended after {events.chunks} chunks without a "
                                               f"finish_reason or data: [DONE]")
        if events.finish_reason not in FINISH_REASONS:
            raise TransientError(f"finish_reason {events.finish_reason}", "the server ended the completion early")
        if (events.text or events.reasoning) and not self.n_tokens:
            raise TransientError("missing logprobs", "the stream's chunks carry content but no logprobs.content")
        if self.n_tokens and all(sentinels_only(batch.token_logprobs, batch.token_confidence)
                                 for batch in self.batches if batch.tokens):
            raise TransientError(*SENTINELS_ONLY)

    def _fail(self, failure: TransientError) -> NoReturn:
        """`failure` raised as it is while no token reached the observer; else as StreamBroken with what arrived.
        Tokens that arrived with the failure go to the observer first."""
        if self.events.pending and not self.stopped:
            with contextlib.suppress(TransientError):  # the held items are what failed
                self._hand_over()
        if self.n_tokens and self.observer is not None:
            raise StreamBroken(failure.cause, failure.detail, self._result(0.0))
        raise failure

    def _result(self, started: float) -> Streamed:
        events = self.events
        stop_reason: StopReason = "confidence" if self.stopped else (
            "length" if events.finish_reason == "length" else "finished")
        prompt, completion = events.usage if events.usage is not None else (None, self.n_tokens)
        batches = self.batches
        return Streamed(
            text="".join(events.text), tokens=[token for batch in batches for token in batch.tokens],
            token_logprobs=_joined([batch.token_logprobs for batch in batches], (0,)),
            top_logprobs=_joined([batch.top_logprobs for batch in batches], (0, events.k))  # type: ignore[misc]
            if self.keep_top_logprobs else None,
            top_tokens=[row for batch in batches for row in batch.top_tokens or []] if events.keep_top_tokens else None,
            token_confidence=_joined([batch.token_confidence for batch in batches], (0,)),
            finish_reason=None if self.stopped else events.finish_reason, stop_reason=stop_reason,
            prompt_tokens=prompt, completion_tokens=completion,
            usage_source="server" if events.usage is not None else "client",
            latency_s=time.monotonic() - started if started else 0.0, chunks=events.chunks, done=events.done,
            simulated=self.simulated or events.simulated,
            server_finished=events.finish_reason is not None or self.finish_unread,
            reasoning="".join(events.reasoning))


def _joined(parts: list[np.ndarray], empty_shape: tuple[int, ...]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.empty(empty_shape, dtype=np.float32)
