"""A streamed chat completion (`stream: true`), read token by token so the caller can stop it early.

The request is the one ChatClient.sample sends, plus `stream: true` and `stream_options: {include_usage: true}`
(every profile accepts it: OpenAI and DeepSeek send the usage in a last chunk whose `choices` is empty, vLLM and
SGLang too; llama.cpp's server ignores it and sends none). The reply is Server-Sent Events: `data: {chunk}`
lines, `: keep-alive` comment lines, blank lines between events, `data: [DONE]` at the end. Each chunk's
`logprobs.content` items are read by ingest's own reader (rows sorted best first and cut to k) and each token's
C_i is computed as ingest computes it (ingest_fast.stored_measures: store.logprobs.token_confidence, bit for bit),
so a streamed trace has the tokens and confidences the non-streamed parse of the same completion gives.

The observer sees the tokens in order, in batches (TokenBatch): at the end of a read, once `batch_chunks` chunks
were read or `hold_s` seconds passed since the oldest of them arrived (stream_completion's defaults: 1,024 chunks,
0.3 s; read_stream's: every read), and at the stream's end. Before a read that would wait with tokens held back, the
client sleeps (to their deadline, or as long as the rest of the batch takes at the stream's pace) if the last
read caught up with the server, then hands them over if nothing has arrived; so a slow server's tokens cost a
wakeup per 0.3 s, not one each, and one that writes only when asked is never kept waiting long. An observer may
answer a batch with how many more tokens it can take before it could stop (the live run's rule knows:
deepconf.live.WindowStop.safe_tokens); the client then holds back no more than that many, so near a stop it hands
tokens over as they come and the server runs on past the stop by what arrives meanwhile, not by a batch. An
observer that has not said so could stop at any token: its batches are 256 chunks or 0.1 s at most, so a fast
server runs at most that far past its stop. A `cancel` event, once set, ends any hold at once (the live run's
consensus stop). While it holds tokens back the client asks the kernel for a receive buffer of 4 MiB (capped by
net.core.rmem_max), so that a fast server's writes wait less on it (docs/endpoints.md).
When the observer returns "stop" the connection is closed at once (the server stops generating) and what arrived
is returned with stop reason "confidence"; the stop rule decides on the tokens alone, so it stops at the same token
however they were batched. A server's usage is taken when it sends one; otherwise the
completion tokens are the tokens received, labelled usage_source "client", and prompt_tokens is None (the client does
not tokenize the prompt).

Client CPU (bench/bench_stream.py, docs/benchmarks.md): a chunked body is read from the socket a megabyte at a time
and held as read until its batch is due. The first token chunk is parsed in full and its layout kept (_Template);
then a batch's token chunks (and the keep-alive comments between them) are found, checked against that layout and
parsed together by stream_fast: compiled loops over the batch's bytes (sampling.kernels), one pass each for the
framing, the layout checks and the items. What that path does not take (the role and last chunks, a layout change,
a comment that might hold a key, fewer than stream_fast.MIN_EVENTS chunks) goes chunk by chunk: its framing taken
off, each event cut by the layout with a few bytes operations, its items read per batch by ingest's fast path or
its item reader. Both give the same tokens, bit for bit (tests/sampling/test_stream_fast.py).

Failures before any token reached the observer are retried as every call (TransientError); after that they raise
client.StreamBroken with what arrived, since a retry would feed the observer the trace again, unless the caller
gives stream_completion a `restart` hook: the hook hears of the broken attempt (and resets its observer), and the
attempt is then retried from the start as any failed call (the live run's, sampling.live_retry).
"""

from __future__ import annotations

import contextlib
import http.client
import itertools
import re
import select
import socket
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Literal, NoReturn

import numpy as np
import orjson
import requests
import urllib3

from tracevote.core.retry import TransientError
from tracevote.core.simulated import FINGERPRINT_PREFIX, SIMULATED_HEADER, SOLVE
from tracevote.sampling.client import ChatClient, StreamBroken
from tracevote.sampling.ingest import FINISH_REASONS, SENTINELS_ONLY, read_items, sentinels_only
from tracevote.sampling.ingest_fast import REASONING_FIELDS, parse_fast, reasoning_text, stored_measures, usage_counts
from tracevote.sampling.stream_fast import MIN_EVENTS, Events, http_events, sse_events, take_batch

