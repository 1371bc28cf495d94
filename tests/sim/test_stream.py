"""The simulator streams: chunk layouts per profile, streamed == whole replies token by token, refusals as the
whole path refuses, a disconnect stops generation, and faults mid-stream, with requests against sim-server.
The SSE lines are parsed minimally here (the project's stream parser lives in sampling/)."""

from __future__ import annotations

import socket
import threading
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import requests

from tests.conftest import EVENT_TIMEOUT_S, wait_for
from tracevote.core.config_endpoints import SimConfig
from tracevote.core.profiles import PROFILES
from tracevote.core.simulated import SAMPLE_HEADER
from tracevote.debate.prompts import ANSWER
from tracevote.sim.faults import FaultPlan, parse_faults
from tracevote.sim.model import SimModel
from tracevote.sim.request import SimRequestError
from tracevote.sim.server import ServerOptions, running_server

MODEL = SimModel(SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=120))
PROMPT = "Find the number of integers n with 1 <= n <= 100.\n\nPlease reason step by step."
LOGPROB_PROFILES = ("deepseek", "openai-chat", "local", "llama-cpp-python")


def chat(profile: str = "deepseek", **fields: Any) -> dict[str, Any]:
    token_limit = PROFILES[profile].token_limit_field
    base = {"model": "m", "messages": [{"role": "user", "content": PROMPT}], token_limit: 300}
    if PROFILES[profile].logprobs:
        base |= {"logprobs": True, "top_logprobs": 5}
    return base | fields


def events(lines: Iterator[bytes]) -> list[Any]:
    """The data of each event: a parsed chunk, the bytes of one that is not JSON, or "[DONE]"."""
    parsed: list[Any] = []
    for line in lines:
        if not line.startswith(b"data: "):
            continue
        data = line[len(b"data: "):]
        if data == b"[DONE]":
            parsed.append("[DONE]")
            continue
        try:
            parsed.append(orjson.loads(data))
        except orjson.JSONDecodeError:
            parsed.append(data)
    return parsed


def content_chunks(chunks: list[Any]) -> list[dict[str, Any]]:
    return [c for c in chunks if isinstance(c, dict) and c["choices"] and "content" in c["choices"][0]["delta"]
            and c["choices"][0]["delta"]["content"]]


def streamed_items(chunks: list[Any]) -> list[dict[str, Any]]:
    return [item for c in content_chunks(chunks) for item in c["choices"][0]["logprobs"]["content"]]


@pytest.mark.parametrize("profile", LOGPROB_PROFILES)
def test_a_stream_carries_the_whole_replys_tokens_one_per_chunk(profile: str) -> None:
    whole = MODEL.complete_bytes(chat(profile), "s1", profile=PROFILES[profile])
    expected = orjson.loads(whole)["choices"][0]
    in_process = events(e.data.strip() for e in MODEL.stream(chat(profile, stream=True), "s1",
                                                                   profile=PROFILES[profile]))
    with running_server(MODEL, options=ServerOptions(profile=profile)) as url:
        reply = requests.post(f"{url}/chat/completions", json=chat(profile, stream=True),
                              headers={SAMPLE_HEADER: "s1"}, stream=True, timeout=EVENT_TIMEOUT_S)
        served = events(reply.iter_lines())
    assert served == in_process
    items = streamed_items(served)
    wanted = expected["logprobs"]["content"]
    if profile == "llama-cpp-python":  # llama.cpp's server sends "bytes": null
        wanted = [_bytes_null(item) for item in wanted]
    assert items == wanted
    text = "".join(c["choices"][0]["delta"]["content"] for c in content_chunks(served))
    assert text == expected["message"]["content"]
    assert served[0]["choices"][0]["delta"]["role"] == "assistant"
    assert served[-2]["choices"][0]["finish_reason"] == expected["finish_reason"]
    assert served[-1] == "[DONE]"


def _bytes_null(item: dict[str, Any]) -> dict[str, Any]:
    return item | {"bytes": None, "top_logprobs": [top | {"bytes": None} for top in item["top_logprobs"]]}


@pytest.mark.parametrize(("profile", "usage_chunk"), [("deepseek", True), ("openai-chat", True), ("local", True),
                                                       ("llama-cpp-python", False), ("openai-reasoning", True)])
def test_a_usage_chunk_comes_when_asked_where_the_provider_sends_one(profile: str, usage_chunk: bool) -> None:
    request = chat(profile, stream=True, stream_options={"include_usage": True})
    chunks = events(e.data.strip() for e in MODEL.stream(request, "s2", profile=PROFILES[profile]))
    usage = [c["usage"] for c in chunks if isinstance(c, dict) and c.get("usage")]
    whole = orjson.loads(MODEL.complete_bytes(chat(profile), "s2", profile=PROFILES[profile]))
    assert usage == ([whole["usage"]] if usage_chunk else [])
    if not PROFILES[profile].logprobs:  # openai-reasoning: the text streams, logprobs null
        assert all(c["choices"][0]["logprobs"] is None for c in content_chunks(chunks))


