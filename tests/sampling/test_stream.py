"""Streamed chat completions (sampling.stream) read from recorded bytes through a loopback HTTP server: each
provider's layout, split reads, keep-alives, the ends a stream may have, and a stop that closes the connection."""

from __future__ import annotations

import json
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from tests.conftest import EVENT_TIMEOUT_S
from tests.sampling.test_client import CANARY, make_client, messages
from tests.sse_server import SSEScript, events, serve_sse, split_every
from tracevote.core.config_deepconf import DecodingConfig
from tracevote.core.errors import FatalAPIError
from tracevote.core.profiles import PROFILES
from tracevote.core.retry import TransientError
from tracevote.sampling.client import ChatClient, StreamBroken
from tracevote.sampling.ingest import parse_completion
from tracevote.sampling.stream import (
    Streamed,
    TokenBatch,
    read_stream,
    stream_body,
    stream_completion,
)
from tracevote.sampling.stream_events import event_data

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LLAMACPP = ("stream_top20_usage", "stream_top20_second", "stream_top3_length")


def provider_stream(name: str) -> bytes:
    return (FIXTURES / "streams" / f"{name}.sse").read_bytes()


def llamacpp(name: str) -> tuple[bytes, dict[str, Any]]:
    fixture = json.loads((FIXTURES / "llamacpp" / f"{name}.json").read_text(encoding="utf-8"))
    return fixture["sse"].encode(), fixture["request"]


def client_for(url: str, profile: str = "deepseek", k: int = 20, **changes: Any) -> ChatClient:
    decoding = DecodingConfig(temperature=0.6, top_p=None, max_tokens=256, top_logprobs=k)
    return make_client(url, decoding=decoding, profile=PROFILES[profile], max_retries=1, **changes)


def streamed(pieces: list[bytes], k: int = 20, **options: Any) -> tuple[Streamed, SSEScript]:
    script = SSEScript(pieces)
    with serve_sse(script) as url, client_for(url, k=k) as client:
        result = stream_completion(client, messages(), sample_key="p/0", **options)
    return result, script


def assembled(sse: bytes) -> bytes:
    """The non-streamed reply of a streamed completion: its chunks' content and logprobs put in one message."""
    chunks = [orjson.loads(line[6:]) for line in sse.split(b"\n") if line.startswith(b"data: {")]
    choices = [chunk["choices"][0] for chunk in chunks if chunk["choices"]]
    items = [item for choice in choices if choice.get("logprobs") for item in choice["logprobs"]["content"] or []]
    text = "".join(choice["delta"].get("content") or "" for choice in choices)
    finish = next(choice["finish_reason"] for choice in choices if choice.get("finish_reason"))
    return orjson.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                      "logprobs": {"content": items}, "finish_reason": finish}],
                         "usage": {"prompt_tokens": 1, "completion_tokens": len(items)}})


def assert_same_trace(result: Streamed, reply: bytes, k: int) -> None:
    plain = parse_completion(reply, problem_id="p", sample_id=0, latency_s=0.0, keep_top_logprobs=True,
                             expect_top_logprobs=k)
    assert result.tokens == plain.tokens and result.text == plain.text
    assert result.finish_reason == plain.finish_reason
    np.testing.assert_array_equal(result.token_logprobs, plain.token_logprobs)
    np.testing.assert_array_equal(result.top_logprobs, plain.top_logprobs)
    np.testing.assert_array_equal(result.token_confidence, plain.token_confidence)  # exactly, not close


@pytest.mark.parametrize("provider", ["openai", "deepseek", "vllm"])
@pytest.mark.parametrize("split", [0, 1, 7, 500])
def test_each_providers_stream_is_the_non_streamed_trace_token_by_token(provider: str, split: int) -> None:
    sse = provider_stream(provider)
    result, script = streamed(events(sse) if split == 0 else split_every(sse, split))
    assert_same_trace(result, (FIXTURES / "streams" / f"{provider}.json").read_bytes(), 20)
    assert (result.stop_reason, result.usage_source, result.done) == ("finished", "server", True)
    assert (result.prompt_tokens, result.completion_tokens) == (64, len(result.tokens)) == (64, 41)
    assert script.requests[0]["body"]["stream"] is True


@pytest.mark.parametrize("provider", ["openai", "deepseek", "vllm"])
def test_chunks_read_together_take_ingests_fast_path_and_give_the_same_trace(provider: str) -> None:
    """Every chunk in one read (a client that fell behind): the tokens go through ingest_fast as one body."""
    batches: list[TokenBatch] = []
    result = read_stream([provider_stream(provider)], top_logprobs=20, observer=batches.append)
    assert [len(batch.tokens) for batch in batches] == [41]
    assert_same_trace(result, (FIXTURES / "streams" / f"{provider}.json").read_bytes(), 20)