StopReason = Literal["finished", "length", "confidence"]
UsageSource = Literal["server", "client"]
# an observer answers each batch with "stop", or how many more tokens it can take before it could stop (the reader
# then holds no more than that many back), or None
Observer = Callable[["TokenBatch"], Literal["stop"] | int | None]
_READ_SIZE = 1 << 20  # bytes asked of the socket at a time; read1 returns what has arrived, up to this
_RECEIVE_BUFFER = 4 << 20  # bytes of socket receive buffer asked for while tokens are held back
_SMALL_READ = 1 << 16  # a read shorter than this caught up with the server: the next one may wait for more
HOLD_CHUNKS = 1024  # stream_completion's default batch_chunks: tokens handed over at the latest this many chunks
# ... or this long after the first of them arrived (when nothing more has arrived by then): longer, and a server
# streaming ~3,000 tokens a second fills the receive buffer while the client sleeps, and waits (docs/endpoints.md)
HOLD_S = 0.3
# ... but no more than these while the observer has not said how many tokens it can take (it might stop at any)
UNCOUNTED_CHUNKS = 256
UNCOUNTED_HOLD_S = 0.1
_FAST_BATCH = 32  # chunks a read must bring for ingest's fast path, whose fixed cost (~0.5 ms) a few do not repay
_DONE = b"[DONE]"
_FINISH = re.compile(rb'"finish_reason"\s*:\s*"')  # a finish_reason that is not null
_NEAR = 16  # chunks before a possible stop (the observer's count) from which the client reads them as they come
_LEARN_EVENTS = 4  # events read one by one at a stream's start, at most, to learn its token chunks' layout
_LEARN_BYTES = 1 << 16  # ... within its first bytes
_FIRST_BATCH_BYTES = 1 << 17  # bytes after which a stream's first batch goes over (~90 top-20 chunks): see _learning
_Raw = bytes | memoryview  # bytes cut from a read: a view of them (no copy) where they are only joined later
_ITEMS_KEY = b'"logprobs":{"content":[{'
# a completion body around a read's items, for ingest's fast path (it reads choices[0].logprobs.content)
_BODY_HEAD = b'{"choices":[{"index":0,"message":{"role":"assistant","content":""},"logprobs":{"content":['
_BODY_TAIL = b']},"finish_reason":"stop"}]}'


@dataclass(frozen=True, eq=False)
class TokenBatch:
    """The tokens of the chunks one read brought, as the observer sees them; `offset` is the first one's index in
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
    batched_chunks: int  # of them, those the batch path (stream_fast) read; the rest went one by one
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
    seconds after the first of them arrived, or at the stream's end, whichever comes first; a read that caught up
    with the server (a slow one) sleeps until that deadline so the next read takes every chunk that arrived
    meanwhile, and when nothing arrived by then the held tokens are handed over before the client waits again (a
    server that writes only when asked is never kept waiting long). So a token costs the client one parse among
    hundreds and a wakeup among as many as arrive in `hold_s` (bench/bench_stream.py). `want`: how many tokens the
    observer can take before it could stop, before it has seen any (its later answers say after); the client
    holds no more than that. While the observer has not said (`want` None, or it answered None), it could stop at
    any token, and the client holds at most UNCOUNTED_CHUNKS or UNCOUNTED_HOLD_S: a stop is then noticed at most
    0.1 s (plus the read in progress) after its token arrived, at the same token, the server running on that
    long. `cancel`: once set, the held tokens go to the observer at once, even mid-sleep, and the observer (which
    knows why) closes the stream. `batch_chunks` 1 with `hold_s` None hands over every read's tokens at once (one
    call per read). `keep_top_logprobs` false: the batches and the result carry no top-k, only C_i (as
    ChatClient.sample's; a live run keeps nothing more). `restart`: a stream that breaks after its first tokens is
    handed to it (its StreamBroken, with what arrived), then asked again from its start under the client's retries,
    as any failed attempt; the hook resets the observer, or raises to end the retries."""
    payload = orjson.dumps(stream_body(client, messages, sample_key=sample_key, max_tokens=max_tokens))

    def read(response: requests.Response, started: float) -> Streamed:
        reader = _StreamReader(client.decoding.top_logprobs, keep_top_tokens, observer, client.redact, batch_chunks,
                               hold_s, keep_top_logprobs=keep_top_logprobs, want=want, cancel=cancel)
        reader.simulated = response.headers.get(SIMULATED_HEADER) == "1"
        try:
            streamed = reader.read(reader.pieces(response), started)
        except StreamBroken as broken:
            if restart is None:
                raise
            restart(broken)
            raise TransientError(broken.cause, broken.detail) from None
        if reader.body_read:
            _give_back(response)
        return streamed

    return client.call_streamed(payload, sample_key, kind, read)