@pytest.mark.parametrize(("profile", "fields", "status"), [
    ("openai-reasoning", {"logprobs": True}, 400),
    ("openai-reasoning", {"max_tokens": 100}, 400),
    ("openai-chat", {"thinking": {"type": "enabled"}}, 400),
    ("deepseek", {"top_logprobs": 25}, 400),
    ("deepseek", {"stream": False, "stream_options": {"include_usage": True}}, 400),
    ("deepseek", {"stream": "yes"}, 422),
])
def test_a_stream_is_refused_as_the_whole_reply_is(profile: str, fields: dict[str, Any], status: int) -> None:
    request = {"stream": True} | chat(profile) | fields
    with pytest.raises(SimRequestError) as refused:
        MODEL.stream(request, "s3", profile=PROFILES[profile])
    assert refused.value.status == status
    with running_server(MODEL, options=ServerOptions(profile=profile)) as url:
        reply = requests.post(f"{url}/chat/completions", json=request, timeout=EVENT_TIMEOUT_S)
    assert reply.status_code == status
    assert reply.json()["error"]["message"] == str(refused.value)


def test_a_client_that_hangs_up_stops_the_generation() -> None:
    """Each chunk is made only once the client has read the one before (the pace hook), so the count the server
    keeps can be compared with what the client read, without timing."""
    steps = threading.Semaphore(1)
    read = 10
    with running_server(MODEL, options=ServerOptions(pace=lambda: steps.acquire(timeout=EVENT_TIMEOUT_S))) as url:
        reply = requests.post(f"{url}/chat/completions", json=chat(stream=True), headers={SAMPLE_HEADER: "cut"},
                              stream=True, timeout=EVENT_TIMEOUT_S)
        received = 0
        for line in reply.iter_lines():
            if line:  # an event, or DeepSeek's keep-alive comment: each was one step of the server
                received += line.startswith(b"data: ") and b'"content":"' in line and b'"role"' not in line
                steps.release()
            if received == read:
                break
        reply.close()
        steps.release()  # let the server try its next chunk: it finds the client gone
        stats = lambda: requests.get(f"{url}/_stats", timeout=EVENT_TIMEOUT_S).json()  # noqa: E731
        wait_for(lambda: stats()["streams"].get("client gone") == 1, "the server to see the client gone")
        generated = stats()["generated_tokens"]["cut"]
    whole = orjson.loads(MODEL.complete_bytes(chat(), "cut"))["usage"]["completion_tokens"]
    assert whole > read + 2
    assert read <= generated <= read + 1


def test_a_paced_stream_makes_no_more_tokens_than_its_pace_allows_and_stops_when_the_client_hangs_up() -> None:
    """tokens_per_s: the server's count can never pass 1 + pace x the seconds since the request (whatever the load),
    and once the client is gone it stops before the trace's end, having made at least what the client read."""
    pace, read = 20, 10  # the trace is 300 tokens long: 14 s for the client to close before it ends
    started = time.monotonic()
    with running_server(MODEL, options=ServerOptions(tokens_per_s=pace, send_buffer=4096)) as url:
        reply = requests.post(f"{url}/chat/completions", json=chat(stream=True), headers={SAMPLE_HEADER: "paced"},
                              stream=True, timeout=EVENT_TIMEOUT_S)
        received = 0
        for line in reply.iter_lines():
            received += line.startswith(b"data: ") and b'"content":"' in line and b'"role"' not in line
            if received == read:
                break
        reply.close()
        stats = lambda: requests.get(f"{url}/_stats", timeout=EVENT_TIMEOUT_S).json()  # noqa: E731
        wait_for(lambda: stats()["streams"].get("client gone") == 1, "the server to see the client gone")
        generated = stats()["generated_tokens"]["paced"]
        elapsed = time.monotonic() - started
    whole = orjson.loads(MODEL.complete_bytes(chat(), "paced"))["usage"]["completion_tokens"]
    assert read <= generated < whole
    assert generated <= 1 + pace * elapsed


def _faulty(kind: str, **options: Any) -> FaultPlan:
    return FaultPlan(rates=((kind, 1.0),), stream_after=4, **options)


def _post(url: str, timeout: float | tuple[float, float] = EVENT_TIMEOUT_S) -> requests.Response:
    return requests.post(f"{url}/chat/completions", json=chat(stream=True), headers={SAMPLE_HEADER: "f"},
                         stream=True, timeout=timeout)


def _read(reply: requests.Response, into: list[bytes]) -> None:
    into.extend(reply.iter_lines())


def test_a_dropped_stream_ends_mid_body_after_its_chunks() -> None:
    lines: list[bytes] = []
    with running_server(MODEL, _faulty("drop")) as url, pytest.raises(requests.exceptions.ChunkedEncodingError):
        _read(_post(url), lines)
    chunks = events(iter(lines))
    assert len(content_chunks(chunks)) == 4
    assert "[DONE]" not in chunks


