"""The HTTP client for DeepSeek and any OpenAI-compatible server: one request in, one Sample out.

Retried, with jittered backoff (Retry-After honoured, see core.retry): 429, 408, 5xx, timeouts, dropped
connections, truncated or malformed JSON, missing or all-sentinel logprobs. Not retried: 400, 401, 402, 404, 422
and other 4xx, which raise FatalAPIError at once with what to do: ModelNotFoundError when the server
says it lacks model.name, EndpointNotFoundError when a 404 does not mention the model (a wrong path). A quota or
billing refusal (402, OpenAI's 429 insufficient_quota, DeepSeek's "Insufficient Balance") raises QuotaError and
stops the client: no other request is sent, so each call costs at most one request. 429s that do not lift trip
the run's breaker (tracevote.sampling.breaker).
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
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import orjson
import requests
import urllib3

from tracevote.core.config_deepconf import DecodingConfig
from tracevote.core.config_endpoints import ModelConfig, base_urls, require_effort, url_host
from tracevote.core.errors import (
    ConfigError,
    ContextLengthError,
    EndpointError,
    EndpointNotFoundError,
    FatalAPIError,
    ModelNotFoundError,
    QuotaError,
)
from tracevote.core.hosts import forbidden_host, forbidden_resolution, key_hosts, redact_urls, serves
from tracevote.core.limits import check_extra_body
from tracevote.core.retry import (
    Backoff,
    CauseCounter,
    RetryNotice,
    TransientError,
    call_with_retries,
    parse_retry_after,
)
from tracevote.core.simulated import KIND_HEADER, SAMPLE_HEADER, SIMULATED_HEADER, SOLVE
from tracevote.sampling.endpoints import Endpoint, EndpointPolicy, EndpointPool, EndpointSlot
from tracevote.sampling.ingest import Reply, load_json, parse_completion, parse_reply
from tracevote.sampling.reasoning_budget import check_answered
from tracevote.store.records import Sample

T = TypeVar("T")
_RETRIED_STATUS = (408, 429)  # and every 5xx
_DEFAULT_BACKOFF = Backoff()
CONNECT_TIMEOUT_S = 10.0  # a server that takes longer to accept a connection is not there
UNCAPPED = 256  # requests in flight per endpoint when the caller sets no cap (the most pool.concurrency allows)
_QUOTA_WORDS = ("insufficient balance", "insufficient_quota", "exceeded your current quota")
_BILLING_PAGES = {  # host suffix -> where its account is topped up
    "deepseek.com": "https://platform.deepseek.com/top_up",
    "openai.com": "https://platform.openai.com/settings/organization/billing",
}
_UNREACHABLE_HINTS = {
    "connection refused": "is the server running, on that host and port?",
    "name not resolved": "is the host name spelled right, and is there a network?",
    "connect timeout": "a wrong host, a firewall, or no network?",
    "TLS error": "https to a plain-http port, or a proxy with its own certificate?",
    "cannot connect": "is there a route to that host?",
}


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
        _check_settings(model, decoding, api_key)
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
                    self._refuse(response, slot.endpoint)
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
                f"{_UNREACHABLE_HINTS.get(exc.cause, 'is the server up?')}")

    def _post(self, slot: EndpointSlot, payload: bytes, sample_key: str, kind: str) -> RawCompletion:
        started = time.monotonic()
        response = self._send(slot.endpoint.post_url, payload, sample_key, kind)
        slot.reached()
        latency = time.monotonic() - started
        simulated = response.headers.get(SIMULATED_HEADER) == "1"
        return RawCompletion(self._check_response(response, slot.endpoint), latency, simulated)

    def _send(self, url: str, payload: bytes, sample_key: str, kind: str, *,
              stream: bool = False) -> requests.Response:
        headers = {"Content-Type": "application/json", SAMPLE_HEADER: sample_key, KIND_HEADER: kind}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        timeout = (self.connect_timeout_s, self.timeout_s)
        try:
            return self._session().post(url, data=payload, headers=headers, timeout=timeout, stream=stream)
        except requests.exceptions.ConnectTimeout as exc:
            raise self._connect_failure("connect timeout", exc) from None
        except requests.Timeout as exc:
            raise TransientError("timeout", self._redact(str(exc))) from None
        except (requests.exceptions.ChunkedEncodingError, requests.exceptions.ContentDecodingError) as exc:
            raise TransientError("truncated body", self._redact(str(exc))) from None
        except requests.ConnectionError as exc:
            cause = _connect_failure_cause(exc)
            if cause is None:  # connected, then the connection dropped
                raise TransientError("connection", self._redact(str(exc))) from None
            raise self._connect_failure(cause, exc) from None

    def _connect_failure(self, cause: str, exc: Exception) -> TransientError:
        return TransientError(cause, self._redact(_innermost_reason(exc)), unreachable=not self.endpoints.reached_any())

    def _check_response(self, response: requests.Response, endpoint: Endpoint) -> bytes:
        if response.status_code == 200:
            return _complete_body(response)
        self._refuse(response, endpoint)

    def _refuse(self, response: requests.Response, endpoint: Endpoint) -> NoReturn:
        """The error a response other than 200 raises: QuotaError, TransientError, or a FatalAPIError."""
        status = response.status_code
        detail, code = self._redact(_server_message(response)), _error_code(response)
        if _is_quota_error(status, code, detail):
            raise QuotaError(self._quota_message(endpoint, status, detail), status)
        if status in _RETRIED_STATUS or status >= 500:
            raise TransientError(f"HTTP {status}", detail, parse_retry_after(response.headers.get("Retry-After")))
        if _is_context_length(status, code, detail):
            raise ContextLengthError(f"{endpoint.chat_url} (model {self.model.name!r}): HTTP {status}, longer than the "
                                     f"model's context window: {detail}", status,
                                     simulated=response.headers.get(SIMULATED_HEADER) == "1")
        if code == "model_not_found" or _says_no_such_model(detail) or (
                status == 404 and self.model.name in detail):
            raise ModelNotFoundError(self._model_not_found_message(endpoint.chat_url, status, detail), status)
        if status == 404:
            raise EndpointNotFoundError(
                f"the endpoint {endpoint.chat_url} answered 404 ({detail}): check "
                f"endpoints.{self.model.endpoint}.base_url, now "
                f"{endpoint.base_url!r} (OpenAI-compatible servers usually serve /v1/chat/completions, so "
                f"base_url ends in /v1; {_PROVIDERS[self.model.profile.name].base_url_hint})", status)
        raise FatalAPIError(self._fatal_message(endpoint.chat_url, status, detail), status)

    def _model_not_found_message(self, url: str, status: int, detail: str) -> str:
        return (f"{url}: HTTP {status}, model {self.model.name!r} not found: {detail}. Check "
                f"endpoints.{self.model.endpoint}.name in params.yaml "
                f"({_PROVIDERS[self.model.profile.name].model_hint}).")

    def _quota_message(self, endpoint: Endpoint, status: int, detail: str) -> str:
        host = urllib.parse.urlsplit(endpoint.base_url).hostname or ""
        where = next((page for suffix, page in _BILLING_PAGES.items() if host.endswith(suffix)),
                     "the provider's billing page")
        return (f"{endpoint.chat_url} (model {self.model.name!r}): HTTP {status}, out of quota or balance: {detail}. "
                f"No retry brings quota back, so the run stopped at once (every reply received is stored). Top up "
                f"or raise the quota of the account whose key is in ${self.model.api_key_env} ({where}), then run "
                f"the stage again: it requests only what is missing.")

    def _fatal_message(self, url: str, status: int, detail: str) -> str:
        where = f"{url} (model {self.model.name!r})"
        if status == 401:
            return (f"{where}: HTTP 401, authentication failed: {detail}. Check the API key in "
                    f"${self.model.api_key_env} (environment or .env).")
        return (f"{where}: HTTP {status}, the server refused the request: {detail}. Check {self._settings_text()} "
                f"and endpoints.{self.model.endpoint} (extra_body {self.model.extra_body}, profile "
                f"{self.model.profile.name}{self._effort_text()}) in params.yaml.{self._profile_hint(detail)}")

    def _effort_text(self) -> str:
        effort = self.model.reasoning_effort
        return "" if effort is None else f", reasoning_effort {effort}"

    def _settings_text(self) -> str:
        """"grading.critic (temperature 0.0, max_tokens 4096)": the keys this method sets its requests with."""
        values = {"temperature": self.decoding.temperature, "max_tokens": self.decoding.max_tokens}
        if self.settings == "decoding":
            values |= {"top_p": self.decoding.top_p, "top_logprobs": self.decoding.top_logprobs}
        return f"{self.settings} ({', '.join(f'{key} {value}' for key, value in values.items())})"

    def _profile_hint(self, detail: str) -> str:
        """What `profile:` would change: the refusal may come from a profile that is not the server's provider's."""
        key, profile = f"endpoints.{self.model.endpoint}.profile", self.model.profile.name
        reasoning_words = ("max_completion_tokens", "max_tokens", "temperature", "top_p", "logprobs", "reasoning")
        if profile != "openai-reasoning" and any(word in detail.lower() for word in reasoning_words):
            fits = "openai-reasoning (OpenAI's GPT-5 and o-series: max_completion_tokens, the default temperature only)"
        else:
            fits = "the provider's: deepseek, openai-chat, openai-reasoning or local"
        how = (f"is {profile}, as {key} sets it" if self.model.profile_why in ("", "as set")
               else f"{profile} was inferred {self.model.profile_why}")
        return (f" The profile {how}; if the server is another provider's (OpenAI's behind a gateway, say), set "
                f"{key}: {fits}.")

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


@dataclass(frozen=True)
class _Provider:
    """What a refusal's hints say of the provider a profile stands for."""

    base_url_hint: str
    model_hint: str
    billing: str


