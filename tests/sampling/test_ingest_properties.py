"""The fast API-JSON parser against the slow one on generated chat completions (DeepSeek's and OpenAI's shapes,
awkward tokens, sentinels, missing parts, damaged bodies): where the fast path answers, the slow path gives the
same Parsed (or, for a body damaged only where the fast path does not read, refuses it as malformed while the
undamaged body gives that Parsed); the fast path never raises."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from tracevote.core.retry import TransientError
from tracevote.sampling import ingest, ingest_fast
from tracevote.sampling.ingest_fast import Parsed

SETTINGS = settings(max_examples=150, deadline=None)
# Strings that look like the keys and brackets the fast path searches the raw bytes for.
AWKWARD = ['"logprob":', '","logprob":-1,', 'n":"', '{"token":"x', "\\", '\\"', "}]", "]}", ":", ",", "\u2028",
           "\x00", "\x1f", "é中", "😀", "\ud83d", "logprob", '"top_logprobs":[', "\\u0041", "long " * 12, ""]
FINISH = ["stop", "length", "content_filter", "insufficient_system_resource", None]

tokens_text = st.one_of(st.text(max_size=6), st.sampled_from(AWKWARD))
# mostly what servers send; now and then an integer, a sentinel, a null or a tiny float with a long literal
logprobs = st.one_of(st.floats(min_value=-40.0, max_value=0.0), st.floats(min_value=-40.0, max_value=0.0, width=32),
                     st.sampled_from([0.0, -9999.0, -9999, -1e-300, -3, None]))
rarely = st.integers(min_value=0, max_value=9).map(lambda roll: roll == 0)  # true one time in ten


@st.composite
def entry(draw: st.DrawFn, token: str | None = None) -> dict[str, Any]:
    """One {"token", "logprob", "bytes"}: bytes as the token's UTF-8, or now and then null or left out."""
    text = draw(tokens_text) if token is None else token
    item: dict[str, Any] = {"token": text, "logprob": draw(logprobs)}
    bytes_field = draw(st.sampled_from(["utf8"] * 8 + ["null", "absent"]))
    if bytes_field != "absent":
        item["bytes"] = list(text.encode("utf-8", errors="surrogatepass")) if bytes_field == "utf8" else None
    return item


@st.composite
def content_items(draw: st.DrawFn) -> list[dict[str, Any]]:
    """logprobs.content: k alternatives for each token, or rarely a ragged top-k or an item without one."""
    k, ragged, one_without = draw(st.integers(min_value=0, max_value=4)), draw(rarely), draw(rarely)
    tokens = draw(st.lists(tokens_text, max_size=10))
    items = [draw(entry(token)) for token in tokens]
    for number, item in enumerate(items):
        width = draw(st.integers(min_value=0, max_value=5)) if ragged else k
        if not (one_without and number == len(items) - 1):
            item["top_logprobs"] = draw(st.lists(entry(), min_size=width, max_size=width))
    return items


def usage(draw: st.DrawFn, completion_tokens: int, deepseek: bool) -> dict[str, Any]:
    cached = {"prompt_cache_hit_tokens": 0} if deepseek else {"prompt_tokens_details": {"cached_tokens": 0}}
    return {"prompt_tokens": draw(st.integers(0, 99)), "completion_tokens": completion_tokens, "total_tokens": 0,
            **cached}


@st.composite
def completion(draw: st.DrawFn) -> dict[str, Any]:
    """A chat completion as DeepSeek or OpenAI (logprobs.refusal) writes it; rarely without logprobs, choices or
    usage; the message is the tokens joined, empty, null or other text."""
    items, deepseek = draw(content_items()), draw(st.booleans())
    text = draw(st.sampled_from(["joined"] * 4 + ["empty", "null", "other"]))
    content = {"joined": "".join(item["token"] for item in items), "empty": "", "null": None}.get(text) \
        if text != "other" else draw(tokens_text)
    logprobs_field: Any = {"content": items, **({} if deepseek else {"refusal": None})}
    choice = {"index": 0, "message": {"role": "assistant", "content": content},
              "logprobs": draw(st.sampled_from([logprobs_field] * 8 + [None, {"content": None}])),
              "finish_reason": draw(st.sampled_from(FINISH))}
    doc: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
                           "choices": [] if draw(rarely) else [choice]}
    if not draw(rarely):
        doc["usage"] = usage(draw, len(items), deepseek)
    if deepseek:
        doc["system_fingerprint"] = "fp_1"
    return doc


