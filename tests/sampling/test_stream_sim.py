"""Streams of the simulator (sampling.stream over a real socket, or their bytes read back as recorded): the trace
is the non-streamed reply's however the reads split it, whatever their line endings, comments or layout changes;
a malformed chunk is named; a stream read to its end gives its connection to the next call, a stopped one closes
it."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import orjson
import pytest
import requests

from tests.conftest import EVENT_TIMEOUT_S
from tests.sampling.test_client import make_client, messages
from tests.sampling.test_stream import client_for
from tests.sse_server import SSEScript, events, serve_sse
from tracevote.core.config_deepconf import DecodingConfig
from tracevote.core.config_endpoints import SimConfig
from tracevote.core.profiles import PROFILES
from tracevote.core.retry import TransientError
from tracevote.core.simulated import SOLVE
from tracevote.sampling.stream import Streamed, read_stream, stream_body, stream_completion
from tracevote.sim.faults import parse_faults
from tracevote.sim.model import SimModel
from tracevote.sim.server import ServerOptions, running_server

SIM = SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=400, critique_noise=0.3)
DECODING = DecodingConfig(temperature=0.6, top_p=None, max_tokens=4000, top_logprobs=20)
EVENTS = 32  # token chunks before the ones a test changes: well inside a stream
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
def test_a_long_stream_over_http_is_the_reply_of_the_same_sample_key(profile: str) -> None:
    """The simulator's streams (its keep-alive comments among the chunks) through a real socket: the trace is the
    non-streamed reply of the same sample key."""
    with running_server(SimModel(SIM), options=ServerOptions(profile=profile)) as url, \
            sim_client(url, profile) as client:
        for sample_id in range(3):
            streamed = stream_completion(client, messages(), sample_key=f"p/{sample_id}")
            plain = client.sample(messages(), problem_id="p", sample_id=sample_id, keep_top_logprobs=True)
            assert_same(streamed, plain)
            assert streamed.n_tokens > 2 * EVENTS


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


def test_a_stream_stopped_after_the_server_wrote_all_of_it_still_closes_its_connection() -> None:
    """Whether a stopped stream's connection closes does not hang on how far the reads got: here the server has
    written the whole stream before the observer stops it at its first batch, and the next call
    still connects again (a stream's reads are asked for one at a time, so a stopped one never reaches its end)."""
    polls: list[int] = []

    def finished_streams(url: str) -> int:
        polls.append(1)  # each /_stats request opens a connection of its own
        return requests.get(f"{url}/_stats", timeout=30).json()["streams"].get("finished", 0)

    with running_server(SimModel(SIM)) as url, sim_client(url, "deepseek") as client:
        def observer(batch: object) -> str:
            deadline = time.monotonic() + EVENT_TIMEOUT_S
            while not finished_streams(url) and time.monotonic() < deadline:
                time.sleep(0.01)
            return "stop"

        stopped = stream_completion(client, messages(), sample_key="p/0", observer=observer)
        assert finished_streams(url) == 1  # the server wrote it all
        after = stream_completion(client, messages(), sample_key="p/1")
        stats = requests.get(f"{url}/_stats", timeout=30).json()
    assert (stopped.stop_reason, after.stop_reason) == ("confidence", "finished")
    assert stats["connections"] == 1 + len(polls) + 1 + 1  # the stopped stream's, the polls', the next's, this one


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
def test_reads_of_any_size_give_the_trace_an_event_a_read_gives(size: int) -> None:
    sse = sim_stream_bytes()
    one_by_one = read_stream(events(sse), top_logprobs=20)
    pieces = [sse[i:i + size] for i in range(0, len(sse), size)]
    batched = read_stream(pieces, top_logprobs=20)
    assert_same(batched, one_by_one)
    assert (batched.chunks, batched.finish_reason, batched.completion_tokens) == (
        one_by_one.chunks, one_by_one.finish_reason, one_by_one.completion_tokens)


def token_events(sse: bytes) -> list[bytes]:
    return [event for event in events(sse) if event.startswith(b'data: {"id"') and b'"token"' in event]


def replaced(sse: bytes, index: int, new: bytes) -> bytes:
    """`sse` with its index-th token chunk replaced."""
    old = token_events(sse)[index]
    assert sse.count(old) >= 1
    at = sse.index(old)
    return sse[:at] + new + sse[at + len(old):]


def test_crlf_line_endings_give_the_same_trace() -> None:
    sse = sim_stream_bytes()
    crlf = sse.replace(b"\n", b"\r\n")
    result = read_stream([crlf], top_logprobs=20)
    assert_same(result, read_stream(events(sse), top_logprobs=20))


def test_a_comment_that_might_hold_a_key_is_only_a_comment() -> None:
    sse = sim_stream_bytes()
    at = sse.index(token_events(sse)[2 * EVENTS])
    tricky = sse[:at] + b': {"token":"x","logprob":-1.0}\n\n' + sse[at:]
    result = read_stream([tricky], top_logprobs=20)
    assert_same(result, read_stream(events(sse), top_logprobs=20))


def test_a_layout_change_midway_leaves_the_trace_unchanged() -> None:
    sse = sim_stream_bytes()
    later = token_events(sse)[2 * EVENTS:]
    changed = sse
    for event in later:
        changed = changed.replace(event, event.replace(b'"created":', b'"created":1', 1))
    result = read_stream([changed], top_logprobs=20)
    assert_same(result, read_stream(events(sse), top_logprobs=20))


@pytest.mark.parametrize(("fault", "cause"), [
    ("two strings", "malformed chunk"),  # the content of one chunk is `"a","b"`
    ("newline in an item", "malformed chunk"),  # the chunk is two SSE lines: neither is JSON
])
def test_a_malformed_chunk_midway_is_named(fault: str, cause: str) -> None:
    sse = sim_stream_bytes()
    index = 2 * EVENTS
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


def test_over_http_a_stream_with_crlf_events_is_read_whole() -> None:
    """The HTTP framing of a payload with carriage returns of its own still comes off by its sizes."""
    sse = sim_stream_bytes()
    crlf = [event.replace(b"\n", b"\r\n") for event in events(sse)]
    with serve_sse(SSEScript(crlf)) as url, client_for(url) as client:
        result = stream_completion(client, messages(), sample_key="p/0")
    assert_same(result, read_stream(events(sse), top_logprobs=20))