_OPENAI = _Provider("OpenAI's is https://api.openai.com/v1", "OpenAI lists its models at "
                    "https://platform.openai.com/docs/models", "https://platform.openai.com/settings/organization/billing")
_PROVIDERS = {
    "deepseek": _Provider("DeepSeek's is https://api.deepseek.com",
                          "DeepSeek retired deepseek-chat in favour of deepseek-v4-flash", "https://platform.deepseek.com/top_up"),
    "openai-chat": _OPENAI,
    "openai-reasoning": _OPENAI,
    "local": _Provider("vLLM and SGLang serve http://<host>:<port>/v1",
                       "vLLM serves the name given to --served-model-name, else the model's path", "the server's own"),
    "llama-cpp-python": _Provider("python -m llama_cpp.server serves http://<host>:<port>/v1",
                                  "it serves the name given to --model_alias, else the model's path",
                                  "the server's own"),
}


def _check_settings(model: ModelConfig, decoding: DecodingConfig, api_key: str | None) -> None:
    most = model.profile.max_top_logprobs or 0
    if not 0 <= decoding.top_logprobs <= most:
        raise ConfigError(f"decoding.top_logprobs: {decoding.top_logprobs!r} must be 0-{most} (the most "
                          f"{model.name}, profile {model.profile.name}, returns)")
    if decoding.max_tokens < 1:
        raise ConfigError(f"decoding.max_tokens: {decoding.max_tokens!r} must be >= 1")
    check_extra_body("model", model.extra_body)  # check_params applies the same rule
    require_effort(f"endpoints.{model.endpoint}", model.reasoning_effort, model.profile)
    if model.needs_key and not api_key:
        raise ConfigError(f"endpoints.{model.endpoint}.needs_key is true but ${model.api_key_env} is not set "
                          f"(environment or .env); set it, or set needs_key false for a local server")
    for url in base_urls(model.base_url):
        _check_destination(model, url, api_key)


