"""The fast path of ingest: chat-completions bytes -> Parsed, about 10x faster than json.loads and a loop.

A 4096-token response with top-20 is ~5 MB of JSON and ~86k logprob objects; building those objects is
what makes any JSON parser slow. The fast path never builds them. It finds the `"logprob":` and
`"top_logprobs":` keys with numpy on the raw bytes, reads the numbers with Arrow's CSV parser (with one orjson
call when there are few: a streamed read's), decodes
the chosen tokens in one orjson call, and parses the small rest of the document (the envelope: text,
finish_reason, usage) with orjson. It accepts only the compact layout DeepSeek, vLLM and SGLang write
({"token", "logprob", "bytes", "top_logprobs"}, no spaces) and checks it as it goes; for any other
document parse_fast returns None and ingest takes the slow path (a full orjson parse), which also
decides the cause of every error. Both paths give identical Samples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.csv as pacsv

# Longest logprob literal the fast path reads, plus its terminator and the line end that replaces the byte after
# it: repr() of any float64 is at most 24 characters ("-1.2345678901234567e-308"); vLLM prints a float32
# widened to float64 in full, e.g. "-0.00012339447194244712" (23), which must not fall back to the slow path.
_NUMBER_WIDTH = 26
_TOKEN_LOOKBACK = 48  # bytes before `,"logprob":` searched for `"token":"` at once
_KEY_LOGPROB = int.from_bytes(b'logprob"', "little")  # the 8 bytes before a key's colon
_KEY_OGPROBS = int.from_bytes(b'ogprobs"', "little")
_CSV_READ = pacsv.ReadOptions(column_names=["v", "rest"], use_threads=False)
_CSV_CONVERT = pacsv.ConvertOptions(column_types={"v": pa.float64()}, include_columns=["v"], null_values=[],
                                    strings_can_be_null=False)
_CSV_PARSE = pacsv.ParseOptions(delimiter="\t", quote_char=False)
# Arrow's CSV reader costs ~0.5 ms a call however short its input; fewer numbers than this go through orjson
# (~2x Arrow's marginal cost, no fixed one): a streamed read's few chunks (sampling.stream)
_ARROW_MIN_NUMBERS = 8192


@dataclass(frozen=True, eq=False)
class Parsed:
    """What either path reads from a response, before ingest.parse_completion checks and cleans it."""

    text: str
    finish_reason: Any
    usage: tuple[int, int] | None  # (prompt_tokens, completion_tokens)
    tokens: list[str]
    chosen: np.ndarray  # float64 [n], as sent
    top: np.ndarray  # float64 [n, k], NaN where the server sent fewer than k entries
    top_tokens: list[list[str]] | None
    entries: int  # top-k entries the server sent, over all tokens


def message_text(choice: dict[str, Any]) -> str:
    message = choice.get("message")
    text = message.get("content") if isinstance(message, dict) else None
    return text if isinstance(text, str) else ""


def usage_counts(doc: dict[str, Any]) -> tuple[int, int] | None:
    """(prompt_tokens, completion_tokens), or None when the response does not say."""
    usage = doc.get("usage")
    if not isinstance(usage, dict):
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    return prompt, completion


# --- scanning the bytes ---------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class _Keys:
    """Byte offsets of the colon after each key, ascending."""

    logprob: np.ndarray
    top: np.ndarray  # "top_logprobs"


@dataclass(frozen=True, eq=False)
class Items:
    """The logprobs.content items of a document, read by the fast path without the document around them."""

    tokens: list[str]
    chosen: np.ndarray  # float64 [n], as sent
    top: np.ndarray  # float64 [n, k], best first, NaN where the server sent fewer than k entries
    top_tokens: list[list[str]] | None
    entries: int  # top-k entries the server sent, over all tokens
    token_keys: np.ndarray  # offset of the colon of each item's "token" key
    end: int  # offset just past the last number
    per_item: int  # 1 + the top-k entries each item has


def parse_fast(body: bytes, k: int, keep_top_tokens: bool) -> Parsed | None:
    """The same result as ingest's slow path, or None when `body` is not in the layout this path reads."""
    if len(body) < 64:
        return None
    raw = np.frombuffer(body, dtype=np.uint8)
    items = parse_items(body, raw, k, keep_top_tokens)
    if items is None:
        return None
    choice, doc = _envelope(body, raw, int(items.token_keys[0]) - 8, items.end, depth=4 if items.per_item > 1 else 2)
    if choice is None:
        return None
    return Parsed(message_text(choice), choice.get("finish_reason"), usage_counts(doc), items.tokens, items.chosen,
                  items.top, items.top_tokens, items.entries)


