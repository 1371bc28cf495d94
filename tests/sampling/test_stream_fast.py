"""The batch path of a streamed read (sampling.stream_fast): many token chunks parsed together give the trace the
non-streamed reply gives, token by token and bit for bit; whatever it cannot read exactly (a line ending, a comment
that might hold a key, a layout change, a malformed chunk) goes to the per-chunk path, which decides it as before."""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pytest
import requests
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.sampling.test_client import make_client, messages
from tests.sampling.test_stream import client_for
from tests.sse_server import SSEScript, events, serve_sse
from tracevote.core.config_deepconf import DecodingConfig
from tracevote.core.config_endpoints import SimConfig
from tracevote.core.profiles import PROFILES
from tracevote.core.retry import TransientError
from tracevote.core.simulated import SOLVE
from tracevote.sampling.stream import Streamed, read_stream, stream_body, stream_completion
from tracevote.sampling.stream_fast import MIN_EVENTS, http_events, sse_events
from tracevote.sim.faults import parse_faults
from tracevote.sim.model import SimModel
from tracevote.sim.server import ServerOptions, running_server

SIM = SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=400, critique_noise=0.3)
DECODING = DecodingConfig(temperature=0.6, top_p=None, max_tokens=4000, top_logprobs=20)
PROFILE_NAMES = ("deepseek", "openai-chat", "local", "llama-cpp-python")


def sim_client(url: str, profile: str) -> Any:
    return make_client(url, decoding=DECODING, profile=PROFILES[profile], max_retries=1)


def assert_same(streamed: Streamed, reference: Any) -> None:
    """`reference`: a Sample (the non-streamed reply) or another Streamed."""
    assert streamed.tokens == reference.tokens and streamed.text == reference.text
    np.testing.assert_array_equal(streamed.token_logprobs, reference.token_logprobs)
    np.testing.assert_array_equal(streamed.token_confidence, reference.token_confidence)  # exactly, not close
    if isinstance(reference, Streamed):
        np.testing.assert_array_equal(streamed.top_logprobs, reference.top_logprobs)


def sim_stream_bytes(profile: str = "deepseek", key: str = "p/0") -> bytes:
    """The SSE body the simulator sends for one streamed trace, as the wire carries it after the HTTP framing."""
    with running_server(SimModel(SIM), options=ServerOptions(profile=profile)) as url, \
            sim_client(url, profile) as client:
        payload = orjson.dumps(stream_body(client, messages(), sample_key=key))
        return client.call_streamed(payload, key, SOLVE, lambda response, _started: response.content)


@pytest.mark.parametrize("profile", PROFILE_NAMES)
def test_a_long_stream_over_http_is_read_by_the_batch_path_as_its_reply_is_parsed(profile: str) -> None:
    """The simulator's streams (its keep-alive comments among the chunks) through a real socket: most chunks go the
    batch path, and the trace is the non-streamed reply of the same sample key."""
    with running_server(SimModel(SIM), options=ServerOptions(profile=profile)) as url, \
            sim_client(url, profile) as client:
        for sample_id in range(3):
            streamed = stream_completion(client, messages(), sample_key=f"p/{sample_id}")
            plain = client.sample(messages(), problem_id="p", sample_id=sample_id, keep_top_logprobs=True)
            assert_same(streamed, plain)
            assert streamed.n_tokens > 2 * MIN_EVENTS
            assert streamed.batched_chunks >= streamed.chunks // 2, (streamed.batched_chunks, streamed.chunks)


def test_a_stream_read_to_its_end_leaves_its_connection_to_the_next_call_and_a_stopped_one_closes_it() -> None:
    """Streams read to their end and a non-streamed call after them share one keep-alive connection (the server's
    own count); a stream the observer stops is closed (so the server stops generating) and the next call connects
    again. Each /_stats request below opens a connection of its own."""
    with running_server(SimModel(SIM)) as url, sim_client(url, "deepseek") as client:
        kept = [stream_completion(client, messages(), sample_key=f"p/{sample_id}") for sample_id in range(3)]
        plain = client.sample(messages(), problem_id="p", sample_id=0, keep_top_logprobs=True)
        assert_same(kept[0], plain)
        assert requests.get(f"{url}/_stats", timeout=30).json()["connections"] == 1 + 1
        stopped = stream_completion(client, messages(), sample_key="p/3", observer=lambda batch: "stop")
        after = stream_completion(client, messages(), sample_key="p/4")
        stats = requests.get(f"{url}/_stats", timeout=30).json()
    assert (stopped.stop_reason, after.stop_reason) == ("confidence", "finished")
    assert stats["connections"] == 2 + 2