def _check_destination(model: ModelConfig, url: str, api_key: str | None) -> None:
    """check_params's rules for where a request and its key go, again where they are sent (a ModelConfig made
    in code skips check_params), plus the addresses the host's name resolves to."""
    host = url_host(url)
    where = f"endpoints.{model.endpoint}.base_url"
    if host is None:
        raise ConfigError(f"{where}: {redact_urls(url)!r} must be an http(s) URL with a host")
    reason = forbidden_host(host) or forbidden_resolution(host)
    if reason is not None:
        raise ConfigError(f"{where}: {redact_urls(url)!r} must be a model server, not {reason}; nothing was sent")
    domains = key_hosts(model.api_key_env)
    if api_key and domains and not model.allow_foreign_key and not (
            serves(host, domains) and url.lower().startswith("https://")):
        raise ConfigError(f"{where}: {redact_urls(url)!r} is not an https URL of {' or '.join(domains)}, and "
                          f"${model.api_key_env} is that provider's key; nothing was sent (set "
                          f"endpoints.{model.endpoint}.allow_foreign_key: true for a gateway you trust with it)")


def _is_quota_error(status: int, code: str | None, message: str) -> bool:
    """A quota or billing refusal, which no retry mends: HTTP 402 (DeepSeek's "Insufficient Balance"), OpenAI's
    429 with code insufficient_quota ("You exceeded your current quota"), or those words under another status."""
    lowered = message.lower()
    return (status == 402 or code == "insufficient_quota"
            or any(words in lowered for words in _QUOTA_WORDS))