def read_stream(pieces: Iterable[bytes], *, top_logprobs: int, observer: Observer | None = None,
                keep_top_logprobs: bool = True, keep_top_tokens: bool = False, batch_chunks: int = 1) -> Streamed:
    """A stream's bytes, given as they were read, parsed as stream_completion parses a response (benchmarks and
    tests feed it recorded bytes without a server)."""
    return _StreamReader(top_logprobs, keep_top_tokens, observer, str, batch_chunks,
                         keep_top_logprobs=keep_top_logprobs).read(pieces, time.monotonic())


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
        buffer = self._pending + chunk
        if not self._data and b"\r" not in buffer:
            events = self._single_lines(buffer)
            if events is not None:
                return events
        lines = buffer.split(b"\n")
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

    def _single_lines(self, buffer: bytes) -> list[bytes] | None:
        """The events of `buffer` when each is one `data: ` line (as servers send them), split in bulk; None for
        any other buffer (a comment, a multi-line event, blank lines), which goes line by line."""
        end = buffer.rfind(b"\n\n")
        if end < 0:
            return None
        blocks = buffer[:end].split(b"\n\n")
        if buffer.count(b"\n", 0, end) != 2 * (len(blocks) - 1) or not all(b.startswith(b"data: ") for b in blocks):
            return None
        self._pending = buffer[end + 2:]
        return [block[6:] for block in blocks]

    def idle(self) -> bool:
        """Whether no event is half read (a partial line may be)."""
        return not self._data

    def empty(self) -> bool:
        """Whether nothing is held: no event half read, no partial line."""
        return not self._data and not self._pending

    def take(self, chunk: bytes) -> bytes:
        """The partial line held, then `chunk`; the decoder holds nothing after."""
        buffer, self._pending = self._pending + chunk, b""
        return buffer

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
    batch_chunks: int = 1
    hold_s: float | None = None  # with the socket: the longest a token is held back (None: until batch_chunks)
    keep_top_logprobs: bool = True  # false: batches and the result carry no top-k (a live run keeps C_i alone)
    want: int | None = None  # chunks the observer can take before it could stop, as it last said (None: it did not)
    cancel: threading.Event | None = None  # once set, held tokens go to the observer at once (it closes the stream)
    held_since: float | None = None  # when the oldest token not handed over yet arrived
    held_chunks: float = 0  # chunks read from the socket and not taken yet (as _hold counts them)
    held_bytes: int = 0  # bytes read from the socket and not taken yet
    smallest_chunk: int = 0  # bytes of the smallest token chunk of the last batch parsed together (0: none yet)
    raw_batches: bool = False  # batches are made of the bytes read (_dechunked): each one's tokens go over at once
    first_at: float | None = None  # when the first tokens arrived
    simulated: bool = False
    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)  # the reasoning deltas (a server with a reasoning parser)
    batches: list[TokenBatch] = field(default_factory=list)
    n_tokens: int = 0
    chunks: int = 0
    batched_chunks: int = 0
    finish_reason: str | None = None
    usage: tuple[int, int] | None = None
    done: bool = False
    stopped: bool = False
    finish_unread: bool = False  # the finish_reason was in the bytes read when the observer stopped, after its tokens
    body_read: bool = False  # the chunked body was read to its last byte: the connection can serve the next call
    # logprobs.content items read, not yet in a batch: a chunk's as bytes when cut out of it, else as parsed
    pending: list[_Raw | list[Any]] = field(default_factory=list)
    template: _Template | None = None  # the layout of this stream's token chunks, once one was read in full
    raw_text: list[bytes] = field(default_factory=list)  # delta.content of templated chunks, JSON, not decoded
    decoder: SSEDecoder = field(default_factory=lambda: SSEDecoder())

    def read(self, pieces: Iterable[bytes], started: float) -> Streamed:
        decoder = self.decoder
        for data in pieces:
            self._piece(decoder.feed(self._templated(decoder, data)))
            if self.done or self.stopped:
                break
        else:
            if not self.stopped:
                self._piece(decoder.close())
        if self.pending and not self.stopped:
            self._tokens()
        if not self.stopped:
            self._check_end()
        return self._result(started)

    def _check_end(self) -> None:
        """The checks ingest makes of a whole completion, on a stream that ran to its end."""
        if not (self.done or self.finish_reason):
            self._fail("stream cut", f"the stream ended after {self.chunks} chunks without a finish_reason "
                                     f"or data: [DONE]")
        if self.finish_reason not in FINISH_REASONS:
            self._fail(f"finish_reason {self.finish_reason}", "the server ended the completion early")
        if (self.text or self.reasoning) and not self.n_tokens:
            self._fail("missing logprobs", "the stream's chunks carry content but no logprobs.content")
        if self.n_tokens and all(sentinels_only(batch.token_logprobs, batch.token_confidence)
                                 for batch in self.batches if batch.tokens):
            self._fail(*SENTINELS_ONLY)

    def _templated(self, decoder: SSEDecoder, data: bytes) -> bytes:
        """The read's leading events of the learned layout taken straight from its bytes: many at once by the batch
        path, else cut one by one (no copy of each event), counted; what follows them, for the decoder."""
        if not decoder.idle() or (self.template is None and b"\n\n" not in data):
            return data
        buffer = decoder.take(data)
        if self.template is None:
            buffer = self._learn(decoder, buffer)
            if self.template is None or self.stopped or self.done:
                return buffer
        start = self._take_batch(buffer, sse_events)
        if self.stopped:
            self._unread(buffer[start:])
            return b""
        at, cut = self.template.cut_lines(buffer, self.raw_text, self.pending, start)
        self.chunks += cut
        return buffer[at:] if at else buffer

    def _unread(self, rest: bytes) -> None:
        """The bytes that had arrived when the observer stopped, left unread: a finish_reason among them means the
        server had finished the trace before the client closed it."""
        self.finish_unread = self.finish_unread or _FINISH.search(rest) is not None

    def _learn(self, decoder: SSEDecoder, buffer: bytes) -> bytes:
        """The first events of `buffer` read one by one until a token chunk taught the layout (the role chunk and a
        comment come first); what follows them."""
        at = 0
        for _ in range(_LEARN_EVENTS):
            end = buffer.find(b"\n\n", at)
            if end < 0:
                break
            self._read_events(decoder.feed(buffer[at:end + 2]))
            at = end + 2
            if self.template is not None or self.done or self.stopped:
                break
        if self.stopped:
            self._unread(buffer[at:])
        return buffer[at:]

    def _take_batch(self, buffer: bytes, locate: Callable[[bytes], Events]) -> int:
        """The token chunks of the learned layout at the start of `buffer`, when there are many, parsed together
        (stream_fast) and handed to the observer as one batch, after any held from before: the bytes they took (0:
        none; the caller cuts them one by one)."""
        template = self.template
        if template is None or len(buffer) < MIN_EVENTS * template.size:
            return 0
        raw = np.frombuffer(buffer, dtype=np.uint8)
        batch = take_batch(buffer, raw, locate(buffer), template.head, template.middle, template.tail, self.k,
                           self.keep_top_tokens)
        if batch is None:
            return 0
        self._flush_text()
        self.chunks += batch.chunks
        self.batched_chunks += batch.chunks
        self.smallest_chunk = batch.smallest
        self._texts().extend(batch.texts)
        items = batch.items
        parts = [(items.tokens, items.chosen, items.top, items.top_tokens)]
        if self.pending:  # tokens read before these (the chunk that taught the layout) go over with them, first
            parts.insert(0, self._read_pending())
        self._hand_over(*_concatenated(parts))
        return batch.consumed

    def _piece(self, events: list[bytes]) -> None:
        """The events of one read: every chunk read, then their tokens handed to the observer as one batch."""
        self._read_events(events)
        if not self.pending:
            return
        if self.raw_batches:  # the batch was made of the bytes read (_dechunked)
            self._tokens()
            return
        now = time.monotonic()
        self.held_since = self.held_since or now
        self.first_at = self.first_at or now
        if self._due(len(self.pending)):
            self._tokens()

    def _read_events(self, events: list[bytes]) -> None:
        """Every chunk of `events` read; their items and content held (`pending`, `text`)."""
        template = self.template
        for event in events:
            if template is not None and template.cut(event, self.raw_text, self.pending):
                self.chunks += 1
                continue
            self._event(event)
            if self.done:
                break
            template = self.template
        self._flush_text()

    def pieces(self, response: requests.Response) -> Iterator[bytes]:
        """What arrives on the connection, a read at a time, until it ends.

        A chunked body (every server's SSE) is read straight from the connection's buffered socket and its framing
        taken off here: http.client's read1 returns one HTTP chunk a call, and servers send an event a chunk, so
        each token cost a call through urllib3 and http.client; one read now takes every chunk that has arrived.
        A body read to its end here gives its connection back to the pool (_give_back), as urllib3 would."""
        raw = _chunked_socket(response)
        if raw is not None:
            yield from self._dechunked(raw)
            return
        while True:
            if self.pending:  # no way to look at the socket here: held tokens go over before a read that may wait
                self._tokens()
                if self.stopped:
                    return
            try:
                data = response.raw.read1(_READ_SIZE)
            except urllib3.exceptions.ReadTimeoutError as exc:
                self._fail("timeout", self.redact(str(exc)))
            except (urllib3.exceptions.ProtocolError, urllib3.exceptions.DecodeError, http.client.HTTPException,
                    OSError) as exc:
                self._fail("connection", self.redact(str(exc)))
            if not data:
                return
            yield data

    def _dechunked(self, raw: BinaryIO) -> Iterator[bytes]:
        """The payloads of the HTTP chunks on `raw`, until the last (empty) chunk, a batch at a time.

        The bytes read are held until a batch is due (`batch_chunks` chunks, or `hold_s` since the first of them
        arrived, or nothing more arriving while tokens wait); then its token chunks are parsed together and
        handed over (_take_batch), and what is left is unchunked for the per-chunk path."""
        self.raw_batches = True
        held: list[bytes] = []  # bytes read, not taken yet; the first starts at a chunk's size line
        readable, small = _readable(raw), False
        if self.hold_s is not None:
            _widen_receive_buffer(raw)
        while True:
            if self.held_since is not None and self._hold_s() is not None and readable is not None and \
                    self._quiet(readable, small):
                left = yield from self._take(held)
                if left is None or self.stopped:
                    return
                held = left
                if not held:
                    continue
            try:
                data = raw.read1(_READ_SIZE)
            except TimeoutError as exc:
                self._fail("timeout", self.redact(str(exc) or "read timed out"))
            except OSError as exc:
                self._fail("connection", self.redact(str(exc)))
            if not data:
                left = (yield from self._take(held)) if held else []
                if left:
                    self._fail("connection", f"the connection closed inside an HTTP chunk ({len(left[0])} bytes left)")
                return
            small = len(data) < _SMALL_READ
            held.append(data)
            self._hold(data)
            # the last chunk (`0` CRLF CRLF) is taken at once: a server keeping the connection open sends no more
            if self._due(self.held_chunks) or data.endswith(b"0\r\n\r\n") or self._learning():
                left = yield from self._take(held)
                if left is None or self.stopped:
                    return
                held = left

    def _hold(self, data: bytes) -> None:
        """Count the chunks of a read: by its blank lines until a batch told their size (_learning keeps that short),
        then by its length over the smallest chunk's (a count of the bytes would cost a tenth of the parse; this one
        only ever counts more)."""
        now = time.monotonic()
        self.held_bytes += len(data)
        if self.smallest_chunk:
            self.held_chunks += len(data) / self.smallest_chunk
        elif not self._learning():  # else they go over now whatever their count
            self.held_chunks += data.count(b"\n\n")
        self.held_since = self.held_since or now
        self.first_at = self.first_at or now

    def _learning(self) -> bool:
        """Whether the stream's first batch is due early: until one told the chunks' size, each read is counted by
        its blank lines, so the first _FIRST_BATCH_BYTES go over (teaching the layout and that size) as they come."""
        return not self.smallest_chunk and self.held_bytes >= _FIRST_BATCH_BYTES

    def _counted(self) -> bool:
        """Whether the observer said how many tokens it can take before it could stop (or there is none)."""
        return self.observer is None or self.want is not None

    def _target(self) -> int:
        """The chunks a batch holds at most: `batch_chunks`, fewer when the observer could stop sooner, and no more
        than UNCOUNTED_CHUNKS while it has not said when it could."""
        if not self._counted():
            return min(self.batch_chunks, UNCOUNTED_CHUNKS)
        return self.batch_chunks if self.want is None else max(1, min(self.batch_chunks, self.want))

    def _hold_s(self) -> float | None:
        """The longest a token is held back: `hold_s`, and no more than UNCOUNTED_HOLD_S while the observer has not
        said when it could stop (so a stop is noticed soon after its token arrives)."""
        if self.hold_s is None or self._counted():
            return self.hold_s
        return min(self.hold_s, UNCOUNTED_HOLD_S)

    def _cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def _due(self, held: float) -> bool:
        """Whether the `held` chunks go over now: a full batch, a hold that ran out, or a cancel."""
        hold_s = self._hold_s()
        return held >= self._target() or self._cancelled() or (
            hold_s is not None and self.held_since is not None and time.monotonic() - self.held_since >= hold_s)

    def _take(self, held: list[bytes]) -> Generator[bytes, None, list[bytes] | None]:
        """The held bytes' whole chunks: the leading token chunks parsed together, the rest unchunked and yielded to
        the per-chunk path. What is left (a chunk not read whole yet), or None after the last chunk."""
        buffer = held[0] if len(held) == 1 else b"".join(held)
        self.held_chunks, self.held_bytes, self.held_since = 0, 0, None
        start = 0
        if self.template is None and self.decoder.empty():  # the first chunks one by one, until one teaches the layout
            first = http_events(buffer[:_LEARN_BYTES])
            for payload_start, payload_end, after in itertools.islice(zip(
                    first.starts.tolist(), first.ends.tolist(), first.after.tolist(), strict=True), _LEARN_EVENTS):
                yield buffer[payload_start:payload_end]
                start = after
                if self.template is not None or self.stopped or self.done:
                    break
            if self.stopped or self.done:
                self._unread(buffer[start:])
                return None
        if self.template is not None and self.decoder.empty():
            start += self._take_batch(buffer[start:] if start else buffer, http_events)
        if self.stopped:
            self._unread(buffer[start:])
            return None
        payloads, left, ended = _unchunk(buffer[start:] if start else buffer)
        self.body_read = ended and left == b"\r\n"
        if payloads:
            yield payloads
        if ended:
            return None
        return [left] if left else []

    def _quiet(self, readable: Callable[[], bool], small: bool) -> bool:
        """Before a read with bytes held back: after a read that caught up with the server, sleep until their
        deadline, or less when the chunks so far came fast enough to fill the batch sooner (the next read takes
        what arrived meanwhile); when the observer could stop within the batch, only until _NEAR chunks are left
        before it could, and not at all after that, so the chunks near a possible stop are read as they arrive
        (a server sends them in bursts: a read after a sleep would take a burst past the stop); a cancel ends the
        sleep. Whether nothing has arrived then (or the stream was cancelled): the held bytes are taken before the
        client waits."""
        if small and self.held_since is not None:
            now = time.monotonic()
            left = self.held_since + self._hold_s() - now  # type: ignore[operator]
            seen = self.chunks + self.held_chunks
            rest = self._target() - self.held_chunks - (0 if self.want is None else _NEAR)
            if self.first_at is not None and now > self.first_at and seen:  # no longer than the rest of the batch
                # takes at the stream's pace so far
                left = min(left, rest * (now - self.first_at) / seen)
            if self.cancel is None:
                time.sleep(max(0.0, left))
            elif self.cancel.wait(max(0.0, left)):
                return True  # cancelled: the held tokens go over now, and the observer closes the stream
        return not readable()

    def _event(self, data: bytes) -> None:
        if data == _DONE:
            self.done = True
            return
        self.chunks += 1
        chunk = self._chunk(data)
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

    def _chunk(self, data: bytes) -> Any:
        """The chunk parsed; its logprobs items, when they can be cut out as bytes, left in `pending` instead."""
        cut = _cut_items(data)
        if cut is not None:
            with contextlib.suppress(orjson.JSONDecodeError):
                rest = orjson.loads(cut[1])
                if _empty_items(rest):
                    self.pending.append(cut[0])
                    # a chunk that left the layout may start a new one (a server whose `created` ticks, or one
                    # whose reasoning parser passes from the thinking's deltas to the answer's)
                    learnt = _Template.learn(rest, cut[1])
                    if learnt is not None and self.template is not None and learnt.field != self.template.field:
                        self._flush_text()  # the texts cut by the old layout go where its field says
                    self.template = learnt or self.template
                    return rest
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            self._fail("malformed chunk", f"chunk {self.chunks} is not JSON ({exc}): {data[:80]!r}")

    def _texts(self) -> list[str]:
        """Where the learned layout's texts go: `reasoning` for a reasoning parser's thinking, else `text`."""
        return self.reasoning if self.template is not None and self.template.field != "content" else self.text

    def _flush_text(self) -> None:
        """The texts of the templated chunks read so far, decoded in one call, onto `text` (or `reasoning`)."""
        if not self.raw_text:
            return
        raw, self.raw_text = self.raw_text, []
        try:
            strings = orjson.loads(b"[" + b",".join(raw) + b"]")
        except orjson.JSONDecodeError:
            strings = None
        if not isinstance(strings, list) or len(strings) != len(raw) or not all(isinstance(s, str) for s in strings):
            self._fail("malformed chunk", f"a delta.content before chunk {self.chunks + 1} is not a JSON string")
        self._texts().extend(strings)

    def _choice(self, choice: dict[str, Any]) -> None:
        delta = choice.get("delta")
        content = delta.get("content") if isinstance(delta, dict) else None
        if isinstance(content, str):
            self._flush_text()
            self.text.append(content)
        thought = reasoning_text(delta)
        if thought:
            self._flush_text()  # thinking cut by the learned layout comes first
            self.reasoning.append(thought)
        logprobs = choice.get("logprobs")
        items = logprobs.get("content") if isinstance(logprobs, dict) else None
        if items:
            if not isinstance(items, list):
                self._fail("malformed chunk", f"chunk {self.chunks}: logprobs.content is not a list")
            self.pending.append(items)
        if choice.get("finish_reason") is not None:
            self.finish_reason = choice["finish_reason"]

    def _tokens(self) -> None:
        self._hand_over(*self._read_pending())

    def _read_pending(self) -> tuple[list[str], np.ndarray, np.ndarray, list[list[str]] | None]:
        pending, self.pending = self.pending, []
        try:
            return _read_batch(pending, self.k, self.keep_top_tokens)
        except TransientError as exc:
            self._fail("malformed chunk", f"chunk {self.chunks}: {exc.detail}")

    def _hand_over(self, tokens: list[str], chosen: np.ndarray, top: np.ndarray,
                   top_tokens: list[list[str]] | None) -> None:
        """Tokens and their logprobs (float64, rows best first) to the observer, as one TokenBatch."""
        if not self.raw_batches:
            self.held_since = None
        token_logprobs, confidence, top_logprobs = stored_measures(chosen, top, self.keep_top_logprobs)
        batch = TokenBatch(self.n_tokens, tokens, token_logprobs, top_logprobs, confidence, top_tokens)
        self.batches.append(batch)
        self.n_tokens += len(tokens)
        answer = None if self.observer is None else self.observer(batch)
        self.stopped = answer == "stop"
        self.want = answer if isinstance(answer, int) else None

    def _fail(self, cause: str, detail: str) -> NoReturn:
        if self.raw_text:
            with contextlib.suppress(TransientError, StreamBroken):
                self._flush_text()
        if self.pending:  # tokens that arrived in the same read as the failure: the observer sees them first
            self._tokens()
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
            top_logprobs=_joined([batch.top_logprobs for batch in batches], (0, self.k))  # type: ignore[misc]
            if self.keep_top_logprobs else None,
            top_tokens=[row for batch in batches for row in batch.top_tokens or []] if self.keep_top_tokens else None,
            token_confidence=_joined([batch.token_confidence for batch in batches], (0,)),
            finish_reason=None if self.stopped else self.finish_reason, stop_reason=stop_reason,
            prompt_tokens=prompt, completion_tokens=completion,
            usage_source="server" if self.usage is not None else "client",
            latency_s=time.monotonic() - started if started else 0.0, chunks=self.chunks,
            batched_chunks=self.batched_chunks, done=self.done,
            simulated=self.simulated, server_finished=self.finish_reason is not None or self.finish_unread,
            reasoning="".join(self.reasoning))


