"""The simulated model's response body: drawn tokens in, DeepSeek's chat-completion JSON bytes out.

The logprobs.content items are joined from byte fragments tabulated once per vocabulary (tokens.tables),
so a 4096-token response with top-20 renders without formatting a single float.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import orjson

from tracevote.core.simulated import FINGERPRINT_PREFIX
from tracevote.sim.reasoning import spent, within_budget
from tracevote.sim.request import SimRequest
from tracevote.sim.split import answer_start, message_fields
from tracevote.sim.tokens import Tokens, Trace, digest, tables

Degrade = Literal["none", "sentinel", "nologprobs"]  # fault modes the sim server asks for
CREATED = 1767225600  # a fixed timestamp keeps responses byte-identical across runs


def render(req: SimRequest, trace: Trace, tokens: Tokens, seed: tuple, degrade: Degrade) -> bytes:
    t = tables()
    n, hidden, finish = within_budget(req, len(tokens.ids), "length" if len(tokens.ids) < trace.length else "stop",
                                      seed)
    tokens = first_tokens(tokens, n)
    texts = t.text[tokens.ids].tolist()
    start = answer_start(trace, n)  # where a reasoning parser would split it (sim/split.py)
    message = message_fields(req.reasoning_parser, "".join(texts[:start]), "".join(texts[start:]))
    return _envelope(req, message, n, finish, seed, _logprobs_parts(req, tokens, degrade), hidden)


def first_tokens(tokens: Tokens, n: int) -> Tokens:
    """The first `n` of a reply's tokens (what is left after hidden reasoning took its share of the budget)."""
    if n == len(tokens.ids):
        return tokens
    return Tokens(tokens.ids[:n], tokens.chosen[:n], tokens.candidates[:n], tokens.top[:n])


_WORDS = np.array([" the", " so", " we", " have", " let", " x", " and", " is", " of", " =", " then", " sum",
                   " each", " case", " gives", " +", " side", " area", " mod", " root"])


def filler(n_words: int, rng: np.random.Generator) -> str:
    """Filler words without digits (so a reply's only number is the one it boxes), one per token."""
    return "".join(_WORDS[rng.integers(0, len(_WORDS), size=n_words)].tolist())


def render_text(req: SimRequest, text: str, completion_tokens: int, finish: str, seed: tuple) -> bytes:
    """A text-only response (no logprobs asked for), in DeepSeek's layout, byte-identical across runs; on a
    reasoning profile, after its hidden reasoning took its share of the budget (sim/reasoning.py)."""
    reply = spent(req, text, completion_tokens, finish, seed)
    return _envelope(req, message_fields(None, "", reply.text), reply.visible_tokens, reply.finish_reason, seed,
                     [b'"logprobs":null,'], reply.reasoning_tokens)


def _envelope(req: SimRequest, message: bytes, completion_tokens: int, finish: str, seed: tuple,
              logprobs: list[bytes], hidden: int) -> bytes:
    """The response around its message's text fields and its logprobs field (in pieces, joined once with the rest:
    a long reply's megabytes are copied once): id, finish reason, usage, fingerprint."""
    usage = usage_of(req, completion_tokens, hidden)
    head = (b'{"id":' + completion_id(req, seed) + b',"object":"chat.completion",'
            b'"created":' + str(CREATED).encode() + b',"model":' + orjson.dumps(req.model)
            + b',"choices":[{"index":0,"message":{"role":"assistant",' + message + b"},")
    tail = (b'"finish_reason":"' + finish.encode() + b'"}],"usage":' + orjson.dumps(usage)
            + b',"system_fingerprint":' + fingerprint(seed) + b"}")
    return b"".join([head, *logprobs, tail])


def completion_id(req: SimRequest, seed: tuple) -> bytes:
    """The reply's id as JSON, the same for a streamed and a whole reply."""
    return b'"chatcmpl-sim-' + digest(*seed, req.model).hex().encode() + b'"'


def fingerprint(seed: tuple) -> bytes:
    return b'"' + f"{FINGERPRINT_PREFIX}-s{seed[0]}".encode() + b'"'


def usage_of(req: SimRequest, completion_tokens: int, hidden: int) -> dict[str, object]:
    """The usage block: a whole reply's, and a streamed reply's usage chunk. `completion_tokens`: the visible
    ones; `hidden`: the reasoning tokens, counted in completion_tokens on a reasoning profile."""
    prompt_tokens = len(req.prompt.encode()) // 4 + 8
    usage: dict[str, object] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                                "total_tokens": prompt_tokens + completion_tokens,
                                "prompt_tokens_details": {"cached_tokens": 0},
                                "prompt_cache_hit_tokens": 0, "prompt_cache_miss_tokens": prompt_tokens}
    if req.reasoning:  # OpenAI's reasoning models: hidden reasoning, billed as output, within the token limit
        usage["completion_tokens"] = completion_tokens + hidden
        usage["total_tokens"] = prompt_tokens + completion_tokens + hidden
        usage["completion_tokens_details"] = {"reasoning_tokens": hidden}
    return usage


def _logprobs_parts(req: SimRequest, tokens: Tokens, degrade: Degrade) -> list[bytes]:
    """The logprobs field and its comma, in pieces."""
    if degrade == "nologprobs":
        return []
    if not req.logprobs:
        return [b'"logprobs":null,']
    return [b'"logprobs":{"content":[', _items_json(degraded(tokens, degrade), req.top_logprobs), b"]},"]


def degraded(tokens: Tokens, degrade: Degrade) -> Tokens:
    """The sentinel fault's tokens: every logprob -9999, as a provider's bad replica sends."""
    if degrade != "sentinel":
        return tokens
    return Tokens(tokens.ids, np.ones_like(tokens.chosen), tokens.candidates, np.ones_like(tokens.top))


def _items_json(tokens: Tokens, k: int) -> bytes:
    """The logprobs.content items, joined from per-token fragments tabulated once per vocabulary."""
    parts = item_parts(tokens, k)
    parts[-1, -1] = parts[-1, -1][:-1]  # no comma after the last item
    return b"".join(parts.ravel().tolist())


def item_parts(tokens: Tokens, k: int) -> np.ndarray:
    """object [n, 3 + 3k]: one row of byte fragments per logprobs.content item, each row ending in a comma."""
    t = tables()
    n = len(tokens.ids)
    parts = np.empty((n, 3 + 3 * k), dtype=object)
    parts[:, 0] = t.entry_open[tokens.ids]
    parts[:, 1] = t.logprob_text[tokens.chosen]
    if k == 0:
        parts[:, 2] = t.item_close_empty[tokens.ids]
    else:
        candidates = tokens.candidates[:, :k]
        parts[:, 2] = t.item_open_top[tokens.ids]
        parts[:, 3::3] = t.entry_open[candidates]
        parts[:, 4::3] = t.logprob_text[tokens.top[:, :k]]
        parts[:, 5::3] = t.entry_close[candidates]
        parts[:, -1] = t.entry_close_last[candidates[:, -1]]
    return parts

