"""Several traces from one request (`n` choices sharing one prefill): one Sample per choice, or why it failed.

    sample_choices(client, messages, problem_id="aime-00", sample_ids=[4, 5, 6, 7], keep_top_logprobs=True)
    -> ({4: Sample, 5: Sample, 6: TransientError("missing logprobs"), 7: Sample}, the raw reply, [4, 5, 6, 7])

Choice i of the reply is sample sample_ids[i]. In the compact layout vLLM, SGLang and the simulator write, the
reply's bytes are cut into one-choice documents (a choice starts with `{"index":i,`, which cannot occur inside a
JSON string, where every quote is escaped), each read by ingest.parse_completion on its fast path (msgspec's typed
decoding); any other layout is read by ingest's per-choice functions on a full orjson parse, ~7x slower
(bench/bench_ingest.py; bench/bench_n.py measures both). Each choice is checked as a lone reply is: a choice
without logprobs, cut short (a finish_reason other than stop or length), all sentinels, or missing (a server that
sent fewer choices than n) fails alone, and the others are kept. A reply cut short (the connection ended
mid-body) keeps the choices that arrived whole and asks for the rest in a request of their own (sample_choices). A
reply that cannot be read at all (malformed, no usage, cut before any whole choice) or whose every choice failed
raises, so the client asks again, as for a lone reply.

Usage is counted once per request: the prompt tokens are split over the traces kept from it (evenly, the
remainder to the first), so the kept traces' prompt tokens add up to what the server billed. Each trace's
completion tokens are its own (one logprobs entry per generated token), plus its share of the hidden reasoning
tokens the reply reports (usage.completion_tokens_details.reasoning_tokens), split as the prompt is. A failed
choice's own tokens are paid for and lost, as a failed lone reply's are.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from typing import Any

import orjson
import requests

from tracevote.core.retry import TransientError
from tracevote.core.simulated import SIMULATED_HEADER, SOLVE
from tracevote.sampling.client import ChatClient, RawCompletion
from tracevote.sampling.ingest import load_json, parse_choice, parse_completion, reasoning_tokens, sample_of
from tracevote.sampling.ingest_fast import Parsed, usage_counts
from tracevote.store.records import Sample

Outcome = Sample | TransientError
_CHOICES_KEY = b'"choices":['
_FIRST_CHOICE = b'"choices":[{"index":0,'
_AFTER_CHOICES = b'],"usage":'
_NO_USAGE = b'],"usage":{"prompt_tokens":0,"completion_tokens":0}}'  # a cut reply's choice, billed later


class CutShort(TransientError):
    """A reply cut short (a truncated body) whose first choices arrived whole: their outcomes, billed nothing yet
    (the usage was in the part that never came)."""

    def __init__(self, outcomes: dict[int, Outcome], detail: str) -> None:
        super().__init__("truncated body", detail)
        self.outcomes = outcomes


def sample_choices(client: ChatClient, messages: list[dict[str, str]], *, problem_id: str, sample_ids: list[int],
                   keep_top_logprobs: bool,
                   keep_top_tokens: bool = False) -> tuple[dict[int, Outcome], RawCompletion, list[int]]:
    """Each sample id's Sample or TransientError, the last reply and the sample ids its choices are (none for a
    cut reply): one request with n = len(sample_ids),
    whose X-Tracevote-Sample header and seed are the first sample's key (the simulator draws choice i from
    sample_ids[0] + i's key). A reply cut short keeps the choices that arrived whole and asks for the rest in a
    request of their own; the prompt tokens the last reply reports are then split over every trace kept (a cut
    reply's own usage never arrived: were every later request to fail, its traces are kept billed no prompt)."""
    arrived: dict[int, Outcome] = {}
    wanted, cut_reply = list(sample_ids), None
    while True:
        try:
            got, raw = _request(client, messages, problem_id, wanted, keep_top_logprobs, keep_top_tokens)
        except TransientError as failed:
            if cut_reply is None:
                raise
            return {**arrived, **dict.fromkeys(wanted, failed)}, cut_reply, []
        if isinstance(got, CutShort):
            arrived |= got.outcomes
            wanted, cut_reply = wanted[len(got.outcomes):], raw
            if not wanted:  # every choice whole, the usage cut off
                return arrived, raw, []
            continue
        return (_billed_with(arrived, got) if arrived else got), raw, wanted


def _request(client: ChatClient, messages: list[dict[str, str]], problem_id: str, sample_ids: list[int],
             keep_top_logprobs: bool, keep_top_tokens: bool) -> tuple[dict[int, Outcome] | CutShort, RawCompletion]:
    """One request, its body read as it arrives (so the part of a cut one is at hand), retried as every call
    unless a cut reply brought whole choices."""
    first_key = f"{problem_id}/{sample_ids[0]}"
    body = client.request_body(messages, sample_key=first_key, extra={"n": len(sample_ids)})

    def read(response: requests.Response, started: float) -> tuple[dict[int, Outcome] | CutShort, RawCompletion]:
        raw, cut = _read_body(response, started)
        try:
            outcomes = parse_choices(raw.body, problem_id=problem_id, sample_ids=sample_ids, latency_s=raw.latency_s,
                                     keep_top_logprobs=keep_top_logprobs,
                                     expect_top_logprobs=client.decoding.top_logprobs, keep_top_tokens=keep_top_tokens)
        except CutShort as short:
            return short, raw  # not retried: what arrived whole is kept, and the rest asked for on its own
        if cut:
            raise TransientError("truncated body", f"{len(raw.body)} bytes arrived, then the connection ended")
        return outcomes, raw

    return client.call_streamed(orjson.dumps(body), first_key, SOLVE, read)


def _read_body(response: requests.Response, started: float) -> tuple[RawCompletion, bool]:
    """The body as far as it came, and whether it was cut (the connection ended early, or fewer bytes than
    Content-Length promised)."""
    chunks: list[bytes] = []
    cut = False
    try:
        chunks.extend(response.iter_content(1 << 16))
    except (requests.exceptions.ChunkedEncodingError, requests.ConnectionError):
        cut = True
    body = b"".join(chunks)
    promised = response.headers.get("Content-Length")
    if promised and promised.isdigit() and not response.headers.get("Content-Encoding"):
        cut = cut or len(body) < int(promised)
    simulated = response.headers.get(SIMULATED_HEADER) == "1"
    return RawCompletion(body, time.monotonic() - started, simulated), cut


def _billed_with(arrived: dict[int, Outcome], outcomes: dict[int, Outcome]) -> dict[int, Outcome]:
    """`outcomes` (a whole reply's, billed) and the traces that `arrived` from cut replies before it, the last
    reply's prompt tokens (and hidden reasoning tokens) split over all of them."""
    kept = {sid: got for sid, got in {**arrived, **outcomes}.items() if isinstance(got, Sample)}
    billed = [got for got in outcomes.values() if isinstance(got, Sample)]
    prompt = sum(sample.prompt_tokens for sample in billed)
    hidden = sum(sample.completion_tokens - sample.n_tokens for sample in billed)
    return {**arrived, **outcomes, **_billed_shares(kept, (prompt, 0), hidden)}


def parse_choices(body: bytes, *, problem_id: str, sample_ids: list[int], latency_s: float,
                  keep_top_logprobs: bool, expect_top_logprobs: int,
                  keep_top_tokens: bool = False) -> dict[int, Outcome]:
    """Each sample id's Sample or TransientError, as the module docstring says."""
    cut = _cut_choices(body)
    if cut is None:
        _salvage_if_cut_short(body, problem_id=problem_id, sample_ids=sample_ids, latency_s=latency_s,
                              keep_top_logprobs=keep_top_logprobs, k=expect_top_logprobs, tokens=keep_top_tokens)
        envelope = load_json(body)
        outcomes = _parsed_whole(envelope, problem_id=problem_id, sample_ids=sample_ids, latency_s=latency_s,
                                 keep_top_logprobs=keep_top_logprobs, k=expect_top_logprobs, tokens=keep_top_tokens)
    else:
        documents, envelope = cut
        outcomes = {sample_id: _lone(documents[index] if index < len(documents) else None, problem_id=problem_id,
                                     sample_id=sample_id, latency_s=latency_s, keep_top_logprobs=keep_top_logprobs,
                                     k=expect_top_logprobs, n=len(sample_ids), sent=len(documents),
                                     tokens=keep_top_tokens)
                    for index, sample_id in enumerate(sample_ids)}
    kept = {sample_id: got for sample_id, got in outcomes.items() if isinstance(got, Sample)}
    if not kept:
        raise outcomes[sample_ids[0]]  # type: ignore[misc]
    usage = usage_counts(envelope)
    if usage is None:
        raise TransientError("no usage", "the response has no usage.prompt_tokens / completion_tokens")
    return {**outcomes, **_billed_shares(kept, usage, reasoning_tokens(envelope, usage[1]))}


def _cut_choices(body: bytes) -> tuple[list[bytes], dict[str, Any]] | None:
    """The reply cut into one-choice documents, each the reply with that choice only (index 0), and the envelope
    without its choices; None when the bytes are not in the compact layout (ask orjson)."""
    opening, closing = body.find(_FIRST_CHOICE), body.rfind(_AFTER_CHOICES)
    if opening < 0 or closing < opening:
        return None
    head, tail = body[:opening + len(_CHOICES_KEY)], body[closing:]
    starts = _choice_starts(body, opening, closing)
    ends = [start - 1 for start in starts[1:]] + [closing]
    view = memoryview(body)
    documents = [b"".join((head, b'{"index":0,', view[body.index(b",", start) + 1:end], tail))  # one copy each
                 for start, end in zip(starts, ends, strict=True)]
    try:
        envelope = orjson.loads(head + tail)
    except orjson.JSONDecodeError:
        return None  # cut short or malformed: the full parse names the cause
    return documents, envelope


def _salvage_if_cut_short(body: bytes, *, problem_id: str, sample_ids: list[int], latency_s: float,
                          keep_top_logprobs: bool, k: int, tokens: bool) -> None:
    """CutShort with the choices of a truncated compact reply that arrived whole, if one did and is a trace;
    else nothing (the full parse names what is wrong)."""
    opening = body.find(_FIRST_CHOICE)
    if opening < 0:
        return
    try:
        orjson.loads(body)
        return  # whole after all
    except orjson.JSONDecodeError as exc:
        if not str(exc).startswith("unexpected end of data"):
            return
    head = body[:opening + len(_CHOICES_KEY)]
    starts = _choice_starts(body, opening, len(body))
    whole = [body[start:after - 1] for start, after in itertools.pairwise(starts)][:len(sample_ids)]
    outcomes: dict[int, Outcome] = {}
    for sample_id, piece in zip(sample_ids, whole, strict=False):
        document = head + b'{"index":0,' + piece[piece.index(b",") + 1:] + _NO_USAGE
        got = _lone(document, problem_id=problem_id, sample_id=sample_id, latency_s=latency_s,
                    keep_top_logprobs=keep_top_logprobs, k=k, n=len(sample_ids), sent=len(whole), tokens=tokens)
        outcomes[sample_id] = dataclasses.replace(got, prompt_tokens=0, completion_tokens=got.n_tokens) \
            if isinstance(got, Sample) else got
    if any(isinstance(got, Sample) for got in outcomes.values()):
        raise CutShort(outcomes, f"the reply stops after {len(body)} bytes, {len(whole)} of {len(sample_ids)} "
                                 f"choices whole")


def _choice_starts(body: bytes, opening: int, end: int) -> list[int]:
    """Where each choice of body[:end] begins, the first right after `"choices":[` at `opening`."""
    starts = [opening + len(_CHOICES_KEY)]
    while (found := _next_choice(body, len(starts), starts[-1], end)) >= 0:
        starts.append(found)
    return starts


def _next_choice(body: bytes, index: int, start: int, end: int) -> int:
    """Where choice `index` begins, searching body[start:end] from the current choice's finish_reason (a needle
    bytes.find skips through fast, unlike `,{"index":`, whose commas and quotes fill a logprobs list); -1: none."""
    reason = body.find(b"finish_reason", start, end)
    while reason >= 0 and body[reason - 2:reason] not in (b',"', b'{"'):  # structure, not a token's text
        reason = body.find(b"finish_reason", reason + 1, end)
    found = body.find(b',{"index":%d,' % index, max(reason, start), end)
    return found + 1 if found >= 0 else -1


def _fewer_choices(n: int, sent: int) -> TransientError:
    return TransientError("fewer choices than n", f"the reply has {sent} choices for n={n}")


def _lone(document: bytes | None, *, problem_id: str, sample_id: int, latency_s: float, keep_top_logprobs: bool,
          k: int, n: int, sent: int, tokens: bool) -> Outcome:
    if document is None:
        return _fewer_choices(n, sent)
    try:
        return parse_completion(document, problem_id=problem_id, sample_id=sample_id, latency_s=latency_s,
                                keep_top_logprobs=keep_top_logprobs, expect_top_logprobs=k, keep_top_tokens=tokens)
    except TransientError as failed:
        return failed


def _parsed_whole(doc: Any, *, problem_id: str, sample_ids: list[int], latency_s: float, keep_top_logprobs: bool,
                  k: int, tokens: bool) -> dict[int, Outcome]:
    """Each choice of a fully parsed reply, read by ingest's per-choice functions."""
    choices = _choices_by_index(doc)
    usage = usage_counts(doc)
    if usage is None:
        raise TransientError("no usage", "the response has no usage.prompt_tokens / completion_tokens")
    return {sample_id: _sample(choices.get(index), usage, problem_id=problem_id, sample_id=sample_id,
                               latency_s=latency_s, keep_top_logprobs=keep_top_logprobs, k=k, n=len(sample_ids),
                               sent=len(choices), tokens=tokens)
            for index, sample_id in enumerate(sample_ids)}


def _choices_by_index(doc: Any) -> dict[int, dict[str, Any]]:
    choices = doc.get("choices") if isinstance(doc, dict) else None
    if not isinstance(choices, list) or not choices:
        raise TransientError("no choices", "the response has no choices")
    by_index = {}
    for position, choice in enumerate(choices):
        if isinstance(choice, dict):
            index = choice.get("index", position)
            by_index[index if isinstance(index, int) else position] = choice
    return by_index


def _sample(choice: dict[str, Any] | None, usage: tuple[int, int], *, problem_id: str, sample_id: int,
            latency_s: float, keep_top_logprobs: bool, k: int, n: int, sent: int, tokens: bool) -> Outcome:
    if choice is None:
        return _fewer_choices(n, sent)
    try:
        parsed: Parsed = parse_choice(choice, usage, k, keep_top_tokens=tokens)
        return sample_of(parsed, problem_id=problem_id, sample_id=sample_id, latency_s=latency_s,
                         keep_top_logprobs=keep_top_logprobs, expect_top_logprobs=k)
    except TransientError as failed:
        return failed


def _billed_shares(kept: dict[int, Sample], usage: tuple[int, int], hidden: int) -> dict[int, Sample]:
    """The kept samples with the request's prompt tokens (and its `hidden` completion tokens) split among them."""
    prompt_shares, hidden_shares = split_evenly(usage[0], len(kept)), split_evenly(hidden, len(kept))
    return {sample_id: dataclasses.replace(sample, prompt_tokens=prompt_share,
                                           completion_tokens=sample.n_tokens + hidden_share)
            for (sample_id, sample), prompt_share, hidden_share in zip(kept.items(), prompt_shares, hidden_shares,
                                                                       strict=True)}


def one_choice_bodies(body: bytes, sample_ids: list[int]) -> dict[int, bytes]:
    """Each sample id's raw response as a pool keeps it: the reply's document with that choice only (index 0)."""
    doc = load_json(body)
    choices = _choices_by_index(doc)
    return {sample_id: orjson.dumps({**doc, "choices": [{**choices[index], "index": 0}]})
            for index, sample_id in enumerate(sample_ids) if index in choices}


def split_evenly(total: int, parts: int) -> list[int]:
    """`total` in `parts` whole shares that add up to it, the larger ones first.

    >>> split_evenly(10, 4)
    [3, 3, 2, 2]
    """
    share, rest = divmod(total, parts)
    return [share + (i < rest) for i in range(parts)]