@dataclass(frozen=True)
class _Template:
    """The bytes every token chunk of a stream shares: `head` + delta.content + `middle` + the logprobs.content
    items + `tail`. Servers repeat one layout (id, model, fingerprint, index, a null finish_reason) for every token,
    so once a chunk was parsed in full the next ones are checked against it with a few bytes operations, their
    content strings decoded together per read and their items read with the rest of the read's.

    >>> t = _Template(b'{"c":[{"delta":{"content":', b'},"logprobs":{"content":[', b']},"f":null}]}')
    >>> text, items = [], []
    >>> t.cut(b'{"c":[{"delta":{"content":"hi"},"logprobs":{"content":[{"token":"hi"}]},"f":null}]}', text, items)
    True
    >>> text, items
    ([b'"hi"'], [b'{"token":"hi"}'])
    """

    head: bytes  # up to delta.content's value
    middle: bytes  # from after it to the first item
    tail: bytes  # from after the last item to the end
    field: str = "content"  # the delta's one field: content, or a reasoning parser's reasoning_content or reasoning

    @property
    def size(self) -> int:
        """The bytes a chunk of this layout has at least, as a one-line event."""
        return len(self.head) + len(self.middle) + len(self.tail) + 8

    def cut(self, event: bytes, text: list[bytes], items: list[_Raw | list[Any]]) -> bool:
        """Whether `event` has this layout; if it has, its content (JSON) and items (bytes) appended.

        subtle: `middle` starts `},"` and a bare quote is never inside a JSON string, so its first occurrence after
        the content is the one that ends it; a content that is not one JSON string fails in _flush_text."""
        if not (event.startswith(self.head) and event.endswith(self.tail)):
            return False
        start = len(self.head)
        end = event.find(self.middle, start)
        first, last = end + len(self.middle), len(event) - len(self.tail)
        if end <= start or last <= first:
            return False
        text.append(event[start:end])
        items.append(event[first:last])
        return True

    def cut_lines(self, buffer: bytes, text: list[bytes], items: list[_Raw | list[Any]],
                  start: int = 0) -> tuple[int, int]:
        """As `cut`, on the one-line `data: ` events of an SSE buffer from `start`, as long as they have this
        layout: (the offset after the last one, how many)."""
        head, at, count, view = b"data: " + self.head, start, 0, memoryview(buffer)
        while True:
            if buffer.startswith(b":", at) or buffer.startswith(b"\n", at):
                # a comment line (": keep-alive") or a blank line with no event begun: nothing to an SSE reader
                end = buffer.find(b"\n", at)
                if end < 0:
                    break
                at = end + 1
                continue
            if not buffer.startswith(head, at):
                break
            end = buffer.find(b"\n", at)  # the line's end: the event's, when a blank line follows
            if end < 0 or not buffer.startswith(b"\n", end + 1) or not buffer.endswith(self.tail, at, end):
                break
            start = at + len(head)
            middle = buffer.find(self.middle, start, end)
            first, last = middle + len(self.middle), end - len(self.tail)
            if middle <= start or last <= first:
                break
            text.append(buffer[start:middle])
            items.append(view[first:last])
            at, count = end + 2, count + 1
        return at, count

    @classmethod
    def learn(cls, chunk: dict[str, Any], rest: bytes) -> _Template | None:
        """The layout of a chunk parsed in full (`rest`: its bytes with the items cut out, as _cut_items cuts), when
        it is a plain token chunk: one choice, a delta of content (or a reasoning parser's reasoning) alone, no
        finish_reason, usage or error."""
        at = rest.find(_ITEMS_KEY[:-1]) + len(_ITEMS_KEY) - 1  # where the items were
        choice = chunk["choices"][0]
        delta = choice.get("delta")
        if chunk.get("usage") is not None or chunk.get("error") is not None or choice.get("finish_reason") is not None \
                or choice.get("index", 0) != 0:
            return None
        name = next(iter(delta), None) if isinstance(delta, dict) and len(delta) == 1 else None
        if name not in ("content", *REASONING_FIELDS) or not isinstance(delta[name], str):
            return None
        key = b'"' + name.encode() + b'":'
        needle = key + orjson.dumps(delta[name])
        found = rest.find(needle)
        end = found + len(needle)
        if found < 0 or rest.find(needle, end) >= 0 or not end < at or not rest[end:at].startswith(b'},"'):
            return None
        return cls(rest[:found + len(key)], rest[end:at], rest[at:], name)