def parse_items(body: bytes, raw: np.ndarray, k: int, keep_top_tokens: bool) -> Items | None:
    """Every logprobs item in `body` (`raw`: its bytes as uint8), found by its keys wherever it lies, or None when
    they are not in the layout this path reads. What lies between the items is not looked at: the caller checks it
    (parse_fast parses the document around them; a stream's chunks are checked against their layout)."""
    keys = _find_keys(body, raw)
    per_item = _entries_per_item(keys)
    if per_item is None:
        return None
    numbers = _read_numbers(raw, keys.logprob)
    own = keys.logprob[::per_item]  # each item's own logprob key comes first, then its top-k entries
    token_keys = _token_keys(body, own, np.concatenate(([0], keys.logprob[per_item - 1:-1:per_item])))
    if numbers is None or token_keys is None:
        return None
    values, end = numbers
    tokens = _strings(body, token_keys, own)
    if tokens is None:
        return None
    values = values.reshape(-1, per_item)
    top_tokens = _top_tokens(body, keys.logprob, per_item) if keep_top_tokens else None
    if keep_top_tokens and top_tokens is None:
        return None
    top, top_tokens = best_k(values[:, 1:], top_tokens, k)
    return Items(tokens, values[:, 0], top, top_tokens, values[:, 1:].size, token_keys, end, per_item)


def _find_keys(body: bytes, raw: np.ndarray) -> _Keys:
    # subtle: inside a JSON string a quote is escaped, so `logprob":` with a bare quote is always a key
    colons = np.flatnonzero(raw == ord(":"))  # one pass over the body; the rest works on the colons
    colons = colons[colons >= 14]
    # the 8 bytes before each colon as one integer: a strided view reads them without copying the body
    words = np.ndarray((len(body) - 7,), dtype="<u8", buffer=body, strides=(1,))[colons - 8]
    logprob = colons[words == _KEY_LOGPROB]
    plural = colons[words == _KEY_OGPROBS]  # "logprobs" and "top_logprobs"
    return _Keys(logprob=logprob[raw[logprob - 9] == ord('"')], top=plural[raw[plural - 10] == ord("_")])


def _entries_per_item(keys: _Keys) -> int | None:
    """k + 1 when every item is {"token", "logprob", "bytes", "top_logprobs": [k entries]}, else None."""
    n, m = len(keys.top), len(keys.logprob)
    if n == 0 or m % n:
        return None
    per_item = m // n
    own = np.searchsorted(keys.logprob, keys.top) - 1
    return per_item if np.array_equal(own, np.arange(n) * per_item) else None


def _read_numbers(raw: np.ndarray, colons: np.ndarray) -> tuple[np.ndarray, int] | None:
    """The number after each colon, float64, and the offset just past the last one.

    A number ends at the first ',' or '}'. Each one goes to Arrow's CSV parser as a line
    "<number>\t<the rest of its window>": a tab ends the number, the rest is a column never converted.
    Arrow rejects whatever is not a number.
    """
    starts = colons + 1
    padded = raw if starts[-1] + _NUMBER_WIDTH <= len(raw) else np.concatenate(
        [raw, np.zeros(_NUMBER_WIDTH, dtype=np.uint8)])
    windows = np.lib.stride_tricks.sliding_window_view(padded, _NUMBER_WIDTH)[starts]
    lengths = np.argmax(_number_ends(windows), axis=1)  # 0 when no end is in the window
    if lengths.min() == 0 or lengths.max() >= _NUMBER_WIDTH - 1:
        return None
    if len(colons) < _ARROW_MIN_NUMBERS:
        values = _orjson_numbers(windows, lengths)
        return None if values is None else (values, int(starts[-1] + lengths[-1]))
    lines = np.ascontiguousarray(windows[:, : lengths.max() + 2])  # short numbers, short lines for Arrow
    lines[np.arange(len(lines)), lengths] = ord("\t")
    lines[:, -1] = ord("\n")
    try:
        table = pacsv.read_csv(pa.BufferReader(lines.tobytes()), read_options=_CSV_READ,
                               parse_options=_CSV_PARSE, convert_options=_CSV_CONVERT)
    except pa.ArrowInvalid:
        return None
    column = table.column(0)
    if len(column) != len(colons) or column.null_count:
        return None
    return _float64s(column), int(starts[-1] + lengths[-1])


