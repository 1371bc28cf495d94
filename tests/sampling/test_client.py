"""The real client against the sim server on loopback: faults are retried, refusals stop at once."""

from __future__ import annotations

import collections
import contextlib
import os
import re
import threading
import traceback
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson
import pytest
import requests

from tests.conftest import EVENT_TIMEOUT_S, wait_for
from tests.sim_servers import refusing_urls
from tracevote.core.config_deepconf import DecodingConfig
from tracevote.core.config_endpoints import ModelConfig, SimConfig
from tracevote.core.errors import ConfigError, EndpointError, EndpointNotFoundError, FatalAPIError, ModelNotFoundError
from tracevote.core.retry import Backoff, RetryNotice, TransientError
from tracevote.core.simulated import KIND_HEADER, SAMPLE_HEADER
from tracevote.sampling.apikey import resolve_api_key
from tracevote.sampling.client import UNCAPPED, ChatClient
from tracevote.sampling.limiter import AdaptiveLimiter
from tracevote.sim.faults import FaultPlan, parse_faults
from tracevote.sim.model import SimModel
from tracevote.sim.server import ServerOptions, SimServer, _Handler, start_server, stop_server

SIM = SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=60)
DECODING = DecodingConfig(temperature=0.6, top_p=None, max_tokens=128, top_logprobs=20)
FAST = Backoff(initial_s=0.001, max_s=0.01)
KEY_ENV = "TRACEVOTE_TEST_KEY"
CANARY = "sk-CANARY-4f1e2d3c-never-print-me"
FAULT_CAUSES = {"429": "HTTP 429", "500": "HTTP 500", "503": "HTTP 503", "drop": "connection",
                "malformed": "malformed JSON", "truncated": "truncated body", "nologprobs": "missing logprobs",
                "sentinel": "sentinel logprobs", "cut": "truncated body"}


@contextlib.contextmanager
def sim_server(faults: str = "", **options: Any) -> Iterator[SimServer]:
    server = start_server(SimModel(SIM), parse_faults(faults) if faults else FaultPlan(), ServerOptions(**options))
    try:
        yield server
    finally:
        stop_server(server)


class HoldingServer(SimServer):
    """The sim server, but its "slow" responses wait until `released` is set: each one certainly times out."""

    def __init__(self, faults: str) -> None:
        super().__init__(("127.0.0.1", 0), SimModel(SIM), parse_faults(faults), ServerOptions())
        self.RequestHandlerClass = _HoldSlowHandler
        self.released = threading.Event()


class _HoldSlowHandler(_Handler):
    server: HoldingServer

    def _send_completion(self, request: dict[str, Any], sample_key: str | None, delivered_key: str | None,
                         kind: str, fault: str | None) -> None:
        if fault == "slow":
            self.server.released.wait(EVENT_TIMEOUT_S)
        super()._send_completion(request, sample_key, delivered_key, kind, fault)


@contextlib.contextmanager
def holding_server(faults: str) -> Iterator[HoldingServer]:
    server = HoldingServer(faults)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield server
    finally:
        server.released.set()
        stop_server(server)


