"""Compiled loops (numba) over a streamed batch's bytes, for stream_fast (through ingest_fast.parse_items): each is one
pass in machine code where numpy needed several over the whole buffer, and each releases the GIL, so concurrent
streams parse in parallel. Non-streamed replies no longer use them (ingest_fast: msgspec's typed decoding); the
streaming client's rewrite on well-kept libraries (issue 46, item 1) drops stream_fast, and this module with it.

Every function takes the bytes as a uint8 array and returns offsets or values; none decides alone whether a
document is in the layout the fast paths read: they report what they found (or -1 / a status), and the callers
check the rest and fall back to the slow path on any doubt, as before. Compiled once per machine on first use
(`cache=True`: numba keeps the machine code beside this file, or in its user-wide cache when that is read-only).
This module is imported only when a stream's batch is first parsed, so a process that streams nothing does not load
numba.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_COLON, _QUOTE, _COMMA, _CLOSE_BRACE, _UNDERSCORE = 58, 34, 44, 125, 95
# Clinger's fast path: an integer of at most 15 digits (exact in float64) times or over a power of ten up to 1e22
# (exact too, the caller's `powers`) is one correctly rounded operation, so it equals what any correct parser
# (orjson) returns
_EXACT_DIGITS = 15
NUMBER_INVALID, NUMBERS_EXACT, NUMBERS_SOME_SLOW = -1, 0, 1
_LOW7, _HIGH = np.uint64(0x7F7F7F7F7F7F7F7F), np.uint64(0x8080808080808080)
_DE_BRUIJN = np.uint64(0x03F79D71B4CB0A89)
# Indexes are unsigned (np.uint64) in the hot loops: numba checks a signed index for wraparound, a branch per
# access that keeps LLVM from vectorizing a loop (4x slower, measured on the scans below)


@njit(cache=True, nogil=True, inline="always")
def _matching_bytes(word: np.uint64, pattern: np.uint64) -> np.uint64:
    """The high bit of each byte of `word` equal to that byte of `pattern` (SWAR, exact: no carries between
    bytes)."""
    x = word ^ pattern
    return ~(((x & _LOW7) + _LOW7) | x) & _HIGH


@njit(cache=True, nogil=True)
def find_keys(raw: np.ndarray, words: np.ndarray, unaligned: np.ndarray, key_logprob: np.uint64,
              key_ogprobs: np.uint64, bit_index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Offsets of the colon of every `"logprob":` and every `"top_logprobs":` key, ascending (inside a JSON string
    a quote is escaped, so a quote, the key and a colon are always a key).

    `words`: `raw` as aligned uint64 words; `unaligned`: the uint64 at each byte offset (a strided view); the keys'
    8 bytes before their colon, as uint64. Each key holds a 'g', a byte far rarer than the colons (~23 against ~72
    a streamed chunk): the g's are found a word at a time (bit_index maps a word's lowest set bit to its position),
    and at each the two keys are checked without a branch (a branch there mispredicts)."""
    logprob = np.empty(len(raw) // 10 + 1, dtype=np.int64)
    top = np.empty(len(raw) // 10 + 1, dtype=np.int64)
    n_logprob = n_top = np.uint64(0)
    g_bytes, one, eight = np.uint64(0x6767676767676767), np.uint64(1), np.uint64(8)
    for w in range(one, np.uint64(len(words))):  # a key's colon has at least 14 bytes before it in a document
        found = _matching_bytes(words[w], g_bytes)
        while found:
            lowest = found & (~found + one)
            found ^= lowest
            g = w * eight + np.uint64(bit_index[(lowest * _DE_BRUIJN) >> np.uint64(58)] >> 3)
            if g + np.uint64(7) >= len(raw):  # near the end: the keys' colons may lie past it
                break
            logprob[n_logprob], top[n_top] = g + np.uint64(6), g + np.uint64(7)
            n_logprob += np.uint64(_is_key(raw, unaligned, g + np.uint64(6), key_logprob, 9, _QUOTE))
            n_top += np.uint64(_is_key(raw, unaligned, g + np.uint64(7), key_ogprobs, 10, _UNDERSCORE))
    for g in range(max(np.uint64(len(words)) * eight, eight) - eight, np.uint64(len(raw))):  # the last bytes
        if raw[g] != 103 or g < eight or (g + np.uint64(7) < len(raw) and g < np.uint64(len(words)) * eight):
            continue  # not a g, or one the words' loop read
        if g + np.uint64(6) < len(raw) and _is_key(raw, unaligned, g + np.uint64(6), key_logprob, 9, _QUOTE):
            logprob[n_logprob] = g + np.uint64(6)
            n_logprob += np.uint64(1)
        if g + np.uint64(7) < len(raw) and _is_key(raw, unaligned, g + np.uint64(7), key_ogprobs, 10, _UNDERSCORE):
            top[n_top] = g + np.uint64(7)
            n_top += np.uint64(1)
    return logprob[:n_logprob], top[:n_top]


@njit(cache=True, nogil=True, inline="always")
def _is_key(raw: np.ndarray, unaligned: np.ndarray, colon: np.uint64, before: np.uint64, opening: int,
            opening_byte: int) -> bool:
    """Whether a colon is at `colon`, `before` (8 bytes) right before it, and `opening_byte` `opening` bytes
    before it."""
    return (raw[colon] == _COLON) & (unaligned[colon - np.uint64(8)] == before) & (
        raw[colon - np.uint64(opening)] == opening_byte)


@njit(cache=True, nogil=True)
def read_numbers(raw: np.ndarray, colons: np.ndarray,
                 powers: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The JSON number right after each colon, ending at a ',' or '}': (values, slow, ends, status).

    status NUMBER_INVALID when one is not a JSON number so ended (the caller falls back to the slow path);
    NUMBERS_SOME_SLOW when some (`slow`) fall outside the exact fast path (more than 15 significant digits, as
    vLLM prints a float32 in full, or a power of ten beyond 1e22): their values are 0 here and the caller parses
    them (orjson); else NUMBERS_EXACT. `ends`: the offset just past each number."""
    n, size = len(colons), len(raw)
    values = np.zeros(n, dtype=np.float64)
    slow = np.zeros(n, dtype=np.bool_)
    ends = np.zeros(n, dtype=np.int64)
    status = NUMBERS_EXACT
    for j in range(n):
        at = colons[j] + 1
        negative = at < size and raw[at] == 45
        at += negative
        if at >= size or not 48 <= raw[at] <= 57:
            return values, slow, ends, NUMBER_INVALID
        mantissa, significant, exponent, fraction_or_exponent = 0, 0, 0, False
        if raw[at] == 48:  # JSON: a 0 is never followed by digits
            at += 1
        else:
            while at < size and 48 <= raw[at] <= 57:
                if significant < _EXACT_DIGITS:
                    mantissa = mantissa * 10 + (raw[at] - 48)
                else:  # past 15 digits the number is read slowly: only its grammar is checked here
                    exponent += 1
                significant += 1
                at += 1
        if at < size and raw[at] == 46:  # '.'
            at += 1
            fraction_or_exponent = True
            first = at
            while at < size and 48 <= raw[at] <= 57:
                if significant < _EXACT_DIGITS:
                    mantissa = mantissa * 10 + (raw[at] - 48)
                    exponent -= 1
                if significant or raw[at] != 48:  # leading zeros are not significant
                    significant += 1
                at += 1
            if at == first:
                return values, slow, ends, NUMBER_INVALID
        if at < size and (raw[at] == 101 or raw[at] == 69):  # e, E
            at += 1
            fraction_or_exponent = True
            exponent_sign = -1 if at < size and raw[at] == 45 else 1
            at += at < size and (raw[at] == 45 or raw[at] == 43)
            first, written = at, 0
            while at < size and 48 <= raw[at] <= 57:
                written = min(written * 10 + (raw[at] - 48), 100000)  # beyond that the slow path decides
                at += 1
            if at == first:
                return values, slow, ends, NUMBER_INVALID
            exponent += exponent_sign * written
        if at >= size or (raw[at] != _COMMA and raw[at] != _CLOSE_BRACE):
            return values, slow, ends, NUMBER_INVALID
        ends[j] = at
        if significant > _EXACT_DIGITS or exponent > 22 or exponent < -22:
            slow[j] = True
            status = NUMBERS_SOME_SLOW
            continue
        value = mantissa * powers[exponent] if exponent >= 0 else mantissa / powers[-exponent]
        # JSON's -0 is an integer, read as 0.0 (orjson); -0.0 and -0e0 keep their sign
        values[j] = -value if negative and (value != 0 or fraction_or_exponent) else value
    return values, slow, ends, status


@njit(cache=True, nogil=True)
def token_keys(raw: np.ndarray, logprob_keys: np.ndarray, after: np.ndarray, key_token: np.ndarray) -> np.ndarray:
    """For each `,"logprob":` key, the colon of the nearest `"token":` key before it and after `after`: the token's
    string lies between them. -1 where there is none, or the logprob key does not follow a comma."""
    colons = np.full(len(logprob_keys), -1, dtype=np.int64)
    for j in range(len(logprob_keys)):
        comma = logprob_keys[j] - 10
        if comma < 0 or raw[comma] != _COMMA:
            continue
        for colon in range(comma - 2, after[j], -1):  # the string holds two quotes at least
            if raw[colon] == _COLON and colon >= len(key_token) - 1 and \
                    _equal_at(raw, colon - len(key_token) + 1, key_token):
                colons[j] = colon
                break
    return colons


@njit(cache=True, nogil=True)
def json_array_of(raw: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The spans [start, end) of `raw` joined as one JSON array's text (`[span,span,…]`), to decode in one call;
    empty when a span is not quoted at both ends (so it cannot be one JSON string)."""
    total = 2 + len(starts)
    for j in range(len(starts)):
        if ends[j] - starts[j] < 2 or raw[starts[j]] != _QUOTE or raw[ends[j] - 1] != _QUOTE:
            return np.zeros(0, dtype=np.uint8)
        total += ends[j] - starts[j]
    out = np.empty(total - (len(starts) > 0), dtype=np.uint8)
    out[0] = 91  # [
    at = 1
    for j in range(len(starts)):
        if j:
            out[at] = _COMMA
            at += 1
        size = ends[j] - starts[j]
        out[at:at + size] = raw[starts[j]:ends[j]]
        at += size
    out[at] = 93  # ]
    return out


# --- a stream's events ----------------------------------------------------------------------------------------

_LINE_FEED, _CARRIAGE_RETURN = 10, 13
_LINE_FEEDS = np.uint64(0x0A0A0A0A0A0A0A0A)
_SIZE_DIGITS = 8  # hex digits of the longest HTTP chunk size line read here (4 GiB)


@njit(cache=True, nogil=True)
def first_line_feed(raw: np.ndarray, words: np.ndarray, start: int, end: int) -> int:
    """Offset of the first line feed in raw[start:end], or -1: eight bytes at a time (`words`: `raw` as aligned
    uint64 words), since an event's line is long and holds none until its end."""
    one, eight = np.uint64(1), np.uint64(8)
    at = np.uint64(start)
    while at < end and at % eight:
        if raw[at] == _LINE_FEED:
            return np.int64(at)
        at += one
    w = at // eight
    while (w + one) * eight <= end and not _matching_bytes(words[w], _LINE_FEEDS):
        w += one
    for i in range(w * eight, np.uint64(end)):
        if raw[i] == _LINE_FEED:
            return np.int64(i)
    return -1


@njit(cache=True, nogil=True)
def _has_line_feed(raw: np.ndarray, words: np.ndarray, start: int, end: int) -> bool:
    """Whether raw[start:end] holds a line feed: every word looked at without a branch (vectorized), as a
    one-line event's long payload holds none."""
    eight = np.uint64(8)
    first_word, last_word = (np.uint64(start) + np.uint64(7)) // eight, np.uint64(end) // eight
    found = np.uint64(0)
    for w in range(first_word, last_word):
        found |= _matching_bytes(words[w], _LINE_FEEDS)
    edges = np.uint8(0)
    for i in range(np.uint64(start), min(first_word * eight, np.uint64(end))):
        edges |= raw[i] == _LINE_FEED
    for i in range(max(last_word * eight, np.uint64(start)), np.uint64(end)):
        edges |= raw[i] == _LINE_FEED
    return found != 0 or edges != 0


@njit(cache=True, nogil=True)
def _hex_digit(byte: int) -> int:
    if 48 <= byte <= 57:
        return byte - 48
    if 97 <= byte <= 102:
        return byte - 87
    if 65 <= byte <= 70:
        return byte - 55
    return -1


@njit(cache=True, nogil=True)
def http_events(raw: np.ndarray, words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the payloads of the whole HTTP chunks at the start of `raw` (a chunked body from a size
    line on) that are each one event of one line: a size line of hex digits, CRLF, a payload that ends with its
    only two line feeds, CRLF. It stops at the first chunk not read whole yet, the last (empty) chunk, a size line
    that is not hex digits alone, or a payload with a line break before its blank line."""
    size_limit = len(raw)
    starts = np.empty(size_limit // 5 + 1, dtype=np.int64)
    ends = np.empty(size_limit // 5 + 1, dtype=np.int64)
    n = at = 0
    while True:
        size, line_end = 0, at
        while line_end < size_limit and line_end - at < _SIZE_DIGITS:
            digit = _hex_digit(raw[line_end])
            if digit < 0:
                break
            size = size * 16 + digit
            line_end += 1
        if line_end == at or line_end + 1 >= size_limit or raw[line_end] != _CARRIAGE_RETURN or \
                raw[line_end + 1] != _LINE_FEED:
            break
        start = line_end + 2
        end = start + size
        if size <= 2 or end + 2 > size_limit or raw[end] != _CARRIAGE_RETURN or raw[end + 1] != _LINE_FEED:
            break
        if raw[end - 2] != _LINE_FEED or raw[end - 1] != _LINE_FEED or _has_line_feed(raw, words, start, end - 2):
            break
        starts[n], ends[n] = start, end
        n += 1
        at = end + 2
    return starts[:n], ends[:n]


@njit(cache=True, nogil=True)
def sse_events(raw: np.ndarray, words: np.ndarray) -> np.ndarray:
    """The ends of the one-line events at the start of `raw` (Server-Sent Events, no HTTP framing), each past its
    blank line, until one that is not whole yet, has a line break before its blank line, or is a blank line."""
    ends = np.empty(len(raw) // 2 + 1, dtype=np.int64)
    n = at = 0
    while True:
        end = first_line_feed(raw, words, at, len(raw))
        if end <= at or end + 1 >= len(raw) or raw[end + 1] != _LINE_FEED:
            break
        at = end + 2
        ends[n] = at
        n += 1
    return ends[:n]


@njit(cache=True, nogil=True)
def _equal_at(raw: np.ndarray, at: int, expected: np.ndarray) -> bool:
    """Whether `expected` is at `at`: every byte compared without a branch (vectorized)."""
    differ = np.uint8(0)
    base = np.uint64(at)
    for j in range(np.uint64(len(expected))):
        differ |= raw[base + j] ^ expected[j]
    return differ == 0


@njit(cache=True, nogil=True)
def token_chunks(raw: np.ndarray, starts: np.ndarray, ends: np.ndarray, prefix: np.ndarray, suffix: np.ndarray,
                 middle_size: int) -> tuple[np.ndarray, int]:
    """(whether each event is a token chunk, the leading run of token chunks and comments): a token chunk starts
    with `prefix` and ends with `suffix`, with room for its content, middle and an item between; a comment starts
    with ':' and holds no quote (one that does might hold what looks like a key, so the run ends there)."""
    chunk = np.zeros(len(starts), dtype=np.bool_)
    smallest = len(prefix) + 2 + middle_size + 2 + len(suffix)
    for e in range(len(starts)):
        start, end = starts[e], ends[e]
        if end - start >= smallest and _equal_at(raw, start, prefix) and _equal_at(raw, end - len(suffix), suffix):
            chunk[e] = True
            continue
        if raw[start] != _COLON:
            return chunk, e
        for i in range(start, end):
            if raw[i] == _QUOTE:
                return chunk, e
    return chunk, len(starts)


@njit(cache=True, nogil=True)
def content_ends(raw: np.ndarray, starts: np.ndarray, ends: np.ndarray, chunk: np.ndarray, token_keys: np.ndarray,
                 middle: np.ndarray, prefix_size: int, suffix_size: int) -> np.ndarray:
    """Where the content of each token chunk (the events flagged `chunk`) ends and `middle` starts, when the items
    (their `"token":` colons, ascending) lie in token chunks alone, one or more in each, the first right after
    `middle`, the last ending with the byte before the chunk's suffix; empty otherwise."""
    out = np.empty(len(starts), dtype=np.int64)
    n_chunks = item = 0
    failed = np.zeros(0, dtype=np.int64)
    for e in range(len(starts)):
        start, end = starts[e], ends[e]
        first = token_keys[item] if item < len(token_keys) else end
        if not chunk[e]:
            if first < end:  # an item inside a comment
                return failed
            continue
        if first >= end:  # a token chunk without items
            return failed
        item_start = first - 8  # `{"token":`: the brace 8 bytes before the colon
        content_end = item_start - len(middle)
        if content_end < start + prefix_size + 2 or raw[item_start] != 123 or not _equal_at(raw, content_end, middle):
            return failed
        if raw[end - suffix_size - 1] != _CLOSE_BRACE:
            return failed
        out[n_chunks] = content_end
        n_chunks += 1
        while item < len(token_keys) and token_keys[item] < end:
            item += 1
    if item < len(token_keys):  # items past the last event
        return failed
    return out[:n_chunks]


@njit(cache=True, nogil=True)
def same_spans(raw: np.ndarray, starts: np.ndarray, ends: np.ndarray, other_starts: np.ndarray,
               other_ends: np.ndarray) -> bool:
    """Whether each span [start, end) of `raw` holds the same bytes as its counterpart."""
    for j in range(len(starts)):
        size = ends[j] - starts[j]
        if other_ends[j] - other_starts[j] != size or not _equal_at(raw, other_starts[j], raw[starts[j]:ends[j]]):
            return False
    return True