def _chunked_socket(response: requests.Response) -> BinaryIO | None:
    """The buffered socket under a chunked, unencoded body not read yet (None otherwise: read it through urllib3)."""
    conn = getattr(response.raw, "_fp", None)
    socket_file = getattr(conn, "fp", None)
    if not getattr(conn, "chunked", False) or getattr(conn, "chunk_left", 0) is not None or socket_file is None:
        return None
    if response.headers.get("Content-Encoding", "identity") != "identity" or not hasattr(socket_file, "read1"):
        return None
    return socket_file


def _give_back(response: requests.Response) -> None:
    """The connection back to the session's pool for the next call, once its chunked body was read to the end here
    (as urllib3 gives it back when it reads a body to its end itself): http.client's response closed (its socket file,
    not the socket), then urllib3's connection released, so requests' close after leaves it open. A stream's new
    connection cost ~0.3 ms of client CPU on loopback, and a TLS handshake more to a hosted API."""
    response.raw._fp.close()
    response.raw.release_conn()


def _readable(raw: BinaryIO) -> Callable[[], bool] | None:
    """Whether bytes wait on the socket under `raw` (read with read1 alone, so its buffer is empty after the
    first read), without blocking; None when the socket cannot be reached."""
    sock = getattr(getattr(raw, "raw", None), "_sock", None)
    if sock is None or not hasattr(sock, "fileno"):
        return None
    pending = getattr(sock, "pending", None)  # TLS: bytes decrypted already are not on the socket

    def readable() -> bool:
        if pending is not None and pending():
            return True
        return bool(select.select([sock], [], [], 0)[0])

    return readable


