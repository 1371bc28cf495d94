"""The HTTP client for DeepSeek and any OpenAI-compatible server: one request in, one Sample out.

Retried, with jittered backoff (Retry-After honoured, see core.retry): 429, 408, 5xx, timeouts, dropped
connections, truncated or malformed JSON, missing or all-sentinel logprobs. Not retried: 400, 401, 402, 404, 422
and other 4xx, which raise at once with what to do (sampling.refusals says which error each is). A quota or
billing refusal raises QuotaError and stops the client: no other request is sent, so each call costs at most one
request. 429s that do not lift trip the run's breaker (tracevote.sampling.breaker). The settings a request could
not succeed with are refused before anything is sent (sampling.client_settings).
When retries run out, the last TransientError propagates; its `cause` is the label counted in
`retries` and `failures`. While no endpoint has ever been reached (refused, unresolved, TLS failure,
connect timeout), a request gets only Backoff.unreachable_attempts tries (at least one per endpoint),
then raises EndpointError naming the URLs and the cause.

`model.base_url` may list several servers of the same model: each attempt goes to one of them, placed
by tracevote.sampling.endpoints (`concurrency` requests in flight per endpoint, a retry prefers another
endpoint, an endpoint that keeps failing is set aside for a while).
Each retry is reported to `on_retry`, for the entry point to show. The API key is never part of a
message, a repr or a file.

Every request carries two headers real servers ignore: X-Tracevote-Sample (the call key, which seeds the
simulated model's response) and X-Tracevote-Kind (the kind of call the prompt builder names, "solve" by
default, by which the simulated model knows what to answer).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson
import requests

from tracevote.core.config_deepconf import DecodingConfig
from tracevote.core.config_endpoints import ModelConfig, base_urls
from tracevote.core.errors import (
    ConfigError,
    EndpointError,
    QuotaError,
)
from tracevote.core.hosts import redact_urls
from tracevote.core.retry import (
    Backoff,
    CauseCounter,
    RetryNotice,
    TransientError,
    call_with_retries,
)
from tracevote.core.simulated import KIND_HEADER, SAMPLE_HEADER, SIMULATED_HEADER, SOLVE
from tracevote.sampling.client_settings import check_settings
from tracevote.sampling.connect_failures import UNREACHABLE_HINTS, connect_failure_cause, innermost_reason
from tracevote.sampling.endpoints import Endpoint, EndpointPolicy, EndpointPool, EndpointSlot
from tracevote.sampling.ingest import Reply, load_json, parse_completion, parse_reply
from tracevote.sampling.reasoning_budget import check_answered
from tracevote.sampling.refusals import Refusals
from tracevote.store.records import Sample

T = TypeVar("T")
_DEFAULT_BACKOFF = Backoff()
CONNECT_TIMEOUT_S = 10.0  # a server that takes longer to accept a connection is not there
UNCAPPED = 256  # requests in flight per endpoint when the caller sets no cap (the most pool.concurrency allows)
# a reply is read in pieces this large: requests' own (10 KiB, what `.content` reads) cost ~2 ms of CPU per MB of
# body on loopback, most of a simulated build's transport (docs/simulator.md)
BODY_PIECE_BYTES = 1 << 20


class StreamBroken(Exception):
    """A streamed reply that failed after part of it reached the caller's observer: not retried (a retry would
    hand the observer the same trace again from its start). `received` is what arrived (billed by the server);
    `cause` is the label the endpoint's failure count gets."""

    def __init__(self, cause: str, detail: str, received: object) -> None:
        super().__init__(f"{cause}: {detail}" if detail else cause)
        self.cause = cause
        self.detail = detail
        self.received = received


@dataclass(frozen=True)
class RawCompletion:
    body: bytes
    latency_s: float
    simulated: bool = False  # the server said it is tracevote's simulated model (SIMULATED_HEADER)