def _orjson_numbers(windows: np.ndarray, lengths: np.ndarray) -> np.ndarray | None:
    """The numbers as one JSON array: each window cut at its number's end by spaces, then a comma. A window that
    does not start as a JSON number does (a digit or '-': not null, true or a string) is refused first."""
    first = windows[:, 0]
    if not (((first >= ord("0")) & (first <= ord("9"))) | (first == ord("-"))).all():
        return None
    lines = np.ascontiguousarray(windows[:, : lengths.max() + 1])
    lines[np.arange(lines.shape[1]) >= lengths[:, None]] = ord(" ")
    lines[:, -1] = ord(",")
    try:
        values = orjson.loads(b"[" + lines.tobytes()[:-1] + b"]")
    except orjson.JSONDecodeError:
        return None
    return np.array(values, dtype=np.float64) if len(values) == len(lines) else None


def _number_ends(windows: np.ndarray) -> np.ndarray:
    return (windows == ord(",")) | (windows == ord("}"))


def _float64s(column: pa.ChunkedArray) -> np.ndarray:
    # subtle: straight from Arrow's buffers, since to_numpy() imports pandas on first use (~1 s)
    parts = [np.frombuffer(chunk.buffers()[1], dtype=np.float64)[chunk.offset:chunk.offset + len(chunk)]
             for chunk in column.chunks]
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _token_keys(body: bytes, logprob_keys: np.ndarray, after: np.ndarray) -> np.ndarray | None:
    """For each `"logprob":` key, the colon of its object's `"token":` key, searched back to `after`.

    Layout: `{"token":"x","logprob":`, so the token string runs from that colon to the comma. Most
    tokens are short: one vectorized look at the bytes just before the key finds them; rfind the rest.
    """
    raw = np.frombuffer(body, dtype=np.uint8)
    if logprob_keys[0] < 10 + _TOKEN_LOOKBACK or (raw[logprob_keys - 10] != ord(",")).any():
        return None
    lookback = np.lib.stride_tricks.sliding_window_view(raw, _TOKEN_LOOKBACK)[
        logprob_keys - 10 - _TOKEN_LOOKBACK]
    hits = (lookback[:, :-3] == ord("n")) & (lookback[:, 1:-2] == ord('"')) & (lookback[:, 2:-1] == ord(":"))
    hits &= lookback[:, 3:] == ord('"')  # n":"  ends `"token":"`; inside a string its quotes would be escaped
    last = _TOKEN_LOOKBACK - 4 - np.argmax(hits[:, ::-1], axis=1)
    colons = logprob_keys - 10 - _TOKEN_LOOKBACK + last + 2
    missing = ~hits.any(axis=1) | (colons <= after)
    for i in np.flatnonzero(missing).tolist():  # long tokens
        found = body.rfind(b'"token":', int(after[i]), int(logprob_keys[i]) - 9)
        if found < 0:
            return None
        colons[i] = found + 7
    return colons if (colons > after).all() and (raw[colons - 1] == ord('"')).all() else None


def _strings(body: bytes, token_keys: np.ndarray, logprob_keys: np.ndarray) -> list[str] | None:
    """The token strings between `"token":` and `,"logprob":`, decoded in one orjson call."""
    return json_strings(body, np.frombuffer(body, dtype=np.uint8), token_keys + 1, logprob_keys - 10)