def _complete_body(response: requests.Response) -> bytes:
    """The body, or TransientError when fewer bytes arrived than Content-Length promised."""
    body = response.content
    promised = response.headers.get("Content-Length")
    if promised and promised.isdigit() and not response.headers.get("Content-Encoding") and len(body) < int(promised):
        raise TransientError("truncated body", f"{len(body)} of {promised} bytes arrived")
    return body


def _error_document(response: requests.Response) -> dict[str, Any]:
    try:
        doc = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _error_code(response: requests.Response) -> str | None:
    """error.code of an OpenAI-style error body ("model_not_found"), else None."""
    error = _error_document(response).get("error")
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) else None


def _server_message(response: requests.Response) -> str:
    """The server's own words: error.message (OpenAI, DeepSeek) or message (vLLM) of a JSON error body;
    "an HTML page" for a proxy's or web server's page; else the start of the body."""
    doc = _error_document(response)
    error = doc.get("error")
    message = error.get("message") if isinstance(error, dict) else error or doc.get("message")
    if isinstance(message, str) and message:
        return message
    if "html" in response.headers.get("Content-Type", "").lower():
        return "an HTML page, not an API's JSON error"
    return " ".join(response.text[:300].split()) or "an empty body"


def _connect_failure_cause(exc: requests.ConnectionError) -> str | None:
    """"connection refused" | "name not resolved" | "TLS error" | "cannot connect" when no connection was
    made; None when one was made and then dropped."""
    if isinstance(exc, requests.exceptions.SSLError):
        return "TLS error"
    reason = getattr(exc.args[0], "reason", None) if exc.args else None
    if isinstance(reason, urllib3.exceptions.NameResolutionError):
        return "name not resolved"
    if isinstance(reason, urllib3.exceptions.NewConnectionError):
        refused = isinstance(reason.__cause__, ConnectionRefusedError) or "refused" in str(reason).lower()
        return "connection refused" if refused else "cannot connect"
    if isinstance(reason, ssl.SSLError):
        return "TLS error"
    return None


def _innermost_reason(exc: Exception) -> str:
    """The wrapped urllib3 reason's own words, without requests' "Max retries exceeded" wrapping."""
    reason = getattr(exc.args[0], "reason", None) if exc.args else None
    return " ".join(str(reason or exc).split())[:200]


def _says_no_such_model(message: str) -> bool:
    """DeepSeek answers an unknown model with 400 "Model Not Exist"; vLLM with 404 "... does not exist"."""
    lowered = message.lower()
    return "model" in lowered and ("not exist" in lowered or "not found" in lowered)


def _is_context_length(status: int, code: object, detail: str) -> bool:
    """OpenAI's code context_length_exceeded (llama.cpp's server copies it); DeepSeek and vLLM say it in words."""
    return status == 400 and (code == "context_length_exceeded" or "maximum context length" in detail)
