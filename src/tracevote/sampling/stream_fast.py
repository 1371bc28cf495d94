"""Many streamed chunks at once: the token chunks a batch of reads brought, found, checked and parsed together
(sampling.stream's batch path; its per-chunk path reads the rest), by compiled loops (sampling.kernels) and one
orjson call for their strings.

A stream's token chunks repeat one layout (sampling.stream._Template: `head` + delta.content + `middle` + the
logprobs items + `tail`). Over the bytes of a batch this module finds where each chunk lies: from the HTTP chunked
framing around each event (http_events: a size line, the payload, CRLF) or from the blank lines between one-line
events (sse_events). A chunk is taken when its payload is exactly `data: ` + `head` … `tail` + a blank line, with
no other line break in it; the leading run of such chunks is parsed together, the rest left to the caller. Inside
it, ingest_fast.parse_items finds every item by its keys; each chunk must hold at least one item, right after
`middle`, and its content (the bytes between `head` and `middle`) must be one JSON string: decoded together, one
call for the batch. Any doubt returns None, and the caller reads the same bytes chunk by chunk, which also names
what is wrong with them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracevote.sampling.ingest_fast import Items, aligned_words, json_strings, kernels, parse_items

MIN_EVENTS = 32  # fewer chunks do not repay this path's fixed cost (a few numpy calls)
_DATA = b"data: "


@dataclass(frozen=True, eq=False)
class Events:
    """Where each event of a buffer lies, in order: its first byte, the byte after its blank line, and where what
    follows it starts (past the CRLF that ends its HTTP chunk, or the event's end)."""

    starts: np.ndarray
    ends: np.ndarray
    after: np.ndarray

    def __len__(self) -> int:
        return len(self.starts)


@dataclass(frozen=True, eq=False)
class Batch:
    """The token chunks at the start of a buffer, parsed."""

    chunks: int
    consumed: int  # offset just past the last of them
    texts: list[str]  # each chunk's delta.content
    items: Items
    smallest: int  # bytes of the smallest token chunk's payload


def http_events(body: bytes) -> Events:
    """The payloads of the whole HTTP chunks at the start of `body` (a chunked body from a chunk's size line on) that
    are each one event of one line: up to the first chunk not read whole yet, the last (empty) chunk, a size line
    that is not hex digits alone, or a payload with a line break before its blank line."""
    raw = np.frombuffer(body, dtype=np.uint8)
    starts, ends = kernels().http_events(raw, aligned_words(raw))
    return Events(starts, ends, ends + 2)


def sse_events(body: bytes) -> Events:
    """The one-line events at the start of `body` (Server-Sent Events, no HTTP framing), each up to its blank line,
    until one that is not whole yet, has a line break before its blank line, or is a blank line more."""
    raw = np.frombuffer(body, dtype=np.uint8)
    ends = kernels().sse_events(raw, aligned_words(raw))
    return Events(np.concatenate(([0], ends[:-1]))[:len(ends)].astype(np.int64), ends, ends)


def take_batch(body: bytes, raw: np.ndarray, events: Events, head: bytes, middle: bytes, tail: bytes, k: int,
               keep_top_tokens: bool) -> Batch | None:
    """The leading run of `events` that are token chunks of the layout (head, middle, tail) or comments (`:
    keep-alive`), parsed; None when fewer than MIN_EVENTS are, or anything in them is not as this path reads it."""
    prefix, suffix = _DATA + head, tail + b"\n\n"
    chunk, n = kernels().token_chunks(raw, events.starts, events.ends, _array(prefix), _array(suffix), len(middle))
    if n < MIN_EVENTS:
        return None
    consumed = int(events.after[n - 1])
    part_raw = raw[:consumed]  # a view: `body` itself is only sliced where part_raw says
    items = parse_items(body, part_raw, k, keep_top_tokens)
    if items is None:
        return None
    starts, ends, chunk = events.starts[:n], events.ends[:n], chunk[:n]
    content_ends = kernels().content_ends(part_raw, starts, ends, chunk, items.token_keys, _array(middle),
                                          len(prefix), len(suffix))
    if not len(content_ends):
        return None
    texts = _contents(part_raw, starts[chunk] + len(prefix), content_ends, items)
    if texts is None:
        return None
    return Batch(len(content_ends), consumed, texts, items, int((ends[chunk] - starts[chunk]).min()))


def _contents(raw: np.ndarray, starts: np.ndarray, ends: np.ndarray, items: Items) -> list[str] | None:
    """Each token chunk's delta.content (the JSON strings at [start, end)): when every chunk holds one item whose
    token string is the same bytes (as servers send a token a chunk), the tokens already decoded; else decoded."""
    if len(starts) == len(items.tokens) and kernels().same_spans(raw, starts, ends, items.token_keys + 1,
                                                                 items.token_ends):
        return items.tokens
    return json_strings(raw, starts, ends)


def _array(pattern: bytes) -> np.ndarray:
    return np.frombuffer(pattern, dtype=np.uint8)