def json_strings(body: bytes, raw: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> list[str] | None:
    """The JSON string each span [start, end) of `body` holds (`raw`: its bytes), decoded in one orjson call; None
    when a span is not one string. Each span starts and ends with a quote, so it gives one element or more, and a
    JSON value starting with a quote is a string: as many elements as spans means one string each."""
    if len(starts) == 0:
        return []
    if (ends - starts < 2).any() or (raw[starts] != ord('"')).any() or (raw[ends - 1] != ord('"')).any():
        return None
    spans = zip(starts.tolist(), ends.tolist(), strict=True)
    try:
        strings = orjson.loads(b"[" + b",".join([body[start:end] for start, end in spans]) + b"]")
    except orjson.JSONDecodeError:
        return None
    return strings if len(strings) == len(starts) else None


def _top_tokens(body: bytes, logprob_keys: np.ndarray, per_item: int) -> list[list[str]] | None:
    width = per_item - 1
    if width == 0:
        return [[] for _ in range(len(logprob_keys))]
    entries = logprob_keys.reshape(-1, per_item)[:, 1:].ravel()
    token_keys = _token_keys(body, entries, logprob_keys.reshape(-1, per_item)[:, :-1].ravel())
    strings = _strings(body, token_keys, entries) if token_keys is not None else None
    if strings is None:
        return None
    return [strings[start:start + width] for start in range(0, len(strings), width)]


def _envelope(body: bytes, raw: np.ndarray, first: int, end: int,
              depth: int) -> tuple[dict[str, Any], dict[str, Any]] | tuple[None, None]:
    """(choices[0], document) parsed with logprobs.content cut out, or (None, None)."""
    close = _closing_bracket(raw, end, depth)
    if close is None or raw[first] != ord("{") or raw[first - 1] != ord("[") or raw[close] != ord("]"):
        return None, None
    try:
        doc = orjson.loads(body[:first] + body[close:])
        choice = doc["choices"][0]
        if choice["logprobs"]["content"] != []:
            return None, None
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError):
        return None, None
    return choice, doc


def _closing_bracket(raw: np.ndarray, start: int, depth: int) -> int | None:
    """Offset of the bracket that leaves `depth` levels of nesting open at `start`, skipping strings."""
    tail = raw[start:]
    index = np.arange(len(tail))
    last_plain = np.maximum.accumulate(np.where(tail == ord("\\"), -1, index))
    backslashes = index - 1 - np.concatenate(([-1], last_plain[:-1]))
    quotes = (tail == ord('"')) & (backslashes % 2 == 0)
    in_string = np.cumsum(quotes) % 2 == 1
    opens = (tail == ord("[")) | (tail == ord("{"))
    closes = (tail == ord("]")) | (tail == ord("}"))
    level = depth + np.cumsum(np.where(in_string, 0, opens.astype(np.int64) - closes))
    hits = np.flatnonzero(level == 0)
    return start + int(hits[0]) if len(hits) else None


def best_k(top: np.ndarray, top_tokens: list[list[str]] | None,
           k: int) -> tuple[np.ndarray, list[list[str]] | None]:
    """Each row's k highest logprobs, best first ([n, k], NaN where a row has fewer), and their tokens.

    Hosted APIs send rows best first and k long. llama.cpp's server builds them from a dict keyed by token text:
    not in order, k + 1 long when the chosen token is outside the top k, shorter when tokens share a text. Cutting
    such a row at k could drop its best entry, so rows out of order are sorted first (NaN padding last).
    """
    order = _best_first_order(top)
    if order is not None:
        top = np.take_along_axis(top, order, axis=1)
        if top_tokens is not None:
            top_tokens = [[row[j] for j in ranks if j < len(row)] for row, ranks in zip(top_tokens, order.tolist(),
                                                                                         strict=True)]
    if top_tokens is not None:
        top_tokens = [row[:k] for row in top_tokens]
    if top.shape[1] >= k:
        return np.ascontiguousarray(top[:, :k]), top_tokens
    return np.hstack([top, np.full((len(top), k - top.shape[1]), np.nan)]), top_tokens


def _best_first_order(top: np.ndarray) -> np.ndarray | None:
    """The column order that sorts every row descending, NaN last; None when every row already is."""
    if top.shape[1] < 2:
        return None
    with np.errstate(invalid="ignore"):
        rising = np.diff(top, axis=1) > 0
    gap_before_value = np.isnan(top[:, :-1]) & ~np.isnan(top[:, 1:])
    if not (rising.any() or gap_before_value.any()):
        return None
    return np.argsort(-top, axis=1, kind="stable")  # -NaN is NaN, which argsort puts last
