"""Many streamed chunks at once: the token chunks a batch of reads brought, found, checked and parsed together
(sampling.stream's batch path; its per-chunk path reads the rest). Per chunk, a find of its size line or line
break; the rest is numpy over the batch and one orjson call.

A stream's token chunks repeat one layout (sampling.stream._Template: `head` + delta.content + `middle` + the
logprobs items + `tail`). Over the bytes of a batch this module finds where each chunk lies: from the HTTP chunked
framing around each event (http_events: a size line, the payload, CRLF; the sizes are checked against the
payloads) or from the blank lines between one-line events (sse_events). A chunk is taken when its payload is
exactly `data: ` + `head` … `tail` + a blank line, with no other line break in it; the leading run of such chunks
is parsed together, the rest left to the caller. Inside it, ingest_fast.parse_items finds every item by its keys;
each chunk must hold at least one item, right after `middle`, and its content (the bytes between `head` and
`middle`) must be one JSON string: decoded together, one call for the batch. Any doubt returns None, and the
caller reads the same bytes chunk by chunk, which also names what is wrong with them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracevote.sampling.ingest_fast import Items, json_strings, parse_items

MIN_EVENTS = 32  # fewer chunks do not repay this path's fixed cost (a few dozen numpy calls)
_DATA = b"data: "
_SIZE_WIDTH = 8  # hex digits of the longest HTTP chunk size line read here (4 GiB)


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
    that is not a number, or a payload with a line break before its blank line. A loop over the size lines: a find
    and an int() a chunk, and memchr for the line break, cost less than a numpy pass over every byte."""
    starts: list[int] = []
    ends: list[int] = []
    at, find = 0, body.find
    while True:
        line_end = find(b"\r\n", at, at + _SIZE_WIDTH + 2)
        if line_end < 0:
            break
        try:
            size = int(body[at:line_end], 16)
        except ValueError:
            break
        start, end = line_end + 2, line_end + 2 + size
        if size <= 2 or not body.startswith(b"\r\n", end) or find(b"\n", start, end) != end - 2 or \
                body[end - 1] != 10:
            break
        starts.append(start)
        ends.append(end)
        at = end + 2
    payload_ends = np.array(ends, dtype=np.int64)
    return Events(np.array(starts, dtype=np.int64), payload_ends, payload_ends + 2)


def sse_events(body: bytes) -> Events:
    """The one-line events at the start of `body` (Server-Sent Events, no HTTP framing), each up to its blank line,
    until one that is not whole yet, has a line break before its blank line, or is a blank line more."""
    ends: list[int] = []
    at, find = 0, body.find
    while True:
        end = find(b"\n", at)  # memchr: a JSON line holds no line break, so the first one ends it
        if end <= at or body[end + 1:end + 2] != b"\n":
            break
        at = end + 2
        ends.append(at)
    event_ends = np.array(ends, dtype=np.int64)
    return Events(np.concatenate(([0], event_ends[:-1]))[:len(ends)].astype(np.int64), event_ends, event_ends)


def take_batch(body: bytes, raw: np.ndarray, events: Events, head: bytes, middle: bytes, tail: bytes, k: int,
               keep_top_tokens: bool) -> Batch | None:
    """The leading run of `events` that are token chunks of the layout (head, middle, tail) or comments (`:
    keep-alive`), parsed; None when fewer than MIN_EVENTS are, or anything in them is not as this path reads it."""
    prefix, suffix = _DATA + head, tail + b"\n\n"
    chunk = _framed(body, events, prefix, suffix, len(middle))
    comment = ~chunk & (raw[np.minimum(events.starts, len(raw) - 1)] == ord(":"))
    n = _leading(chunk | comment)
    for i in np.flatnonzero(comment[:n]).tolist():
        if b'"' in body[events.starts[i]:events.ends[i]]:  # it might hold what looks like a key: the run ends there
            n = i
            break
    if n < MIN_EVENTS:
        return None
    consumed = int(events.after[n - 1])
    part = body if consumed == len(body) else body[:consumed]
    part_raw = raw[:consumed]
    items = parse_items(part, part_raw, k, keep_top_tokens)
    if items is None:
        return None
    chunks = np.flatnonzero(chunk[:n])
    content_ends = _content_ends(part, part_raw, events.starts[:n], chunks, events.ends[chunks], items, middle,
                                 len(prefix), len(suffix))
    texts = None if content_ends is None else json_strings(part, part_raw, events.starts[chunks] + len(prefix),
                                                           content_ends)
    if texts is None:
        return None
    return Batch(len(chunks), consumed, texts, items, int((events.ends[chunks] - events.starts[chunks]).min()))


def _leading(flags: np.ndarray) -> int:
    """How many of `flags` are True before the first False."""
    return len(flags) if flags.all() else int(np.argmin(flags))


def _framed(body: bytes, events: Events, prefix: bytes, suffix: bytes, middle: int) -> np.ndarray:
    """Whether each event starts with `prefix` and ends with `suffix`, with room for content, middle and an item.
    (Counting each in the batch's bytes instead, two finds in C, costs more: ~0.8 against ~0.55 us an event.)"""
    starts, ends = events.starts, events.ends
    fits = ends - starts >= len(prefix) + 2 + middle + 2 + len(suffix)
    return fits & _equal_at(body, np.where(fits, starts, 0), prefix) & _equal_at(
        body, np.where(fits, ends - len(suffix), 0), suffix)


def _equal_at(body: bytes, offsets: np.ndarray, expected: bytes) -> np.ndarray:
    """Whether `expected` (8 bytes or more) is at each offset of `body`, compared 8 bytes at a time: its words at
    0, 8, 16, … and its last 8 bytes."""
    words = np.ndarray((max(len(body) - 7, 0),), dtype="<u8", buffer=body, strides=(1,))
    at = np.append(np.arange(0, len(expected) - 7, 8), len(expected) - 8)
    want = np.array([int.from_bytes(expected[i:i + 8], "little") for i in at.tolist()], dtype=np.uint64)
    positions = np.minimum(offsets[:, None] + at, len(words) - 1)
    return (words[positions] == want).all(axis=1)


def _content_ends(body: bytes, raw: np.ndarray, starts: np.ndarray, chunks: np.ndarray, ends: np.ndarray, items: Items,
                  middle: bytes, prefix: int, suffix: int) -> np.ndarray | None:
    """Where the content of each token chunk (events `chunks` of those at `starts`, ending at `ends`) ends and
    `middle` starts, when the items lie in them alone, one or more in each, right after `middle`, and each one's
    last item ends where its `tail` begins; else None."""
    event_of = np.searchsorted(starts, items.token_keys, side="right") - 1
    first = np.flatnonzero(np.diff(event_of, prepend=-1))  # each event's first item
    if not np.array_equal(event_of[first], chunks):
        return None
    item_starts = items.token_keys[first] - 8  # `{"token":`: the brace 8 bytes before the colon
    content_ends = item_starts - len(middle)
    if (content_ends < starts[chunks] + prefix + 2).any() or not _equal_at(body, content_ends, middle).all():
        return None
    if (raw[item_starts] != ord("{")).any() or (raw[ends - suffix - 1] != ord("}")).any():
        return None
    return content_ends