def request_seed(seed: int, sample_key: str) -> int:
    """decoding.seed mixed with a trace's "<problem>/<sample>" key: a different, repeatable seed per trace (31 bits,
    which every engine's seed field holds).

    >>> request_seed(0, "aime-00/3") == request_seed(0, "aime-00/3") != request_seed(0, "aime-00/4")
    True
    """
    digest = hashlib.blake2b(f"{seed}\x00{sample_key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & 0x7FFFFFFF

class ChatClient:
    """Samples traces from `POST {model.base_url}/chat/completions` with logprobs and top-k; `concurrency`
    caps the requests in flight on each endpoint (halved on a 429, see AdaptiveLimiter)."""

    def __init__(self, model: ModelConfig, decoding: DecodingConfig, *, api_key: str | None, timeout_s: float,
                 max_retries: int, concurrency: int = UNCAPPED, backoff: Backoff = _DEFAULT_BACKOFF,
                 connect_timeout_s: float = CONNECT_TIMEOUT_S, endpoint_policy: EndpointPolicy | None = None,
                 on_retry: Callable[[RetryNotice], None] | None = None, settings: str = "decoding") -> None:
        check_settings(model, decoding, api_key)
        self.model = model
        self.decoding = decoding
        self.settings = settings  # the params.yaml section `decoding` comes from, for the hints of a refusal
        self.timeout_s = timeout_s
        self.connect_timeout_s = min(connect_timeout_s, timeout_s)
        self.on_retry = on_retry
        self.max_retries = max_retries
        self.endpoints = EndpointPool(base_urls(model.base_url), concurrency, endpoint_policy)
        self.backoff = dataclasses.replace(
            backoff, unreachable_attempts=max(backoff.unreachable_attempts, len(self.endpoints)))
        self.retries = CauseCounter()  # each retried failure, by cause
        self.failures = CauseCounter()  # each sample given up on, by the cause of its last failure
        self._api_key = api_key
        self._refusals = Refusals(model, decoding, settings, self._redact)
        self._local = threading.local()
        self._sessions: list[requests.Session] = []
        self._sessions_lock = threading.Lock()

    @property
    def url(self) -> str:
        """The chat completions URL, or the endpoints' URLs joined by ", "."""
        return ", ".join(endpoint.chat_url for endpoint in self.endpoints)

    @property
    def capacity(self) -> int:
        """The most requests in flight over all endpoints: what a caller's worker pool should hold."""
        return self.endpoints.capacity

    def __repr__(self) -> str:
        key = "set" if self._api_key else "none"
        return f"ChatClient(model={self.model.name!r}, url={self.url!r}, api_key={key})"

    def request_body(self, messages: list[dict[str, str]], *, max_tokens: int | None = None,
                     logprobs: bool = True, extra: dict[str, Any] | None = None,
                     sample_key: str | None = None) -> dict[str, Any]:
        """The JSON body sent, shaped by the endpoint's profile: the token limit in its field, temperature and
        top_p (when set) and a seed (decoding.seed mixed with `sample_key`) only where sampling parameters are
        accepted, logprobs and top_logprobs when `logprobs` (a profile without logprobs refuses that), the endpoint's
        reasoning_effort when set, then `extra` (response_format) and model.extra_body."""
        profile = self.model.profile
        body: dict[str, Any] = {"model": self.model.name, "messages": messages}
        if profile.sampling_parameters:
            body["temperature"] = self.decoding.temperature
        body[profile.token_limit_field] = max_tokens or self.decoding.max_tokens
        if logprobs:
            if not profile.logprobs:
                raise ConfigError(f"endpoint {self.model.endpoint} ({self.model.name}, profile {profile.name}) "
                                  f"returns no logprobs; a call that needs them cannot be sent to it")
            body["logprobs"] = True
            body["top_logprobs"] = self.decoding.top_logprobs
        if profile.sampling_parameters and self.decoding.top_p is not None:
            body["top_p"] = self.decoding.top_p
        if profile.sampling_parameters and self.decoding.seed is not None and sample_key is not None:
            body["seed"] = request_seed(self.decoding.seed, sample_key)
        if self.model.reasoning_effort is not None:
            body["reasoning_effort"] = self.model.reasoning_effort
        return {**body, **(extra or {}), **self.model.extra_body}

    def sample(self, messages: list[dict[str, str]], *, problem_id: str, sample_id: int,
               keep_top_logprobs: bool, keep_top_tokens: bool = False) -> Sample:
        return self.sample_with_body(messages, problem_id=problem_id, sample_id=sample_id,
                                     keep_top_logprobs=keep_top_logprobs, keep_top_tokens=keep_top_tokens)[0]

    def sample_with_body(self, messages: list[dict[str, str]], *, problem_id: str, sample_id: int,
                         keep_top_logprobs: bool, keep_top_tokens: bool = False,
                         kind: str = SOLVE) -> tuple[Sample, RawCompletion]:
        """The sample and the raw response it was parsed from (its body for pools that keep raw responses,
        and whether the simulator answered). `kind` is sent in the X-Tracevote-Kind header."""
        def parse(raw: RawCompletion) -> tuple[Sample, RawCompletion]:
            sample = parse_completion(
                raw.body, problem_id=problem_id, sample_id=sample_id, latency_s=raw.latency_s,
                keep_top_logprobs=keep_top_logprobs, expect_top_logprobs=self.decoding.top_logprobs,
                keep_top_tokens=keep_top_tokens)
            return sample, raw

        key = f"{problem_id}/{sample_id}"
        return self.post(orjson.dumps(self.request_body(messages, sample_key=key)), key, kind, parse)

    def complete_raw(self, messages: list[dict[str, str]], *, sample_key: str, max_tokens: int | None = None,
                     kind: str = SOLVE, logprobs: bool = True) -> RawCompletion:
        """One response body, retried only for transport and HTTP failures and unparseable JSON. `kind` is
        sent in the X-Tracevote-Kind header; `logprobs` False asks for none (the body has "logprobs": null)."""
        def parse(raw: RawCompletion) -> RawCompletion:
            load_json(raw.body)
            return raw

        payload = orjson.dumps(self.request_body(messages, max_tokens=max_tokens, logprobs=logprobs))
        return self.post(payload, sample_key, kind, parse)

    def reply(self, messages: list[dict[str, str]], *, call_key: str, kind: str, max_tokens: int | None = None,
              extra: dict[str, Any] | None = None) -> tuple[Reply, float]:
        """A text-only call (no logprobs asked for) and its latency; a response without usage or cut short by
        the server is retried like a malformed one. `extra` adds request fields (a critic's response_format). A
        reply whose whole budget went to hidden reasoning is a ReasoningBudgetError (sampling.reasoning_budget)."""
        def parse(raw: RawCompletion) -> tuple[Reply, float]:
            reply = parse_reply(raw.body)
            if raw.simulated and not reply.simulated:
                reply = dataclasses.replace(reply, simulated=True)
            return reply, raw.latency_s

        payload = orjson.dumps(self.request_body(messages, max_tokens=max_tokens, logprobs=False, extra=extra))
        answered = self.post(payload, call_key, kind, parse)  # the server answered: its slot counts a success
        check_answered(answered[0], self.model, budget=max_tokens or self.decoding.max_tokens, settings=self.settings,
                       call_key=call_key)
        return answered

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close every thread's connection pool."""
        with self._sessions_lock:
            for session in self._sessions:
                session.close()
            self._sessions.clear()

    def call_streamed(self, payload: bytes, sample_key: str, kind: str,
                      read: Callable[[requests.Response, float], T]) -> T:
        """POST `payload` as a streamed request and hand the open 200 response and its start time (monotonic) to
        `read`; retried as every call (a refusal raises at once), and the response closed when `read` returns or
        raises, which closes the connection if the body was not read to its end (the server sees the client go)."""
        def exchange(slot: EndpointSlot) -> T:
            started = time.monotonic()
            response = self._send(slot.endpoint.post_url, payload, sample_key, kind, stream=True)
            slot.reached()
            with contextlib.closing(response):
                if response.status_code != 200:
                    self._refusals.refuse(response, slot.endpoint)
                try:
                    return read(response, started)
                except StreamBroken as broken:
                    slot.failed(broken.cause)
                    raise

        return self._attempts(exchange)

    def post(self, payload: bytes, sample_key: str, kind: str, parse: Callable[[RawCompletion], T], *,
             retries: int | None = None) -> T:
        """POST `payload` and `parse` the body, retried as every call (a TransientError from `parse` too), at most
        `retries` times when given (else max_retries)."""
        return self._attempts(lambda slot: parse(self._post(slot, payload, sample_key, kind)), retries)

    def _attempts(self, exchange: Callable[[EndpointSlot], T], retries: int | None = None) -> T:
        """`exchange` on an endpoint slot, retrying transient failures, each attempt on an endpoint of its own
        choosing (one this call has not failed on, while there is one)."""
        failed_on: list[Endpoint] = []

        def attempt() -> T:
            with self.endpoints.slot(failed_on) as slot:
                try:
                    result = exchange(slot)
                except TransientError as exc:
                    exc.where = slot.endpoint.chat_url
                    failed_on.append(slot.endpoint)
                    if exc.cause == "HTTP 429":  # a rate limit: the limiter's to answer, not a failing server
                        slot.rate_limited(exc.retry_after)
                    else:
                        slot.failed(exc.cause)
                    raise
                except QuotaError as refused:
                    self.endpoints.stop(functools.partial(QuotaError, str(refused), refused.status))  # none is sent
                    raise
                slot.succeeded()
                return result

        return self._with_retries(attempt, retries)

    def _with_retries(self, attempt: Callable[[], T], retries: int | None = None) -> T:
        max_elapsed = self.backoff.max_elapsed_s
        if max_elapsed is None:
            max_elapsed = (self.timeout_s + self.backoff.max_s) * (self.max_retries + 1)
        tries = [1]

        def retried(notice: RetryNotice) -> None:
            if self.endpoints.breaker.tripped:
                return  # no retry follows: the next attempt raises the breaker's error before sending
            tries[0] += 1
            self.retries.add(notice.error.cause)
            if self.on_retry is not None:
                in_a_row = self.endpoints.breaker.in_a_row(notice.error.cause)
                self.on_retry(dataclasses.replace(notice, where=notice.error.where, in_a_row=in_a_row))

        try:
            return call_with_retries(attempt, attempts=(self.max_retries if retries is None else retries) + 1,
                                     max_elapsed_s=max_elapsed,
                                     backoff=self.backoff, on_retry=retried, sleep=self.endpoints.breaker.sleep)
        except TransientError as exc:
            self.failures.add(exc.cause)
            if exc.unreachable and not self.endpoints.reached_any():
                raise EndpointError(self._unreachable_message(exc, tries[0])) from None
            raise

    def _unreachable_message(self, exc: TransientError, tries: int) -> str:
        detail = f" ({exc.detail})" if exc.cause == "TLS error" and exc.detail else ""
        where = self.url if len(self.endpoints) == 1 else f"any of {self.url}"
        return (f"cannot connect to {where}: {exc.cause}{detail} (gave up after {tries} "
                f"attempt{'s' if tries > 1 else ''}). Check endpoints.{self.model.endpoint}.base_url in params.yaml: "
                f"{UNREACHABLE_HINTS.get(exc.cause, 'is the server up?')}")

    def _post(self, slot: EndpointSlot, payload: bytes, sample_key: str, kind: str) -> RawCompletion:
        started = time.monotonic()
        response = self._send(slot.endpoint.post_url, payload, sample_key, kind, stream=True)
        with contextlib.closing(response), self._transport_errors():  # a body cut short drops its connection
            ok = response.status_code == 200
            body = b"".join(response.iter_content(BODY_PIECE_BYTES)) if ok else response.content
        slot.reached()
        latency = time.monotonic() - started
        simulated = response.headers.get(SIMULATED_HEADER) == "1"
        return RawCompletion(self._check_response(response, body, slot.endpoint), latency, simulated)

    def _send(self, url: str, payload: bytes, sample_key: str, kind: str, *,
              stream: bool = False) -> requests.Response:
        headers = {"Content-Type": "application/json", SAMPLE_HEADER: sample_key, KIND_HEADER: kind}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        timeout = (self.connect_timeout_s, self.timeout_s)
        with self._transport_errors():
            return self._session().post(url, data=payload, headers=headers, timeout=timeout, stream=stream)

    @contextlib.contextmanager
    def _transport_errors(self) -> Iterator[None]:
        """requests' errors of sending a request or reading its body, as the TransientError each is."""
        try:
            yield
        except requests.exceptions.ConnectTimeout as exc:
            raise self._connect_failure("connect timeout", exc) from None
        except requests.Timeout as exc:
            raise TransientError("timeout", self._redact(str(exc))) from None
        except (requests.exceptions.ChunkedEncodingError, requests.exceptions.ContentDecodingError) as exc:
            raise TransientError("truncated body", self._redact(str(exc))) from None
        except requests.ConnectionError as exc:
            cause = connect_failure_cause(exc)
            if cause is None:  # connected, then the connection dropped
                raise TransientError("connection", self._redact(str(exc))) from None
            raise self._connect_failure(cause, exc) from None

    def _connect_failure(self, cause: str, exc: Exception) -> TransientError:
        return TransientError(cause, self._redact(innermost_reason(exc)), unreachable=not self.endpoints.reached_any())

    def _check_response(self, response: requests.Response, body: bytes, endpoint: Endpoint) -> bytes:
        if response.status_code == 200:
            return _complete_body(response, body)
        self._refusals.refuse(response, endpoint)

    def redact(self, text: str) -> str:
        """`text` with the API key and URL credentials blanked, for a message."""
        return self._redact(text)

    def _redact(self, text: str) -> str:
        return redact_urls(text.replace(self._api_key, "***") if self._api_key else text)

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = requests.Session()
            self._local.session = session
            with self._sessions_lock:
                self._sessions.append(session)
        return session


def _complete_body(response: requests.Response, body: bytes) -> bytes:
    """The body, or TransientError when fewer bytes arrived than Content-Length promised."""
    promised = response.headers.get("Content-Length")
    if promised and promised.isdigit() and not response.headers.get("Content-Encoding") and len(body) < int(promised):
        raise TransientError("truncated body", f"{len(body)} of {promised} bytes arrived")
    return body