def test_without_top_logprobs_a_stream_keeps_the_same_confidences_and_no_top_k() -> None:
    """As a live run streams: C_i and the chosen logprobs only, the same as a stream that keeps its top-k."""
    batches: list[TokenBatch] = []
    kept = read_stream([provider_stream("deepseek")], top_logprobs=20)
    slim = read_stream([provider_stream("deepseek")], top_logprobs=20, keep_top_logprobs=False,
                       observer=batches.append)
    assert slim.top_logprobs is None and batches and all(batch.top_logprobs is None for batch in batches)
    assert slim.tokens == kept.tokens and slim.text == kept.text
    np.testing.assert_array_equal(slim.token_logprobs, kept.token_logprobs)
    np.testing.assert_array_equal(slim.token_confidence, kept.token_confidence)


def test_batch_chunks_hands_the_observer_tokens_in_groups_with_the_same_trace() -> None:
    sizes: list[int] = []
    result = read_stream(events(provider_stream("deepseek")), top_logprobs=20, batch_chunks=16,
                         observer=lambda batch: sizes.append(len(batch.tokens)))
    assert sizes == [16, 16, 9]
    assert_same_trace(result, (FIXTURES / "streams" / "deepseek.json").read_bytes(), 20)
    stopped = read_stream(events(provider_stream("deepseek")), top_logprobs=20, batch_chunks=16,
                          observer=lambda batch: "stop")
    assert (stopped.n_tokens, stopped.stop_reason, stopped.usage_source) == (16, "confidence", "client")


@pytest.mark.parametrize("name", LLAMACPP)
def test_llamacpp_streams_recorded_from_the_engine_parse_as_their_completion(name: str) -> None:
    """The real engine's bytes; it ignores include_usage, so the client counts the completion tokens itself."""
    sse, request = llamacpp(name)
    result, _ = streamed(split_every(sse, 333), k=request["top_logprobs"])
    assert_same_trace(result, assembled(sse), request["top_logprobs"])
    assert (result.usage_source, result.prompt_tokens, result.completion_tokens) == ("client", None, result.n_tokens)
    assert result.stop_reason == ("length" if request["max_tokens"] < 20 else "finished")


def test_llamacpp_rows_unsorted_and_one_too_long_are_sorted_and_cut_to_k() -> None:
    """llama.cpp's rows come from a dict keyed by token text: out of order, k + 1 long when the chosen token is
    outside the top k. The engine's chunk with such a row (top-3 asked for, four sent, best last)."""
    item = {"token": "x", "logprob": -5.0, "top_logprobs": [
        {"token": "b", "logprob": -2.0}, {"token": "a", "logprob": -1.0}, {"token": "c", "logprob": -3.0},
        {"token": "x", "logprob": -0.5}]}
    chunk = {"choices": [{"index": 0, "delta": {"content": "x"}, "logprobs": {"content": [item]},
                          "finish_reason": "stop"}]}
    result, _ = streamed([b"data: " + orjson.dumps(chunk) + b"\n\n", b"data: [DONE]\n\n"], k=3)
    np.testing.assert_array_equal(result.top_logprobs, [[-0.5, -1.0, -2.0]])
    assert result.token_confidence[0] == np.float32(3.5 / 3)


def test_keepalives_and_a_stream_without_done_still_give_the_trace() -> None:
    sse = provider_stream("openai")
    without_done = sse.removesuffix(b"data: [DONE]\n\n")
    pieces = [b": keep-alive\n\n", *events(without_done)[:2], b": ping - 2026-11-26\r\n\r\n", *events(without_done)[2:]]
    result, _ = streamed(pieces)
    assert (result.done, result.n_tokens, result.finish_reason) == (False, 41, "stop")


@pytest.mark.parametrize(("tail", "cause"), [
    (b'data: {"error": {"message": "The server had an error", "type": "server_error"}}\n\n', "stream error"),
    (b'data: {"choices": [{"index": 0, "delta": {"content": "x"}, "logprobs": {"con\n\n', "malformed chunk"),
    (b"data: [1, 2]\n\n", "malformed chunk"),
    (b'data: {"choices": [{"index": 0, "logprobs": {"content": [{"token": "x"}]}}]}\n\n', "malformed chunk"),
    (b"", "stream cut"),
    (b'data: {"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": "content_filter"}]}\n\n',
     "finish_reason content_filter"),
    (b'data: {"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": "stop"}]}\n\n',
     "missing logprobs"),
])
def test_a_bad_stream_is_a_clear_error_naming_its_cause(tail: bytes, cause: str) -> None:
    head = events(provider_stream("vllm"))[:1]  # the role chunk: no token reached the observer yet
    with pytest.raises(TransientError) as raised:
        streamed([*head, tail])
    assert raised.value.cause == cause


