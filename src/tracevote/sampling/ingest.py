"""Chat-completions JSON -> Sample, about 10x faster than json.loads and a loop (bench/bench_ingest.py).

Responses in the compact layout DeepSeek, vLLM and SGLang write take the fast path (ingest_fast.py),
which reads the logprobs straight from the bytes. Any other document takes the slow path here (a full
orjson parse), which also decides the cause of every error. Both paths give identical Samples.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from tracevote.answers.extract import split_answer
from tracevote.core.retry import TransientError
from tracevote.core.simulated import FINGERPRINT_PREFIX
from tracevote.sampling.ingest_fast import (
    Parsed,
    best_k,
    message_text,
    parse_fast,
    reasoning_text,
    stored_measures,
    usage_counts,
)
from tracevote.store.records import Sample

FINISH_REASONS = ("stop", "length")
SENTINELS_ONLY = ("sentinel logprobs", "every logprob is a -9999 sentinel or not finite")  # the error's cause, detail


@dataclass(frozen=True)
class Reply:
    """A response read for its text only (calls that ask for no logprobs: debate turns, critiques, grades)."""

    text: str
    finish_reason: str
    prompt_tokens: int
    cached_prompt_tokens: int  # DeepSeek's prompt_cache_hit_tokens (OpenAI: prompt_tokens_details.cached_tokens)
    completion_tokens: int
    simulated: bool = False  # the server is tracevote's simulated model (its system_fingerprint says so)
    reasoning_tokens: int = 0  # hidden reasoning, counted in completion_tokens (usage.completion_tokens_details)


def parse_reply(body: bytes) -> Reply:
    """The text, finish reason and usage of a response; TransientError as parse_completion for one worth
    asking for again ("malformed JSON", "truncated body", "no choices", "no usage", "finish_reason <x>")."""
    doc = load_json(body)
    choice = _first_choice(doc)
    finish_reason, usage = choice.get("finish_reason"), usage_counts(doc)
    _check_finished(finish_reason, usage)
    simulated = str(doc.get("system_fingerprint", "")).startswith(FINGERPRINT_PREFIX)
    return Reply(message_text(choice), finish_reason, usage[0], _cached_tokens(doc, usage[0]), usage[1], simulated,
                 reasoning_tokens(doc, usage[1]))


def reasoning_tokens(doc: dict[str, Any], completion_tokens: int) -> int:
    """OpenAI's usage.completion_tokens_details.reasoning_tokens (billed as output: completion_tokens holds them)."""
    details = doc["usage"].get("completion_tokens_details")
    hidden = details.get("reasoning_tokens") if isinstance(details, dict) else 0
    return min(hidden, completion_tokens) if isinstance(hidden, int) and hidden > 0 else 0


def _cached_tokens(doc: dict[str, Any], prompt_tokens: int) -> int:
    usage = doc["usage"]
    details = usage.get("prompt_tokens_details")
    cached = usage.get("prompt_cache_hit_tokens", details.get("cached_tokens") if isinstance(details, dict) else 0)
    return min(cached, prompt_tokens) if isinstance(cached, int) and cached > 0 else 0


def parse_completion(body: bytes, *, problem_id: str, sample_id: int, latency_s: float,
                     keep_top_logprobs: bool, expect_top_logprobs: int, keep_top_tokens: bool = False) -> Sample:
    """One chat-completions response as a Sample.

    Sentinels (<= -9999) and non-finite logprobs become NaN. top_logprobs has `expect_top_logprobs`
    columns (NaN-padded), or None without `keep_top_logprobs`. token_confidence (C_i) is always set:
    computed in float64 from the logprobs as parsed, before they are rounded to float32. Raises
    TransientError("malformed JSON" | "truncated body" | "no choices" | "missing logprobs" |
    "sentinel logprobs" | "no usage" | "finish_reason <x>") for a response worth asking for again.
    A reply whose server split its thinking out (message.reasoning_content or .reasoning) keeps it as the Sample's
    `reasoning`, its logprobs.content (every generated token, reasoning then content) as the tokens, and its answer
    read as answers.extract.split_candidates says. Both paths read it: the fast path parses the message with orjson.
    """
    parsed = parse_fast(body, expect_top_logprobs, keep_top_tokens)
    if parsed is None:
        parsed = _parse_slow(body, expect_top_logprobs, keep_top_tokens)
    return sample_of(parsed, problem_id=problem_id, sample_id=sample_id, latency_s=latency_s,
                     keep_top_logprobs=keep_top_logprobs, expect_top_logprobs=expect_top_logprobs)


def sample_of(parsed: Parsed, *, problem_id: str, sample_id: int, latency_s: float, keep_top_logprobs: bool,
              expect_top_logprobs: int) -> Sample:
    """One parsed choice as a Sample, checked as parse_completion says (TransientError for one worth asking
    again); `parsed.usage` is what the Sample is billed."""
    token_logprobs, confidence, top = stored_measures(parsed.chosen, parsed.top, keep_top=True)
    _check(parsed, token_logprobs, top, expect_top_logprobs)
    return Sample(
        problem_id=problem_id, sample_id=sample_id, text=parsed.text, tokens=parsed.tokens,
        token_logprobs=token_logprobs, top_logprobs=top if keep_top_logprobs else None,
        top_tokens=parsed.top_tokens, token_confidence=confidence, answer=split_answer(parsed.text, parsed.reasoning),
        finish_reason=parsed.finish_reason, prompt_tokens=parsed.usage[0], completion_tokens=parsed.usage[1],
        latency_s=latency_s, reasoning=parsed.reasoning)