def _raw_body(url: str) -> bytes:
    """A streamed reply's body as it came off the socket, its HTTP chunk framing and all, until the server closed."""
    where = urllib.parse.urlsplit(url)
    request = orjson.dumps(chat(stream=True))
    with socket.create_connection((where.hostname, where.port), timeout=EVENT_TIMEOUT_S) as connection:
        connection.sendall(b"POST /chat/completions HTTP/1.1\r\nHost: sim\r\nContent-Type: application/json\r\n"
                           + f"{SAMPLE_HEADER}: f\r\nContent-Length: {len(request)}\r\n\r\n".encode() + request)
        received = b""
        while data := connection.recv(1 << 16):
            received += data
    return received.split(b"\r\n\r\n", 1)[1]


def _chunks(body: bytes) -> tuple[list[bytes], bytes]:
    """The payloads of the whole HTTP chunks of `body`, and what follows the last of them (a chunk cut short)."""
    payloads = []
    while b"\r\n" in body:
        size_line, rest = body.split(b"\r\n", 1)
        size = int(size_line, 16)
        if len(rest) < size + 2:
            break
        payloads.append(rest[:size])
        body = rest[size + 2:]
    return payloads, body


@pytest.mark.parametrize(("kind", "cut_inside_a_chunk"), [("cut", True), ("drop", False)])
def test_a_cut_stream_closes_inside_an_http_chunk_and_a_dropped_one_between_two(kind: str,
                                                                                 cut_inside_a_chunk: bool) -> None:
    with running_server(MODEL, _faulty(kind)) as url:
        payloads, rest = _chunks(_raw_body(url))
    assert len(content_chunks(events(iter(b"".join(payloads).splitlines())))) == 4
    assert b"" not in payloads  # no last chunk: the body never ended
    assert bool(rest) == cut_inside_a_chunk
    if cut_inside_a_chunk:
        size_line, partial = rest.split(b"\r\n", 1)
        assert 0 < len(partial) < int(size_line, 16)


def test_a_stalled_stream_meets_the_clients_read_timeout() -> None:
    lines: list[bytes] = []
    with running_server(MODEL, _faulty("slow", slow_s=EVENT_TIMEOUT_S)) as url:
        # the stall never ends (EVENT_TIMEOUT_S), the chunks before it come at once: a 1 s read timeout meets it
        reply = _post(url, timeout=(EVENT_TIMEOUT_S, 1.0))
        with pytest.raises(requests.exceptions.ConnectionError, match="timed out"):
            _read(reply, lines)
        reply.close()
        stats = lambda: requests.get(f"{url}/_stats", timeout=EVENT_TIMEOUT_S).json()  # noqa: E731
        wait_for(lambda: stats()["streams"].get("client gone") == 1, "the stalled stream to see the client gone")
    assert len(content_chunks(events(iter(lines)))) == 4


def test_a_malformed_chunk_is_half_an_event_and_the_stream_goes_on() -> None:
    with running_server(MODEL, _faulty("malformed")) as url:
        chunks = events(_post(url).iter_lines())
    broken = [index for index, chunk in enumerate(chunks) if isinstance(chunk, bytes)]
    assert broken == [5]  # the role chunk, four content chunks, then the broken one
    assert chunks[-1] == "[DONE]"


def test_a_truncated_stream_ends_cleanly_without_finish_or_done() -> None:
    with running_server(MODEL, _faulty("truncated")) as url:
        chunks = events(_post(url).iter_lines())
        streams = requests.get(f"{url}/_stats", timeout=EVENT_TIMEOUT_S).json()["streams"]
    assert len(content_chunks(chunks)) == 4
    assert "[DONE]" not in chunks
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks)
    assert streams == {"truncated": 1}


def test_another_kind_of_call_streams_its_whole_text_in_one_chunk() -> None:
    request = chat("deepseek", stream=True, stream_options={"include_usage": True})
    request = {key: value for key, value in request.items() if key not in ("logprobs", "top_logprobs")}
    plain = {key: value for key, value in request.items() if key not in ("stream", "stream_options")}
    whole = orjson.loads(MODEL.complete_bytes(plain, "k1", kind=ANSWER))
    chunks = events(e.data.strip() for e in MODEL.stream(request, "k1", kind=ANSWER))
    assert [c["choices"][0]["delta"]["content"] for c in content_chunks(chunks)] == [
        whole["choices"][0]["message"]["content"]]
    assert chunks[-2]["usage"] == whole["usage"]


def test_the_fault_spec_takes_stream_after() -> None:
    assert parse_faults("drop=0.5,stream_after=3") == FaultPlan(rates=(("drop", 0.5),), stream_after=3)


def test_a_fault_set_to_strike_after_the_last_chunk_leaves_the_stream_whole() -> None:
    with running_server(MODEL, FaultPlan(rates=(("truncated", 1.0),), stream_after=10**6)) as url:
        chunks = events(_post(url).iter_lines())
        stats = requests.get(f"{url}/_stats", timeout=EVENT_TIMEOUT_S).json()
    assert chunks[-1] == "[DONE]"
    assert stats["streams"] == {"finished": 1}
    assert stats["generated_tokens"] == {"f": len(content_chunks(chunks))}
