"""Rate limits and quota, through the real client against loopback servers: a 429 that never lifts ends the run
within a bounded number of requests, a quota or billing refusal stops it at the first request of each call."""

from __future__ import annotations

import collections
import contextlib
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson
import pytest

from tracevote.core.config_deepconf import DecodingConfig
from tracevote.core.config_endpoints import ModelConfig, SimConfig
from tracevote.core.errors import QuotaError
from tracevote.core.retry import Backoff, RetryNotice, TransientError
from tracevote.core.simulated import SAMPLE_HEADER
from tracevote.sampling.breaker import LONG_LIMIT_ATTEMPTS, OutageError
from tracevote.sampling.client import ChatClient

DECODING = DecodingConfig(temperature=0.6, top_p=None, max_tokens=128, top_logprobs=20)
KEY_ENV = "TRACEVOTE_TEST_KEY"
N_CALLS = 16
SIM = SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=60)

# what each provider answers when the account is out of money or quota
OPENAI_QUOTA = (429, {"error": {"message": "You exceeded your current quota, please check your plan and billing "
                                           "details.", "type": "insufficient_quota", "param": None,
                                "code": "insufficient_quota"}}, {})
DEEPSEEK_BALANCE = (402, {"error": {"message": "Insufficient Balance", "type": "unknown_error", "param": None,
                                    "code": "invalid_request_error"}}, {})
BALANCE_AS_400 = (400, {"error": {"message": "Insufficient Balance", "type": "invalid_request_error"}}, {})
DAILY_LIMIT = (429, {"error": {"message": "Rate limit reached for requests per day", "type": "requests",
                               "code": "rate_limit_exceeded"}}, {"Retry-After": "86400"})


class CountingServer(ThreadingHTTPServer):
    """Answers every POST with one canned response and counts the requests by call key."""

    def __init__(self, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
        super().__init__(("127.0.0.1", 0), _CannedHandler)
        self.status, self.body, self.extra_headers = status, orjson.dumps(body), headers
        self.by_key: collections.Counter[str] = collections.Counter()
        self.lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _CannedHandler(BaseHTTPRequestHandler):
    server: CountingServer

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with self.server.lock:
            self.server.by_key[self.headers.get(SAMPLE_HEADER, "")] += 1
        self.send_response(self.server.status)
        for name, value in {"Content-Type": "application/json", **self.server.extra_headers}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(self.server.body)))
        self.end_headers()
        self.wfile.write(self.server.body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def counting_server(status: int, body: dict[str, Any], headers: dict[str, str]) -> Iterator[CountingServer]:
    server = CountingServer(status, body, headers)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def client_for(base_url: str, **settings: Any) -> ChatClient:
    """The client every paid stage uses, with the default backoff (waits start at 0.5 s, at most 30 s) and the
    retries params.yaml sets by default."""
    model = ModelConfig(backend="openai", base_url=base_url, name="deepseek-v4-flash", extra_body={},
                        api_key_env=KEY_ENV, needs_key=False, sim=SIM)
    return ChatClient(model, DECODING, api_key=None, timeout_s=5.0, max_retries=8, backoff=Backoff(), **settings)


def reply(client: ChatClient, key: str) -> object:
    return client.reply([{"role": "user", "content": "Find x."}], call_key=key, kind="solve")


def outcomes(client: ChatClient, n_calls: int) -> list[BaseException | None]:
    """Each of `n_calls` calls made at once, `n_calls` in flight: the error each ended in (None: it succeeded)."""
    def one(i: int) -> BaseException | None:
        try:
            reply(client, f"item-{i}/c0")
        except Exception as exc:  # what each call ended in is the result under test
            return exc
        return None

    with ThreadPoolExecutor(n_calls) as pool:
        return list(pool.map(one, range(n_calls)))


@pytest.mark.parametrize("refusal", [OPENAI_QUOTA, DEEPSEEK_BALANCE, BALANCE_AS_400],
                         ids=["openai insufficient_quota 429", "deepseek 402", "balance as 400"])
def test_a_quota_or_billing_refusal_costs_at_most_one_request_per_call_and_stops_every_call(refusal: tuple) -> None:
    with counting_server(*refusal) as server:
        client = client_for(server.base_url)
        ended = outcomes(client, N_CALLS)
        by_key = dict(server.by_key)
    assert all(isinstance(error, QuotaError) for error in ended), ended
    assert by_key and max(by_key.values()) == 1, by_key  # no call was sent twice; those after the first, not at all
    message = str(ended[0])
    assert f"HTTP {refusal[0]}, out of quota or balance" in message and "run stopped at once" in message
    assert f"${KEY_ENV}" in message and "run the stage again" in message


def test_a_sequential_call_meets_the_quota_once_and_later_calls_send_nothing() -> None:
    with counting_server(*OPENAI_QUOTA) as server:
        client = client_for(server.base_url)
        for key in ("a/c0", "b/c0"):
            with pytest.raises(QuotaError):
                reply(client, key)
        by_key = dict(server.by_key)
    assert by_key == {"a/c0": 1}


def test_a_429_that_asks_for_a_day_ends_the_run_within_a_bounded_number_of_requests() -> None:
    notices: list[RetryNotice] = []
    with counting_server(*DAILY_LIMIT) as server:
        client = client_for(server.base_url, concurrency=1, on_retry=notices.append)
        with pytest.raises(OutageError) as caught:
            reply(client, "a/c0")
        with pytest.raises(OutageError):
            reply(client, "b/c0")  # the breaker has tripped: nothing more is sent
        sent = sum(server.by_key.values())
    assert sent == LONG_LIMIT_ATTEMPTS
    # a Retry-After of a day is not waited out (nor capped at 30 s): short backoff waits, then the breaker
    assert [notice.wait_s < 1.5 for notice in notices] == [True] * (LONG_LIMIT_ATTEMPTS - 1)
    assert notices[-1].waiting().endswith(f"HTTP 429, {LONG_LIMIT_ATTEMPTS - 1} in a row, the server asks for 86400 s")
    line = str(caught.value)
    assert line.startswith(f"rate limited: HTTP 429 on {LONG_LIMIT_ATTEMPTS} attempts in a row over 1 endpoint for ")
    assert "the last asking to wait 24 h (Retry-After: 86400)" in line and "replies received are stored" in line
    assert "Run the stage again once the limit lifts" in line and "\n" not in line


def test_with_many_calls_in_flight_a_day_long_429_stops_every_call_in_one_wave() -> None:
    with counting_server(*DAILY_LIMIT) as server:
        ended = outcomes(client_for(server.base_url), N_CALLS)
        by_key = dict(server.by_key)
    assert all(isinstance(error, OutageError) for error in ended), ended
    assert max(by_key.values()) <= LONG_LIMIT_ATTEMPTS and sum(by_key.values()) <= N_CALLS + LONG_LIMIT_ATTEMPTS


@pytest.mark.parametrize(("error", "wait_s", "in_a_row", "shown"), [
    (TransientError("HTTP 429", "", 30.0), 30.0, 12, "waiting 30 s: HTTP 429, 12 in a row"),
    (TransientError("HTTP 429", "", 86400.0), 0.4, 2, "retrying: HTTP 429, 2 in a row, the server asks for 86400 s"),
    (TransientError("HTTP 503"), 7.6, 1, "waiting 8 s: HTTP 503"),
])
def test_the_progress_line_says_why_a_retry_waits(error: TransientError, wait_s: float, in_a_row: int,
                                                  shown: str) -> None:
    assert RetryNotice(error, attempt=2, attempts=9, wait_s=wait_s, in_a_row=in_a_row).waiting() == shown