def _widen_receive_buffer(raw: BinaryIO) -> None:
    """Ask for a receive buffer that holds a batch (the kernel caps it at net.core.rmem_max): a client holding its
    tokens back for `hold_s` should not make a fast server's writes wait (docs/endpoints.md has the figures)."""
    sock = getattr(getattr(raw, "raw", None), "_sock", None)
    with contextlib.suppress(AttributeError, OSError):
        if sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) < _RECEIVE_BUFFER:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _RECEIVE_BUFFER)


def _unchunk(data: bytes) -> tuple[bytes, bytes, bool]:
    r"""(the payloads of the whole chunks at the start of `data`, joined; what is left; whether the last chunk came).
    After the last chunk what is left is what followed its size line: the trailer section (a blank line alone when
    the body ended there).

    >>> _unchunk(b"3\r\nabc\r\n2\r\nde\r\n1\r\nf")
    (b'abcde', b'1\r\nf', False)
    >>> _unchunk(b"1;x=y\r\nz\r\n0\r\n\r\n")
    (b'z', b'\r\n', True)
    """
    payloads: list[memoryview] = []
    at, find, view = 0, data.find, memoryview(data)
    while True:
        line_end = find(b"\r\n", at)
        if line_end < 0:
            return b"".join(payloads), data[at:], False
        try:
            size = int(data[at:line_end], 16)
        except ValueError:
            size = _chunk_size(data[at:line_end])
        if size == 0:
            return b"".join(payloads), data[line_end + 2:], True
        end = line_end + 2 + size
        if len(data) < end + 2:
            return b"".join(payloads), data[at:], False
        payloads.append(view[line_end + 2:end])
        at = end + 2