@contextlib.contextmanager
def canned_server(status: int, body: bytes, content_type: str) -> Iterator[str]:
    """A loopback server answering every POST with one fixed response, as other servers would."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def model_config(base_url: str, name: str = "deepseek-v4-flash", **changes: Any) -> ModelConfig:
    settings = {"backend": "openai", "base_url": base_url, "name": name, "extra_body": {},
                "api_key_env": KEY_ENV, "needs_key": False, "sim": SIM, **changes}
    return ModelConfig(**settings)


def make_client(base_url: str, *, decoding: DecodingConfig = DECODING, api_key: str | None = None,
                timeout_s: float = 5.0, max_retries: int = 4, **changes: Any) -> ChatClient:
    concurrency = changes.pop("concurrency", UNCAPPED)
    on_retry = changes.pop("on_retry", None)
    return ChatClient(model_config(base_url, **changes), decoding, api_key=api_key, timeout_s=timeout_s,
                      max_retries=max_retries, concurrency=concurrency, backoff=FAST, on_retry=on_retry)


def messages(problem: str = "Find x.") -> list[dict[str, str]]:
    return [{"role": "user", "content": f"{problem}\n\nPlease reason step by step, and put your final answer "
                                        "within \\boxed{}."}]


def stats(server: SimServer) -> dict[str, Any]:
    return requests.get(server.base_url + "/_stats", timeout=5).json()  # the server's own account, over HTTP


def draw(client: ChatClient, n: int, problem: str = "p") -> list[Any]:
    return [client.sample(messages(), problem_id=problem, sample_id=i, keep_top_logprobs=False) for i in range(n)]


@pytest.mark.parametrize("kind", FAULT_CAUSES)
def test_each_fault_alone_is_retried_until_every_sample_arrives(kind: str) -> None:
    with sim_server(f"{kind}=0.5,seed=3,retry_after_s=0.01") as server:
        client = make_client(server.base_url)
        samples = draw(client, 10)
        seen = stats(server)
    assert [s.sample_id for s in samples] == list(range(10)) and all(s.n_tokens for s in samples)
    faults = seen["outcomes"].get(kind, 0)
    assert faults > 0
    assert client.retries.snapshot() == {FAULT_CAUSES[kind]: faults}
    assert client.failures.snapshot() == {}
    assert seen["delivered"] == {f"p/{i}": 1 for i in range(10)}
    assert seen["requests"] == 10 + faults


def test_slow_responses_within_the_timeout_are_just_slow() -> None:
    with sim_server("slow=0.5,slow_s=0.05,seed=3") as server:
        client = make_client(server.base_url, timeout_s=2.0)
        draw(client, 6)
        seen = stats(server)
    assert seen["outcomes"]["slow"] > 0 and seen["requests"] == 6
    assert client.retries.snapshot() == {}


def test_responses_slower_than_the_timeout_are_retried() -> None:
    with holding_server("slow=0.5,slow_s=0,seed=3") as server:
        client = make_client(server.base_url, timeout_s=0.4, max_retries=10)
        samples = draw(client, 6)
        timeouts = client.retries.snapshot().get("timeout", 0)
        # every attempt the client gave up on reaches the server's count, perhaps after the client moved on
        wait_for(lambda: stats(server)["requests"] == 6 + timeouts, "the server to count every attempt")
        seen = stats(server)
    assert [s.sample_id for s in samples] == list(range(6))
    assert set(client.retries.snapshot()) == {"timeout"}
    # each held response timed out; on a loaded machine a plain one may also outlast 0.4 s, so this is a bound
    assert 0 < seen["outcomes"]["slow"] <= timeouts


def test_all_faults_mixed_every_sample_arrives_and_counts_match() -> None:
    wanted = [(f"q{p}", i) for p in range(4) for i in range(12)]
    with sim_server("all=0.2,seed=7,retry_after_s=0.01,slow_s=0.01") as server:
        client = make_client(server.base_url, concurrency=4, max_retries=3)

        def one(job: tuple[str, int]) -> Any:
            return client.sample(messages(job[0]), problem_id=job[0], sample_id=job[1], keep_top_logprobs=True)

        with ThreadPoolExecutor(4) as pool:
            samples = list(pool.map(one, wanted))
        seen = stats(server)
    assert [(s.problem_id, s.sample_id) for s in samples] == wanted
    assert seen["delivered"] == {f"{p}/{i}": 1 for p, i in wanted}  # nothing asked twice once it arrived
    assert set(seen["by_sample"]) == {f"{p}/{i}" for p, i in wanted}
    outcomes = seen["outcomes"]
    expected = collections.Counter()  # truncated and cut give the same cause
    for kind, count in outcomes.items():
        if kind in FAULT_CAUSES:
            expected[FAULT_CAUSES[kind]] += count
    assert client.retries.snapshot() == expected
    assert sum(expected.values()) > 5 and client.failures.snapshot() == {}
    assert seen["requests"] == len(wanted) + sum(expected.values())
    if outcomes.get("429"):
        assert client.endpoints.endpoints[0].limiter.lowest < 4


def test_retries_run_out_with_the_cause_of_the_last_failure() -> None:
    with sim_server("500=1.0,max_per_sample=100") as server:
        client = make_client(server.base_url, max_retries=2)
        with pytest.raises(TransientError) as caught:
            draw(client, 1)
        seen = stats(server)
    assert caught.value.cause == "HTTP 500"
    assert seen["requests"] == 3
    assert client.retries.snapshot() == {"HTTP 500": 2} and client.failures.snapshot() == {"HTTP 500": 1}


def test_a_server_never_reached_is_an_endpoint_error() -> None:
    with sim_server() as server:
        url = server.base_url
    client = make_client(url, max_retries=1)
    with pytest.raises(EndpointError) as caught:
        draw(client, 1)
    assert "connection refused" in str(caught.value) and client.failures.snapshot() == {"connection refused": 1}


FATAL = [
    ("401", {"api_key": "sk-the-right-one"}, {"api_key": CANARY}, ["$" + KEY_ENV, "authentication"]),
    ("402", {"no_balance": True}, {}, ["Top up", "Insufficient Balance"]),
    ("400", {"models": ("deepseek-v4-flash",)}, {"name": "deepseek-chat"},
     ["'deepseek-chat' not found", "Model Not Exist", "deepseek-v4-flash", "endpoints.deepseek.name"]),
    ("400", {"max_top_logprobs": 5}, {}, ["top_logprobs 20", "exceeds", "decoding"]),
]


@pytest.mark.parametrize(("status", "options", "client_settings", "says"), FATAL,
                         ids=["401", "402", "unknown model", "400"])
def test_refusals_stop_at_once_with_what_to_do(status: str, options: dict, client_settings: dict,
                                               says: list[str]) -> None:
    with sim_server("all=0.2", **options) as server:
        client = make_client(server.base_url, **client_settings)
        with pytest.raises(FatalAPIError) as caught:
            draw(client, 3)
        seen = stats(server)
    assert caught.value.status == int(status)
    assert seen["requests"] == 1 and seen["outcomes"] == {status: 1}
    for words in says:
        assert words in str(caught.value)


def test_a_wrong_path_is_told_apart_from_an_unknown_model() -> None:
    with sim_server() as server:
        client = make_client(server.base_url + "/v2")
        with pytest.raises(EndpointNotFoundError) as caught:
            draw(client, 1)
    message = str(caught.value)
    assert f"the endpoint {server.base_url}/v2/chat/completions answered 404" in message
    assert "check endpoints.deepseek.base_url" in message and "/v1/chat/completions" in message
    assert "model.name" not in message and "\n" not in message


def test_a_dead_port_gives_up_early_with_the_endpoint_and_the_cause() -> None:
    notices: list[RetryNotice] = []
    with refusing_urls() as (url,), pytest.raises(EndpointError) as caught:
        client = make_client(url, max_retries=8, on_retry=notices.append)
        draw(client, 1)
    assert str(caught.value).startswith(f"cannot connect to {client.url}: connection refused (gave up after 3 ")
    assert [(n.attempt, n.attempts, n.error.cause) for n in notices] == [(1, 3, "connection refused"),
                                                                         (2, 3, "connection refused")]
    assert notices[0].render().startswith(f"connecting to {client.url}: attempt 1/3 failed (connection refused), "
                                          f"retrying in ")
    assert client.retries.snapshot() == {"connection refused": 2}


def test_an_endpoint_that_went_away_mid_build_keeps_the_long_retry_budget() -> None:
    with sim_server() as server:
        client = make_client(server.base_url, max_retries=4)
        draw(client, 1)
    client.close()  # subtle: a kept-alive connection would outlive the server
    with pytest.raises(TransientError) as caught:
        draw(client, 1)
    assert caught.value.cause == "connection refused" and not caught.value.unreachable
    assert client.retries.snapshot() == {"connection refused": 4}


@pytest.mark.parametrize(("body", "content_type", "status", "error"), [
    (b"", "text/plain", 404, EndpointNotFoundError),
    (b"<html><title>404 Not Found</title></html>", "text/html", 404, EndpointNotFoundError),
    (b'{"error": {"message": "Not Found", "type": "invalid_request_error", "code": null}}', "application/json",
     404, EndpointNotFoundError),
    (b'{"error": {"message": "The model `deepseek-chat` does not exist", "code": "model_not_found"}}',
     "application/json", 404, ModelNotFoundError),  # OpenAI
    (b'{"object": "error", "message": "The model `deepseek-chat` does not exist.", "code": 404}',
     "application/json", 404, ModelNotFoundError),  # vLLM
    (b'{"error": {"message": "Model Not Exist", "type": "invalid_request_error", "code": "invalid_request_error"}}',
     "application/json", 400, ModelNotFoundError),  # DeepSeek
])
def test_404_bodies_name_the_path_or_the_model(body: bytes, content_type: str, status: int, error: type) -> None:
    with canned_server(status, body, content_type) as base_url:
        client = make_client(base_url, name="deepseek-chat")
        with pytest.raises(FatalAPIError) as caught:
            draw(client, 1)
    assert type(caught.value) is error
    hint = "check endpoints.deepseek.base_url" if error is EndpointNotFoundError else "Check endpoints.deepseek.name"
    assert hint in str(caught.value)


def test_the_api_key_never_shows() -> None:
    with sim_server(api_key="sk-another-key") as server:
        client = make_client(server.base_url, api_key=CANARY, needs_key=True)
        with pytest.raises(FatalAPIError) as refused:
            draw(client, 1)
    dead = make_client(server.base_url, api_key=CANARY, max_retries=0)
    with pytest.raises(EndpointError) as unreachable:
        draw(dead, 1)
    for exc in (refused.value, unreachable.value):
        shown = str(exc) + repr(exc) + "".join(traceback.format_exception(exc))
        assert CANARY not in shown
    assert CANARY not in repr(client) and CANARY not in str(vars(client.model))


def test_the_key_is_sent_as_a_bearer_token() -> None:
    with sim_server(api_key=CANARY) as server:
        client = make_client(server.base_url, api_key=CANARY, needs_key=True)
        assert draw(client, 1)[0].n_tokens > 0


def test_request_body_sends_top_p_only_when_set_and_extra_body_as_is() -> None:
    extra = {"thinking": {"type": "disabled"}}
    plain = make_client("http://127.0.0.1:9", extra_body=extra).request_body(messages())
    nucleus = make_client("http://127.0.0.1:9", decoding=DecodingConfig(0.6, 0.95, 128, 20)).request_body(messages())
    assert "top_p" not in plain and nucleus["top_p"] == 0.95
    assert plain["thinking"] == extra["thinking"]
    assert (plain["logprobs"], plain["top_logprobs"], plain["max_tokens"]) == (True, 20, 128)


def test_the_default_body_is_what_it_always_was_and_logprobs_false_drops_both_fields() -> None:
    client = make_client("http://127.0.0.1:9", extra_body={"thinking": {"type": "disabled"}})
    assert orjson.dumps(client.request_body(messages("Find x."))) == (
        b'{"model":"deepseek-v4-flash","messages":[{"role":"user","content":"Find x.\\n\\nPlease reason step by '
        b'step, and put your final answer within \\\\boxed{}."}],"temperature":0.6,"max_tokens":128,'
        b'"logprobs":true,"top_logprobs":20,"thinking":{"type":"disabled"}}')
    plain = client.request_body(messages(), max_tokens=64, logprobs=False)
    assert list(plain) == ["model", "messages", "temperature", "max_tokens", "thinking"]
    assert plain["max_tokens"] == 64


def test_every_request_carries_its_kind_and_key_headers() -> None:
    seen: list[tuple[str | None, str | None]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append((self.headers.get(SAMPLE_HEADER), self.headers.get(KIND_HEADER)))
            self.send_response(400)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        client = make_client(f"http://127.0.0.1:{server.server_address[1]}")
        for call in (lambda: draw(client, 1),
                     lambda: client.complete_raw(messages(), sample_key="probe/0"),
                     lambda: client.complete_raw(messages(), sample_key="d/1", kind="debate", logprobs=False),
                     lambda: client.sample_with_body(messages(), problem_id="c", sample_id=2,
                                                     keep_top_logprobs=False, kind="critique")):
            with pytest.raises(FatalAPIError):
                call()
    finally:
        server.shutdown()
        server.server_close()
    assert seen == [("p/0", "solve"), ("probe/0", "solve"), ("d/1", "debate"), ("c/2", "critique")]


@pytest.mark.parametrize(("decoding", "changes", "says"), [
    (DecodingConfig(0.6, None, 128, 21), {}, "top_logprobs"),
    (DECODING, {"extra_body": {"temperature": 0.1}}, "extra_body"),
    (DECODING, {"needs_key": True}, "$" + KEY_ENV),
])
def test_bad_settings_are_config_errors(decoding: DecodingConfig, changes: dict, says: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(says)):
        make_client("http://127.0.0.1:9", decoding=decoding, **changes)


def test_sample_with_body_returns_the_raw_response() -> None:
    with sim_server() as server:
        sample, raw = make_client(server.base_url).sample_with_body(
            messages(), problem_id="p", sample_id=0, keep_top_logprobs=True)
    assert raw.body.startswith(b'{"id":') and sample.text.encode()[:20] in raw.body
    assert raw.simulated  # the simulated server says so in a header


def test_resolve_api_key_prefers_the_environment_then_dotenv(tmp_path: Path) -> None:
    model = model_config("http://127.0.0.1:9")
    dotenv = tmp_path / ".env"
    dotenv.write_text(f"# keys\nOTHER=1\nexport {KEY_ENV}=\"sk-from-file\"\n", encoding="utf-8")
    assert resolve_api_key(model, {KEY_ENV: "sk-from-env"}, dotenv) == "sk-from-env"
    assert resolve_api_key(model, {KEY_ENV: " "}, dotenv) == "sk-from-file"
    assert resolve_api_key(model, {}, tmp_path / "missing.env") is None
    assert resolve_api_key(model, {}, None) is None
    assert KEY_ENV not in os.environ  # read, never exported


@pytest.mark.parametrize(("line", "key"), [
    # (a .env line, the key read from it): the forms people write, as python-dotenv reads them
    ("{name}=sk-plain", "sk-plain"),
    ("{name} = 'sk-quoted'  # a comment", "sk-quoted"),
    ("export {name}=\"sk-exported\"", "sk-exported"),
    ("{name}=", None),
    ("# {name}=sk-commented-out", None),
])
def test_a_dotenv_line_gives_the_key_people_expect(tmp_path: Path, line: str, key: str | None) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_text(line.format(name=KEY_ENV) + "\n", encoding="utf-8")
    assert resolve_api_key(model_config("http://127.0.0.1:9"), {}, dotenv) == key


def test_limiter_halves_once_per_burst_and_creeps_back() -> None:
    limiter = AdaptiveLimiter(8)
    with limiter.slot() as first, limiter.slot() as second:
        first.rate_limited()
        second.rate_limited()  # same burst: already answered
    assert limiter.limit == 4
    with limiter.slot() as third:
        third.rate_limited()
    assert limiter.limit == 2 and limiter.lowest == 2
    for _ in range(2):
        with limiter.slot() as slot:
            slot.succeeded()
    assert limiter.limit == 3


def test_limiter_caps_requests_in_flight() -> None:
    limiter = AdaptiveLimiter(3)
    lock = threading.Lock()
    # Each slot waits until two others are held too: this proves three run at once without a sleep,
    # and would hang (then break) if the limiter admitted fewer.
    all_three_in = threading.Barrier(3, timeout=120)
    active, peak = 0, 0

    def work(_: int) -> None:
        nonlocal active, peak
        with limiter.slot():
            with lock:
                active += 1
                peak = max(peak, active)
            all_three_in.wait()
            with lock:
                active -= 1

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(work, range(24)))
    assert peak == 3