def test_a_failure_after_tokens_reached_the_observer_keeps_them_and_is_not_retried() -> None:
    pieces = events(provider_stream("openai"))[:6]
    script = SSEScript([*pieces, b"data: {not json}\n\n"])
    seen: list[str] = []
    with serve_sse(script) as url, client_for(url) as client, pytest.raises(StreamBroken) as raised:
        stream_completion(client, messages(), sample_key="p/0", observer=lambda batch: seen.extend(batch.tokens))
    assert raised.value.cause == "malformed chunk" and len(seen) == 5
    assert raised.value.received.n_tokens == 5 and len(script.requests) == 1


def test_a_dropped_connection_before_any_token_is_retried() -> None:
    script = SSEScript(events(provider_stream("deepseek"))[:3], drop=True)
    with serve_sse(script) as url, client_for(url) as client, pytest.raises(TransientError) as raised:
        stream_completion(client, messages(), sample_key="p/0")
    assert raised.value.cause in ("connection", "stream cut") and len(script.requests) == 2  # max_retries=1


def test_a_stream_whose_body_misses_its_last_http_chunk_after_done_is_whole() -> None:
    """`data: [DONE]` arrived, then the connection closed without the body's last (empty) chunk: the trace is
    whole; only the connection is not kept."""
    script = SSEScript(events(provider_stream("openai")), drop=True)
    with serve_sse(script) as url, client_for(url) as client:
        result = stream_completion(client, messages(), sample_key="p/0")
    assert (result.done, result.n_tokens, result.stop_reason) == (True, 41, "finished") and len(script.requests) == 1


def test_the_key_never_shows_in_a_stream_error_and_is_sent_as_a_bearer_token() -> None:
    echo = f'data: {{"error": {{"message": "bad key {CANARY} for this model"}}}}\n\n'.encode()
    script = SSEScript([*events(provider_stream("openai"))[:3], echo])
    with serve_sse(script) as url, client_for(url, api_key=CANARY) as client, pytest.raises(StreamBroken) as raised:
        stream_completion(client, messages(), sample_key="p/0", observer=lambda batch: None)
    shown = str(raised.value) + repr(raised.value) + "".join(traceback.format_exception(raised.value))
    assert raised.value.cause == "stream error" and "bad key *** for this model" in shown and CANARY not in shown
    assert script.requests[0]["headers"]["Authorization"] == f"Bearer {CANARY}"


def test_a_refusal_is_the_clients_own_error() -> None:
    script = SSEScript([b'{"error": {"message": "top_logprobs must be <= 20"}}'], status=400)
    with serve_sse(script) as url, client_for(url) as client, pytest.raises(FatalAPIError, match="<= 20"):
        stream_completion(client, messages(), sample_key="p/0")


def stream_until_served(script: SSEScript, observer: Callable[[TokenBatch], str | None]) -> Streamed:
    """`script` served and streamed with `observer`, once the server has written its last chunk."""
    with serve_sse(script) as url, client_for(url) as client:
        result = stream_completion(client, messages(), sample_key="p/0", observer=observer)
        assert script.finished.wait(EVENT_TIMEOUT_S)
    return result


@pytest.mark.parametrize("stop_after", [1, 4, 10])
def test_stopping_closes_the_connection_and_the_server_writes_no_more(stop_after: int) -> None:
    """The server writes each chunk only when the observer asks for the next or the client has gone."""
    script = SSEScript(events(provider_stream("openai")), paced=True)
    batches: list[TokenBatch] = []

    def observer(batch: TokenBatch) -> str | None:
        batches.append(batch)
        if len(batches) == stop_after:
            return "stop"
        script.go()
        return None

    result = stream_until_served(script, observer)
    assert script.client_closed.is_set() and script.written == 1 + stop_after  # the role chunk, then the tokens
    assert (result.stop_reason, result.finish_reason, result.n_tokens) == ("confidence", None, stop_after)
    assert (result.usage_source, result.prompt_tokens, result.completion_tokens) == ("client", None, stop_after)
    full, _ = streamed(events(provider_stream("openai")))
    np.testing.assert_array_equal(result.token_confidence, full.token_confidence[:stop_after])