def _chunk_size(line: bytes) -> int:
    """An HTTP chunk's size line with extensions (`1a;name=value`), which few servers send."""
    try:
        return int(line.split(b";", 1)[0], 16)
    except ValueError:
        raise TransientError("malformed chunk", f"an HTTP chunk size {line[:20]!r}") from None


def _cut_items(data: bytes) -> tuple[bytes, bytes] | None:
    """(choices[0].logprobs.content's items, without brackets; the chunk with that list left empty), or None when
    the chunk has no items or more than one choice. The items list ends at the last ']' before "finish_reason",
    which follows logprobs in every layout (a bare `"key":` cannot occur inside a JSON string); a cut anywhere else
    leaves the rest invalid JSON or the items not in ingest_fast's layout, and the chunk is read whole instead."""
    start = data.find(_ITEMS_KEY)
    if start < 0 or data.count(b'"logprobs":') != 1:
        return None
    finish = data.find(b'"finish_reason":', start)
    end = data.rfind(b"]", start, finish) if finish > 0 else -1
    first = start + len(_ITEMS_KEY) - 1
    if end <= first or data[end - 1] != ord("}"):
        return None
    return data[first:end], data[:first] + data[end:]


def _empty_items(chunk: Any) -> bool:
    """Whether the chunk's one choice has `logprobs.content` and it is []."""
    try:
        choices = chunk["choices"]
        return len(choices) == 1 and choices[0]["logprobs"]["content"] == []
    except (KeyError, IndexError, TypeError):
        return False