def test_a_stream_of_sentinel_logprobs_is_asked_again_as_a_reply_of_them_is() -> None:
    """The simulator's sentinel fault (every logprob -9999, as a provider's bad replica sends) on a stream: the
    client names it as ingest does for a whole reply and asks again, so no trace of NaN confidences is kept."""
    with running_server(SimModel(SIM), parse_faults("sentinel=1.0,max_per_sample=1")) as url, \
            sim_client(url, "deepseek") as client:
        result = stream_completion(client, messages(), sample_key="p/0")
        plain = client.sample(messages(), problem_id="p", sample_id=0, keep_top_logprobs=True)
        stats = requests.get(f"{url}/_stats", timeout=30).json()
    assert client.retries.snapshot() == {"sentinel logprobs": 1}  # the stream's first attempt (the fault's one)
    assert stats["outcomes"]["sentinel"] == 1 and stats["by_sample"]["p/0"] == 3
    assert_same(result, plain)
    assert not np.isnan(result.token_confidence).any()


@pytest.mark.parametrize("size", [1 << 20, 1 << 16, 4096])
def test_reads_of_any_size_give_the_trace_the_per_chunk_path_gives(size: int) -> None:
    sse = sim_stream_bytes()
    one_by_one = read_stream(events(sse), top_logprobs=20)
    assert one_by_one.batched_chunks == 0  # one event a read: never enough for the batch path
    pieces = [sse[i:i + size] for i in range(0, len(sse), size)]
    batched = read_stream(pieces, top_logprobs=20)
    assert_same(batched, one_by_one)
    assert (batched.chunks, batched.finish_reason, batched.completion_tokens) == (
        one_by_one.chunks, one_by_one.finish_reason, one_by_one.completion_tokens)
    if size < 1 << 16:  # a read of a few chunks: the per-chunk path reads them
        assert batched.batched_chunks == 0
    else:
        assert batched.batched_chunks > one_by_one.chunks // 2


def token_events(sse: bytes) -> list[bytes]:
    return [event for event in events(sse) if event.startswith(b'data: {"id"') and b'"token"' in event]


def replaced(sse: bytes, index: int, new: bytes) -> bytes:
    """`sse` with its index-th token chunk replaced."""
    old = token_events(sse)[index]
    assert sse.count(old) >= 1
    at = sse.index(old)
    return sse[:at] + new + sse[at + len(old):]


def test_crlf_line_endings_go_to_the_per_chunk_path_with_the_same_trace() -> None:
    sse = sim_stream_bytes()
    crlf = sse.replace(b"\n", b"\r\n")
    result = read_stream([crlf], top_logprobs=20)
    assert_same(result, read_stream(events(sse), top_logprobs=20))
    assert result.batched_chunks == 0


def test_a_comment_that_might_hold_a_key_ends_the_batch_there() -> None:
    sse = sim_stream_bytes()
    at = sse.index(token_events(sse)[2 * MIN_EVENTS])
    tricky = sse[:at] + b': {"token":"x","logprob":-1.0}\n\n' + sse[at:]
    result = read_stream([tricky], top_logprobs=20)
    assert_same(result, read_stream(events(sse), top_logprobs=20))
    assert 0 < result.batched_chunks <= 2 * MIN_EVENTS


def test_a_layout_change_midway_ends_the_batch_and_the_trace_is_unchanged() -> None:
    sse = sim_stream_bytes()
    later = token_events(sse)[2 * MIN_EVENTS:]
    changed = sse
    for event in later:
        changed = changed.replace(event, event.replace(b'"created":', b'"created":1', 1))
    result = read_stream([changed], top_logprobs=20)
    assert_same(result, read_stream(events(sse), top_logprobs=20))
    assert 0 < result.batched_chunks <= 2 * MIN_EVENTS + 1


@pytest.mark.parametrize(("fault", "cause"), [
    ("two strings", "malformed chunk"),  # the content of one chunk is `"a","b"`
    ("newline in an item", "malformed chunk"),  # the chunk is two SSE lines: neither is JSON
])
def test_a_malformed_chunk_inside_a_batch_is_named_as_the_per_chunk_path_names_it(fault: str, cause: str) -> None:
    sse = sim_stream_bytes()
    index = 2 * MIN_EVENTS
    event = token_events(sse)[index]
    if fault == "two strings":
        start = event.index(b'"delta":{"content":') + len(b'"delta":{"content":')
        bad = event[:start] + b'"a","b"' + event[event.index(b'},"logprobs"', start):]
    else:
        at = event.index(b'"logprob":') + len(b'"logprob":')
        bad = event[:at] + b"\n" + event[at:]
    with pytest.raises(TransientError) as raised:
        read_stream([replaced(sse, index, bad)], top_logprobs=20)
    assert raised.value.cause == cause