def dump(doc: dict[str, Any], layout: str) -> bytes:
    if layout == "orjson":
        try:
            return orjson.dumps(doc)  # compact, raw UTF-8: DeepSeek's layout, which the fast path reads
        except orjson.JSONEncodeError:  # a lone surrogate (half an emoji) can only be sent escaped
            layout = "ascii"
    if layout == "ascii":
        return json.dumps(doc, separators=(",", ":")).encode()  # compact, every non-ASCII character escaped
    return json.dumps(doc, ensure_ascii=False).encode("utf-8", errors="surrogatepass")  # spaces


def damaged(body: bytes, how: str, at: int) -> bytes:
    """The body cut short at `at`, or with the byte there replaced by a quote, or as it is."""
    at = at % (len(body) + 1)
    if how == "cut":
        return body[:at]
    if how == "quote" and at < len(body):
        return body[:at] + b'"' + body[at + 1:]
    return body


def slow_or_cause(body: bytes, k: int, keep_top_tokens: bool) -> Parsed | str:
    try:
        return ingest._parse_slow(body, k, keep_top_tokens)
    except TransientError as exc:
        return exc.cause


def assert_same_parsed(fast: Parsed, slow: Parsed) -> None:
    assert (fast.text, fast.finish_reason, fast.usage, fast.tokens, fast.top_tokens, fast.entries) == (
        slow.text, slow.finish_reason, slow.usage, slow.tokens, slow.top_tokens, slow.entries)
    assert fast.chosen.dtype == slow.chosen.dtype == np.float64
    assert np.array_equal(fast.chosen, slow.chosen, equal_nan=True)
    assert fast.top.shape == slow.top.shape and np.array_equal(fast.top, slow.top, equal_nan=True)


@SETTINGS
@given(completion(), st.sampled_from(["orjson", "orjson", "ascii", "spaces"]), st.integers(0, 5), st.booleans(),
       st.sampled_from(["whole", "whole", "cut", "quote"]), st.integers(min_value=0))
def test_the_fast_path_answers_as_the_slow_one_or_declines(doc: dict[str, Any], layout: str, k: int,
                                                            keep_top_tokens: bool, how: str, at: int) -> None:
    whole = dump(doc, layout)
    body = damaged(whole, how, at)
    fast = ingest_fast.parse_fast(body, k, keep_top_tokens)  # must not raise, whatever the bytes
    if fast is None:
        return  # ingest takes the slow path: the same result by construction
    slow = slow_or_cause(body, k, keep_top_tokens)
    if isinstance(slow, Parsed):
        assert_same_parsed(fast, slow)
        return
    # subtle: the fast path checks the syntax only of what it reads, so damage in a part it skips (a `bytes`
    # array, the spelling of a key) leaves a body the slow path refuses but the fast path reads as undamaged
    assert slow == "malformed JSON" and body != whole, f"the fast path read what the slow path refuses ({slow})"
    assert_same_parsed(fast, ingest._parse_slow(whole, k, keep_top_tokens))


encodable_tokens = st.one_of(st.text(max_size=6), st.sampled_from([t for t in AWKWARD if t != "\ud83d"]))
# Any float64 literal, the longest included: vLLM prints a float32 widened to float64 in full
# (-0.00012339447194244712), Python prints -2**-23 as -1.1920928955078125e-07.
any_logprobs = st.one_of(st.floats(min_value=-40.0, max_value=0.0), st.floats(min_value=-40.0, max_value=0.0, width=32),
                         st.sampled_from([-0.00012339447194244712, -1.1920928955078125e-07, -1.2345678901234567e-300]))


@SETTINGS
@given(st.lists(st.tuples(encodable_tokens, any_logprobs), min_size=1, max_size=10), st.integers(1, 4),
       st.booleans())
def test_a_whole_compact_response_takes_the_fast_path(tokens: list[tuple[str, float]], k: int, openai: bool) -> None:
    """The layout DeepSeek and vLLM write (k alternatives for each token), with logprobs printed to any length, is
    never left to the slow path."""
    items = [{"token": token, "logprob": value, "bytes": list(token.encode()),
              "top_logprobs": [{"token": f"t{j}", "logprob": value - j, "bytes": [116]} for j in range(k)]}
             for token, value in tokens]
    doc = {"id": "x", "object": "chat.completion", "created": 1, "model": "m",
           "choices": [{"index": 0, "message": {"role": "assistant", "content": "".join(t for t, _ in tokens)},
                        "logprobs": {"content": items, **({"refusal": None} if openai else {})},
                        "finish_reason": "stop"}],
           "usage": {"prompt_tokens": 3, "completion_tokens": len(items), "total_tokens": 3 + len(items)}}
    body = orjson.dumps(doc)
    fast = ingest_fast.parse_fast(body, k, True)
    assert fast is not None
    slow = ingest._parse_slow(body, k, True)
    assert_same_parsed(fast, slow)