def _read_batch(pending: list[_Raw | list[Any]], k: int,
                keep_top_tokens: bool) -> tuple[list[str], np.ndarray, np.ndarray, list[list[str]] | None]:
    """Tokens, chosen and top logprobs (float64, rows best first, k wide) of the items of a read's chunks.

    Items cut out as bytes go, together, through ingest's fast path as one completion body (the numpy work once
    per read, not per chunk); any other, or bytes that path does not take, through ingest's item reader."""
    if len(pending) >= _FAST_BATCH and all(isinstance(part, bytes | memoryview) for part in pending):
        parts = list(pending)
        parts[0], parts[-1] = _BODY_HEAD + parts[0], bytes(parts[-1]) + _BODY_TAIL  # type: ignore[operator]
        body = b",".join(parts)  # type: ignore[arg-type]  # one copy of the items, the body's head and tail on them
        parsed = parse_fast(body, k, keep_top_tokens)
        if parsed is not None:
            return parsed.tokens, parsed.chosen, parsed.top, parsed.top_tokens
    items = [item for part in pending
             for item in (_loads_items(part) if isinstance(part, bytes | memoryview) else part)]
    return read_items(items, k, keep_top_tokens)[:4]


def _concatenated(parts: list[tuple[list[str], np.ndarray, np.ndarray, list[list[str]] | None]]
                  ) -> tuple[list[str], np.ndarray, np.ndarray, list[list[str]] | None]:
    """Tokens, chosen and top logprobs and top tokens of consecutive reads, as one."""
    if len(parts) == 1:
        return parts[0]
    top_tokens = [row for part in parts for row in part[3] or []] if parts[0][3] is not None else None
    return ([token for part in parts for token in part[0]], np.concatenate([part[1] for part in parts]),
            np.concatenate([part[2] for part in parts]), top_tokens)


def _loads_items(raw: _Raw) -> list[Any]:
    try:
        return orjson.loads(b"[" + raw + b"]")
    except orjson.JSONDecodeError as exc:
        raise TransientError("malformed JSON", f"logprobs.content is not JSON ({exc})") from None


def _joined(parts: list[np.ndarray], empty_shape: tuple[int, ...]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.empty(empty_shape, dtype=np.float32)


def _error_text(error: Any) -> str:
    """error.message of an OpenAI-style error object, else the object itself, shortened."""
    message = error.get("message") if isinstance(error, dict) else error
    return " ".join(str(message).split())[:300]