def test_over_http_a_stream_with_crlf_events_is_read_whole_by_the_per_chunk_path() -> None:
    """The HTTP framing of a payload with carriage returns of its own still comes off by its sizes; the batch path
    leaves such chunks to the per-chunk path."""
    sse = sim_stream_bytes()
    crlf = [event.replace(b"\n", b"\r\n") for event in events(sse)]
    with serve_sse(SSEScript(crlf)) as url, client_for(url) as client:
        result = stream_completion(client, messages(), sample_key="p/0")
    assert_same(result, read_stream(events(sse), top_logprobs=20))
    assert result.batched_chunks == 0


@pytest.mark.parametrize(("body", "spans", "after"), [
    (b"9\r\ndata: a\n\n\r\n9\r\ndata: b\n\n\r\n", [(3, 12), (17, 26)], 28),
    (b"9\r\ndata: a\n\n\r\n0\r\n\r\n", [(3, 12)], 14),  # the last (empty) chunk ends them
    (b"9\r\ndata:", [], 0),  # a chunk not read whole yet
    (b"9;x=y\r\ndata: a\n\n\r\n", [], 0),  # a size line with an extension: the per-chunk path reads it
    (b"8\r\ndata: a\n\n\r\n", [], 0),  # a size that is not the payload's length
    (b"C\r\ndata: a\nb\n\n\r\n", [], 0),  # an event of two lines
    (b"B\r\ndata: a\r\n\r\n\r\n", [], 0),  # CRLF line endings
])
def test_http_events_are_the_one_line_events_of_the_whole_chunks_at_the_start(
        body: bytes, spans: list[tuple[int, int]], after: int) -> None:
    found = http_events(body)
    assert list(zip(found.starts.tolist(), found.ends.tolist(), strict=True)) == spans
    assert (found.after[-1] if len(found) else 0) == after


def chunk_spans_by_sizes(body: bytes) -> list[tuple[int, int]]:
    """What http_events must find, read a chunk at a time by its size line (pure hex digits), as the HTTP/1.1
    grammar reads it: whole chunks whose payload is one event of one line."""
    spans, at = [], 0
    while (line_end := body.find(b"\r\n", at)) >= 0:
        line = body[at:line_end]
        if not 1 <= len(line) <= 8 or any(c not in b"0123456789abcdefABCDEF" for c in line):
            break
        start = line_end + 2
        end = start + int(line, 16)
        payload = body[start:end]
        if end - start <= 2 or body[end:end + 2] != b"\r\n" or payload.find(b"\n") != len(payload) - 2 \
                or not payload.endswith(b"\n\n"):
            break
        spans.append((start, end))
        at = end + 2
    return spans


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.binary(min_size=1, max_size=12).filter(lambda b: b"\n" not in b and b"\r" not in b),
                          st.sampled_from(["ok", "ok", "ok", "upper", "zeros", "short", "long", "extension",
                                           "two lines", "crlf", "cut"])), max_size=8))
def test_http_events_finds_what_reading_chunk_by_chunk_finds(chunks: list[tuple[bytes, str]]) -> None:
    body = b""
    for text, fault in chunks:
        payload = b"data: " + text + (b"\nx\n\n" if fault == "two lines" else b"\r\n\r\n" if fault == "crlf"
                                     else b"\n\n")
        size = len(payload) + {"short": -1, "long": 1}.get(fault, 0)
        line = {"upper": b"%X", "zeros": b"000%x", "extension": b"%x;a=b"}.get(fault, b"%x") % size
        framed = line + b"\r\n" + payload + b"\r\n"
        body += framed[:len(framed) // 2] if fault == "cut" else framed
    found = http_events(body)
    assert list(zip(found.starts.tolist(), found.ends.tolist(), strict=True)) == chunk_spans_by_sizes(body)
    assert (found.after == found.ends + 2).all()


@pytest.mark.parametrize(("body", "ends"), [
    (b"data: a\n\ndata: b\n\n", [9, 18]),
    (b"data: a\n\ndata: b", [9]),  # not whole yet
    (b"data: a\n\n\n\ndata: b\n\n", [9]),  # a blank line more: the per-chunk path reads the rest
    (b": keep-alive\n\ndata: a\n\n", [14, 23]),
    (b"data: a\ndata: b\n\n", []),  # an event of two lines
])
def test_sse_events_are_the_one_line_events_at_the_start(body: bytes, ends: list[int]) -> None:
    found = sse_events(body)
    assert found.ends.tolist() == ends and found.starts.tolist() == [0, *ends[:-1]][:len(ends)]  # one start an end