def _check_finished(finish_reason: Any, usage: tuple[int, int] | None) -> None:
    if finish_reason not in FINISH_REASONS:
        raise TransientError(f"finish_reason {finish_reason}", "the server ended the completion early")
    if usage is None:
        raise TransientError("no usage", "the response has no usage.prompt_tokens / completion_tokens")


def _check(parsed: Parsed, token_logprobs: np.ndarray, top: np.ndarray, k: int) -> None:
    _check_finished(parsed.finish_reason, parsed.usage)
    n = len(parsed.tokens)
    if n == 0 and (parsed.text or parsed.reasoning):
        raise TransientError("missing logprobs", "logprobs.content is empty but the message is not")
    if n and k and parsed.entries == 0:
        raise TransientError("missing logprobs", f"no top_logprobs entries although {k} were asked for")
    if sentinels_only(token_logprobs, top):
        raise TransientError(*SENTINELS_ONLY)


def sentinels_only(token_logprobs: np.ndarray, rest: np.ndarray) -> bool:
    """Whether a trace with tokens has no usable logprob: every chosen one NaN as stored (a -9999 sentinel or not
    finite) and every value of `rest` too (its top-k, or its C_i, which is NaN only where the whole row is)."""
    return bool(len(token_logprobs)) and bool(np.isnan(token_logprobs).all()) and bool(np.isnan(rest).all())


# --- slow path: a full parse ----------------------------------------------------------------------------


def _parse_slow(body: bytes, k: int, keep_top_tokens: bool) -> Parsed:
    doc = load_json(body)
    return parse_choice(_first_choice(doc), usage_counts(doc), k, keep_top_tokens)


def parse_choice(choice: dict[str, Any], usage: tuple[int, int] | None, k: int, keep_top_tokens: bool) -> Parsed:
    """One choice of a parsed document, billed `usage` (the reply's, or a choice's share of it: sampling.choices);
    TransientError("missing logprobs" | "malformed JSON") when its logprobs cannot be read."""
    logprobs = choice.get("logprobs")
    items = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(items, list):
        raise TransientError("missing logprobs", "the response has no logprobs.content")
    tokens, chosen, top, top_tokens, entries = read_items(items, k, keep_top_tokens)
    return Parsed(message_text(choice), choice.get("finish_reason"), usage, tokens, chosen, top, top_tokens, entries,
                  reasoning_text(choice.get("message")))


def read_items(items: list[Any], k: int, keep_top_tokens: bool) -> tuple[
        list[str], np.ndarray, np.ndarray, list[list[str]] | None, int]:
    """logprobs.content items as (tokens, chosen float64 [n], top float64 [n, k] best first, top tokens, entries
    sent); TransientError("malformed JSON") for an item not as OpenAI's layout has it. A streamed chunk's items
    are read by the same function (sampling.stream)."""
    try:
        tokens = [item["token"] for item in items]
        chosen = np.array([item["logprob"] for item in items], dtype=np.float64)
        tops = [item.get("top_logprobs") or [] for item in items]
        top = _pad([[entry["logprob"] for entry in row] for row in tops])
        top_tokens = [[entry["token"] for entry in row] for row in tops] if keep_top_tokens else None
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise TransientError("malformed JSON", f"a logprobs.content item is not as expected ({exc!r})") from None
    top, top_tokens = best_k(top, top_tokens, k)
    return tokens, chosen, top, top_tokens, sum(len(row) for row in tops)


def load_json(body: bytes) -> Any:
    """The parsed document, or TransientError("truncated body" | "malformed JSON")."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        if _cut_short(body, exc):
            raise TransientError("truncated body", f"the JSON stops after {len(body)} bytes") from None
        first_error = exc
    try:
        return json.loads(body)  # some servers write NaN or -Infinity, which only the stdlib accepts
    except ValueError:
        raise TransientError("malformed JSON", str(first_error)) from None


def _cut_short(body: bytes, exc: orjson.JSONDecodeError) -> bool:
    """Whether the document just stops early, possibly inside a multi-byte character."""
    message = str(exc)
    if not body or message.startswith("unexpected end of data"):
        return True
    if not message.startswith("str is not valid UTF-8"):
        return False
    for trim in (1, 2, 3):
        with contextlib.suppress(UnicodeDecodeError):
            body[:-trim].decode()
            return True
    return False


def _first_choice(doc: Any) -> dict[str, Any]:
    choices = doc.get("choices") if isinstance(doc, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise TransientError("no choices", "the response has no choices[0]")
    return choices[0]


def _pad(rows: list[list[Any]]) -> np.ndarray:
    """Rows of logprobs as float64 [n, longest row], shorter rows padded with NaN."""
    width = max((len(row) for row in rows), default=0)
    if all(len(row) == width for row in rows):
        return np.array(rows, dtype=np.float64).reshape(len(rows), width)
    out = np.full((len(rows), width), np.nan)
    for i, row in enumerate(rows):
        out[i, : len(row)] = np.array(row, dtype=np.float64)
    return out