@pytest.mark.parametrize(("profile", "options"), [
    ("deepseek", {"include_usage": True}), ("openai-chat", {"include_usage": True}),
    ("local", {"include_usage": True}), ("llama-cpp-python", {"include_usage": True})])
def test_the_request_asks_for_a_stream_and_its_usage(profile: str, options: dict[str, bool]) -> None:
    body = stream_body(client_for("http://127.0.0.1:9", profile=profile), messages(), sample_key="p/0")
    assert body["stream"] is True and body["stream_options"] == options and body["top_logprobs"] == 20


@pytest.mark.parametrize(("pieces", "expected"), [
    ([b"data: a\n\n"], [b"a"]),
    ([b"data: a\r\n\r\n"], [b"a"]),
    ([b"da", b"ta:a\n", b"\n"], [b"a"]),
    ([b": keep-alive\n\n", b"event: x\nid: 3\ndata: a\n\n"], [b"a"]),
    ([b"data: a\ndata: b\n\n"], [b"a\nb"]),
    ([b"data: a\n\ndata: [DONE]\n\n"], [b"a", b"[DONE]"]),
    ([b"data: a"], [b"a"]),  # cut before its blank line: close() gives it
    ([b"data: a\n\ndata: b\n", b"\ndata: c\n\ndata: d"], [b"a", b"b", b"c", b"d"]),  # one-line events, in bulk
    ([b"data: a\n\n\n\ndata: b\n\n"], [b"a", b"b"]),
    ([b"data: a\n\ndata:b\n\n: c\n\n"], [b"a", b"b"]),
])
def test_sse_events(pieces: list[bytes], expected: list[bytes]) -> None:
    assert list(event_data(pieces)) == [event.decode() for event in expected]


def test_a_stream_cut_inside_an_http_chunk_after_its_first_tokens_is_broken_with_what_arrived() -> None:
    """The connection closes in the middle of an HTTP chunk (its size line promised more): urllib3 says so, and
    the tokens read before it are kept for the caller (StreamBroken), the connection not reused."""
    pieces = events(provider_stream("openai"))
    script = SSEScript([*pieces[:6], pieces[6][:40]], drop=True, cut_chunk=True)
    seen: list[str] = []
    with serve_sse(script) as url, client_for(url) as client, pytest.raises(StreamBroken) as raised:
        stream_completion(client, messages(), sample_key="p/0", observer=lambda batch: seen.extend(batch.tokens))
    assert raised.value.cause == "connection" and len(seen) == 5 == raised.value.received.n_tokens


def test_chunks_of_the_learned_layout_and_chunks_that_leave_it_give_the_same_trace() -> None:
    """After the first token chunk, the next ones are cut by its layout; one that leaves it (a longer id, a
    delta with a role) is read in full, in its place in the trace."""
    chunks = events(provider_stream("deepseek"))
    changed = [chunks[5].replace(b'"delta":{"content":', b'"delta":{"role":"assistant","content":'),
               chunks[9].replace(b'"id":"', b'"id":"x')]
    assert changed[0] != chunks[5] and changed[1] != chunks[9]
    mixed = [*chunks[:5], changed[0], *chunks[6:9], changed[1], *chunks[10:]]
    for pieces in (mixed, [b"".join(mixed)]):
        assert_same_trace(read_stream(pieces, top_logprobs=20), (FIXTURES / "streams" / "deepseek.json").read_bytes(),
                          20)


def test_a_chunk_of_the_learned_layout_whose_content_is_not_one_string_is_a_malformed_chunk() -> None:
    chunks = events(provider_stream("deepseek"))
    content = b'"delta":{"content":'
    at = chunks[6].index(content) + len(content)
    bad = chunks[6][:at] + b'"a","b"' + chunks[6][chunks[6].index(b'},"logprobs"', at):]
    with pytest.raises(TransientError) as raised:
        read_stream([*chunks[:6], bad, *chunks[7:]], top_logprobs=20)
    assert raised.value.cause == "malformed chunk"


def test_a_stream_whose_layout_changes_midway_gives_the_same_trace() -> None:
    """`created` ticking over mid-stream: the chunks after it are read as the ones before."""
    chunks = events(provider_stream("deepseek"))
    created = chunks[3].split(b'"created":', 1)[1].split(b",", 1)[0]
    later = [chunk.replace(b'"created":' + created, b'"created":' + str(int(created) + 1).encode()) for chunk in
             chunks[20:]]
    assert later[0] != chunks[20]
    result = read_stream([b"".join([*chunks[:20], *later])], top_logprobs=20)
    assert_same_trace(result, (FIXTURES / "streams" / "deepseek.json").read_bytes(), 20)
