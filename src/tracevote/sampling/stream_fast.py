"""Many streamed chunks at once: the token chunks a batch of reads brought, found, checked and parsed in one pass of
numpy over the bytes, with no Python work per chunk (sampling.stream's batch path; its per-chunk path reads the
rest).

A stream's token chunks repeat one layout (sampling.stream._Template: `head` + delta.content + `middle` + the
logprobs items + `tail`). Over the bytes of a batch this module finds where each chunk lies: from the HTTP chunked
framing around each event (http_events: a size line, the payload, CRLF; the sizes are checked against the
payloads) or from the blank lines between one-line events (sse_events). A chunk is taken when its payload is
exactly `data: ` + `head` … `tail` + a blank line, with no other line break in it; the leading run of such chunks
is parsed together, the rest left to the caller. Inside it, ingest_fast.read_items finds every item by its keys;
each chunk must hold at least one item, right after `middle`, and its content (the bytes between `head` and
`middle`) must be one JSON string: decoded together, one call for the batch. Any doubt returns None, and the
caller reads the same bytes chunk by chunk, which also names what is wrong with them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import orjson

from tracevote.sampling.ingest_fast import Items, read_items

MIN_EVENTS = 32  # fewer chunks do not repay this path's fixed cost (a few dozen numpy calls)
_DATA = b"data: "
_SIZE_WIDTH = 8  # hex digits of the longest HTTP chunk size line read here (4 GiB)
_HEX = np.full(256, -1, dtype=np.int64)
_HEX[np.frombuffer(b"0123456789", dtype=np.uint8)] = np.arange(10)
_HEX[np.frombuffer(b"abcdef", dtype=np.uint8)] = np.arange(10, 16)
_HEX[np.frombuffer(b"ABCDEF", dtype=np.uint8)] = np.arange(10, 16)
_POWERS = 16 ** np.arange(_SIZE_WIDTH, dtype=np.int64)


@dataclass(frozen=True, eq=False)
class Events:
    """Where each event of a buffer lies, in order: its first byte, the byte after its blank line, and where what
    follows it starts (past the CRLF that ends its HTTP chunk, or the event's end)."""

    starts: np.ndarray
    ends: np.ndarray
    after: np.ndarray
    framing_crs: int  # carriage returns each event's framing has (2: an HTTP chunk's; 0: none)

    def __len__(self) -> int:
        return len(self.starts)


@dataclass(frozen=True, eq=False)
class Batch:
    """The token chunks at the start of a buffer, parsed."""

    chunks: int
    consumed: int  # offset just past the last of them
    texts: list[str]  # each chunk's delta.content
    items: Items


def http_events(raw: np.ndarray) -> Events:
    """The payloads of the whole HTTP chunks at the start of `raw` (a chunked body from a chunk's size line on),
    up to the first chunk whose size line is not plain hex or whose size is not its payload's length, or the last
    (empty) chunk. A payload with a line break of its own pairs the CRLFs wrongly, so its size does not match."""
    crs = np.flatnonzero(raw[:-1] == 13)
    crlf = crs[raw[crs + 1] == 10]
    pairs = len(crlf) // 2
    size_ends, payload_ends = crlf[0:2 * pairs:2], crlf[1:2 * pairs:2]
    size_starts = np.concatenate(([0], payload_ends[:-1] + 2)).astype(np.int64)[:pairs]
    widths = size_ends - size_starts
    positions = size_starts[:, None] + np.arange(_SIZE_WIDTH)
    digits = _HEX[raw[np.minimum(positions, len(raw) - 1)]]
    in_line = np.arange(_SIZE_WIDTH) < widths[:, None]
    powers = _POWERS[np.clip(widths[:, None] - 1 - np.arange(_SIZE_WIDTH), 0, _SIZE_WIDTH - 1)]
    sizes = np.where(in_line, digits * powers, 0).sum(axis=1)
    whole = (widths >= 1) & (widths <= _SIZE_WIDTH) & ((digits >= 0) | ~in_line).all(axis=1)
    whole &= (sizes > 0) & (sizes == payload_ends - size_ends - 2)
    n = _leading(whole)
    return Events(size_ends[:n] + 2, payload_ends[:n], payload_ends[:n] + 2, framing_crs=2)


def sse_events(raw: np.ndarray) -> Events:
    """The events at the start of `raw` (Server-Sent Events, no HTTP framing), each up to its blank line; which of
    them are one `data: ` line, take_batch checks."""
    newlines = np.flatnonzero(raw == 10)
    blank = newlines[:-1][np.diff(newlines) == 1]  # the first newline of each "\n\n"
    ends = blank + 2
    starts = np.concatenate(([0], ends[:-1])).astype(np.int64)
    whole = ends - starts > 2  # "\n\n\n" (a blank line more) is no event: the per-chunk path reads it
    n = _leading(whole)
    return Events(starts[:n], ends[:n], ends[:n], framing_crs=0)


def take_batch(body: bytes, raw: np.ndarray, events: Events, head: bytes, middle: bytes, tail: bytes, k: int,
               keep_top_tokens: bool) -> Batch | None:
    """The leading run of `events` that are token chunks of the layout (head, middle, tail) or comments (`:
    keep-alive`), parsed; None when fewer than MIN_EVENTS are, or anything in them is not as this path reads it."""
    prefix, suffix = _DATA + head, tail + b"\n\n"
    chunk = _framed(raw, events, prefix, suffix, len(middle))
    comment = ~chunk & (raw[np.minimum(events.starts, len(raw) - 1)] == ord(":"))
    n = _leading(chunk | comment)
    if n < MIN_EVENTS or any(b'"' in body[start:end] for start, end in _spans(events, np.flatnonzero(comment[:n]))):
        return None  # a comment with a quote might hold what looks like a key
    consumed = int(events.after[n - 1])
    part = body if consumed == len(body) else body[:consumed]
    part_raw = raw[:consumed]
    newlines, crs = np.count_nonzero(part_raw == 10), np.count_nonzero(part_raw == 13)
    if newlines != (2 + events.framing_crs) * n or crs != events.framing_crs * n:  # a line break inside an event
        return None
    items = read_items(part, part_raw, k, keep_top_tokens)
    if items is None:
        return None
    chunks = np.flatnonzero(chunk[:n])
    content_ends = _content_ends(part_raw, events.starts[:n], chunks, events.ends[chunks], items, middle, len(prefix),
                                 len(suffix))
    texts = None if content_ends is None else _texts(part, events.starts[chunks] + len(prefix), content_ends)
    if texts is None:
        return None
    return Batch(len(chunks), consumed, texts, items)


def _leading(flags: np.ndarray) -> int:
    """How many of `flags` are True before the first False."""
    return len(flags) if flags.all() else int(np.argmin(flags))


def _framed(raw: np.ndarray, events: Events, prefix: bytes, suffix: bytes, middle: int) -> np.ndarray:
    """Whether each event starts with `prefix` and ends with `suffix`, with room for content, middle and an item."""
    starts, ends = events.starts, events.ends
    fits = ends - starts >= len(prefix) + 2 + middle + 2 + len(suffix)
    return fits & _equal_at(raw, np.where(fits, starts, 0), prefix) & _equal_at(
        raw, np.where(fits, ends - len(suffix), 0), suffix)


def _equal_at(raw: np.ndarray, offsets: np.ndarray, expected: bytes) -> np.ndarray:
    """Whether `expected` is at each offset of `raw`."""
    want = np.frombuffer(expected, dtype=np.uint8)
    positions = np.minimum(offsets[:, None] + np.arange(len(want)), len(raw) - 1)
    return (raw[positions] == want).all(axis=1)


def _content_ends(raw: np.ndarray, starts: np.ndarray, chunks: np.ndarray, ends: np.ndarray, items: Items,
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
    if (content_ends < starts[chunks] + prefix + 2).any() or not _equal_at(raw, content_ends, middle).all():
        return None
    if (raw[item_starts] != ord("{")).any() or (raw[ends - suffix - 1] != ord("}")).any():
        return None
    return content_ends


def _spans(events: Events, which: np.ndarray) -> zip[tuple[int, int]]:
    return zip(events.starts[which].tolist(), events.ends[which].tolist(), strict=True)


def _texts(body: bytes, starts: np.ndarray, ends: np.ndarray) -> list[str] | None:
    """Each event's content: one JSON string, all decoded in one call."""
    spans = zip(starts.tolist(), ends.tolist(), strict=True)
    try:
        texts = orjson.loads(b"[" + b",".join([body[start:end] for start, end in spans]) + b"]")
    except orjson.JSONDecodeError:
        return None
    if len(texts) != len(starts) or not all(isinstance(text, str) for text in texts):
        return None
    return texts
