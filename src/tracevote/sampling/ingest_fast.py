"""The fast path of ingest: chat-completions bytes -> Parsed by msgspec's typed decoding, ~8x faster than a full
orjson parse and a loop (ingest's slow path; bench/bench_ingest.py).

A 4096-token response with top-20 is ~5 MB of JSON and ~86k logprob objects; building those objects as dicts is
what makes a JSON parser slow. msgspec decodes them straight into small typed records (no dict, no key strings;
the `bytes` arrays skipped unread), which a loop then turns into the arrays a Sample holds. The fast path reads a
document whose choices all have a logprobs.content of {"token": str, "logprob": number, "top_logprobs": [{...}]}
items and every top_logprobs row of one length (what DeepSeek, vLLM, SGLang and OpenAI send); for any other
document parse_fast returns None and ingest takes the slow path, which also decides the cause of
every error. Both paths give identical Samples (tests/sampling/test_ingest_properties.py).

Compiled loops (numba, sampling.kernels) read replies here until issue 46 measured them against this path on a
65,536-token reply with top-20 (bench/interleave_ingest.py, docs/benchmarks.md): 85 against 343 ms of CPU a reply
in a process that had loaded them, but 498 against 410 ms for a process's first reply, numba's import included.
No figure a user waits for had the library path 2x slower (a reply that long takes minutes to generate), and every
process that parsed a completion paid that import, so they went.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np

from tracevote.store.logprobs import clean_logprobs, token_confidence


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
    reasoning: str = ""  # message.reasoning_content (or .reasoning) of a server with a reasoning parser


def message_text(choice: dict[str, Any]) -> str:
    message = choice.get("message")
    text = message.get("content") if isinstance(message, dict) else None
    return text if isinstance(text, str) else ""


REASONING_FIELDS = ("reasoning_content", "reasoning")  # vLLM (older), SGLang, DeepSeek; vLLM's newer name


def reasoning_text(part: Any) -> str:
    """The thinking a reasoning parser split out of a message or a streamed delta, "" when there is none.

    >>> reasoning_text({"reasoning": "so 5", "content": ""})
    'so 5'
    """
    if not isinstance(part, dict):
        return ""
    for name in REASONING_FIELDS:
        text = part.get(name)
        if isinstance(text, str) and text:
            return text
    return ""


def usage_counts(doc: dict[str, Any]) -> tuple[int, int] | None:
    """(prompt_tokens, completion_tokens), or None when the response does not say."""
    usage = doc.get("usage")
    if not isinstance(usage, dict):
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    return prompt, completion


# --- the typed decoding -----------------------------------------------------------------------------------


@functools.cache
def _decoder(top_tokens: bool) -> msgspec.json.Decoder:
    """A decoder of a whole response into typed records. Without `top_tokens` an alternative's token is skipped
    unread, as the slow path does not read it either. Records of a token and its alternatives are made in the
    millions for a long reply and hold no reference back, so the garbage collector need not track them."""
    entry_fields: list[Any] = [("token", str)] if top_tokens else []
    entry = msgspec.defstruct("Entry", [*entry_fields, ("logprob", float)], gc=False)
    item = msgspec.defstruct("Item", [("token", str), ("logprob", float),
                                      ("top_logprobs", list[entry] | None, None)], gc=False)
    logprobs = msgspec.defstruct("Logprobs", [("content", list[item])])
    choice = msgspec.defstruct("Choice", [("logprobs", logprobs), ("message", Any, None),
                                          ("finish_reason", Any, None)])
    completion = msgspec.defstruct("Completion", [("choices", list[choice]), ("usage", Any, None)])
    return msgspec.json.Decoder(completion)


_TOKEN, _LOGPROB, _ROW = attrgetter("token"), attrgetter("logprob"), attrgetter("top_logprobs")


def parse_fast(body: bytes, k: int, keep_top_tokens: bool) -> Parsed | None:
    """The same result as ingest's slow path, or None when `body` is not a document this path reads."""
    try:
        doc = _decoder(keep_top_tokens).decode(body)
    except (msgspec.DecodeError, RecursionError):  # not JSON (NaN, Infinity), not this layout, beyond float64
        return None
    if not doc.choices:
        return None
    choice = doc.choices[0]
    items = choice.logprobs.content
    rows = [row or () for row in map(_ROW, items)]
    width = len(rows[0]) if rows else 0
    if any(len(row) != width for row in rows):  # llama.cpp's ragged rows: the slow path pads them
        return None
    chosen = np.fromiter(map(_LOGPROB, items), dtype=np.float64, count=len(items))
    top = np.fromiter(map(_LOGPROB, itertools.chain.from_iterable(rows)), dtype=np.float64,
                      count=len(items) * width).reshape(len(items), width)
    names = [list(map(_TOKEN, row)) for row in rows] if keep_top_tokens else None
    top, names = best_k(top, names, k)
    return Parsed(message_text({"message": choice.message}), choice.finish_reason, usage_counts({"usage": doc.usage}),
                  list(map(_TOKEN, items)), chosen, top, names, len(items) * width, reasoning_text(choice.message))


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
    before, after = top[:, :-1], top[:, 1:]
    if not ((after > before) | (np.isnan(before) & ~np.isnan(after))).any():
        return None
    return np.argsort(-top, axis=1, kind="stable")  # -NaN is NaN, which argsort puts last


def stored_measures(chosen: np.ndarray, top: np.ndarray,
                    keep_top: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(token_logprobs, token_confidence, top_logprobs or None) as a Sample stores them, float32, from the chosen
    and top logprobs as parsed (float64, rows best first): store.logprobs.clean_logprobs and token_confidence,
    C_i computed in float64 before it is rounded to float32."""
    with np.errstate(over="ignore"):  # a logprob beyond float32's range is absent as stored (NaN), as in the store
        confidence = token_confidence(top, chosen).astype(np.float32)
        return clean_logprobs(chosen), confidence, clean_logprobs(top) if keep_top else None
