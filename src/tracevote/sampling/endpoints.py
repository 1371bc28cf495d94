"""Several servers of one model (vLLM or SGLang replicas): requests spread over them, failing ones set aside.

    endpoints = EndpointPool(("http://gpu1:8000/v1", "http://gpu2:8000/v1"), concurrency=16)
    with endpoints.slot() as slot:        # the endpoint with the most room, waiting while all are full
        ...                               # one request to slot.endpoint.chat_url
        slot.succeeded()                  # or slot.rate_limited(retry_after), slot.failed(cause)

Each endpoint has its own AdaptiveLimiter (`concurrency` requests in flight, halved on a 429), so the
pool's capacity is `concurrency` per endpoint. A request goes to the endpoint with the most room; ties go
to the one chosen least recently, so idle replicas take turns. A retried
request prefers endpoints it has not failed on yet.

An endpoint whose last `set_aside_after` requests failed (connection refused, timeouts, 5xx, malformed
replies; a 429 is the limiter's business, not a failure) is set aside while at least one other endpoint
is in rotation: no request goes to it for `cooldown_s`, then one request at a time tries it. A success
puts it back in rotation; a failure sets it aside again for twice as long, up to `max_cooldown_s`. The
last endpoint in rotation is never set aside: its failures are ordinary retries, as with one server.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass

from tracevote.core.errors import TracevoteError
from tracevote.core.hosts import redact_urls
from tracevote.sampling.breaker import Breaker
from tracevote.sampling.limiter import AdaptiveLimiter, LimiterSlot


@dataclass(frozen=True)
class EndpointPolicy:
    set_aside_after: int = 3  # consecutive failures
    cooldown_s: float = 10.0  # the first time out of rotation; doubled at each failed return
    max_cooldown_s: float = 300.0


class Endpoint:
    """One server: where requests go, how many may be in flight, and how it has fared."""

    def __init__(self, base_url: str, concurrency: int, condition: threading.Condition) -> None:
        self.post_url = f"{base_url.rstrip('/')}/chat/completions"  # where requests go; never shown
        self.base_url = redact_urls(base_url.rstrip("/"))  # what messages and files show: no user:password@
        self.chat_url = f"{self.base_url}/chat/completions"
        self.limiter = AdaptiveLimiter(concurrency, condition=condition)
        self.reached = False  # any HTTP response, of any status, came back
        self.sent = 0  # attempts started
        self.last_chosen = -1  # the pool's count of choices when this endpoint was last chosen
        self.served = 0  # attempts that succeeded
        self.failures: collections.Counter[str] = collections.Counter()  # by cause
        self.times_set_aside = 0
        self.consecutive_failures = 0
        self.set_aside_until: float | None = None  # None: in rotation
        self.set_aside_streak = 0  # failed returns since it was last in rotation: the cooldown doubles with each

    def __repr__(self) -> str:
        return f"Endpoint({self.base_url!r})"

    def render(self) -> str:
        """"http://gpu2:8000/v1: 1,021 served, 14 failed (connection refused 14), set aside 2 times"."""
        failed = sum(self.failures.values())
        causes = ", ".join(f"{cause} {count}" for cause, count in self.failures.most_common())
        line = f"{self.base_url}: {self.served:,} served, {failed:,} failed" + (f" ({causes})" if causes else "")
        if self.times_set_aside:
            line += f", set aside {self.times_set_aside} time{'s' if self.times_set_aside > 1 else ''}"
        return line + (" (still set aside)" if self.set_aside_until is not None else "")


class EndpointPool:
    """The endpoints of one model; see the module docstring for how requests are placed."""

    def __init__(self, base_urls: tuple[str, ...], concurrency: int, policy: EndpointPolicy | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._cond = threading.Condition()
        self.endpoints = tuple(Endpoint(url, concurrency, self._cond) for url in base_urls)
        self.capacity = concurrency * len(self.endpoints)
        self.policy = policy or EndpointPolicy()
        self._clock = clock
        self._choices = 0
        self.breaker = Breaker(len(self.endpoints), clock)  # shared by every request: a sustained outage ends the run

    def __len__(self) -> int:
        return len(self.endpoints)

    def __iter__(self) -> Iterator[Endpoint]:
        return iter(self.endpoints)

    def reached_any(self) -> bool:
        with self._cond:
            return any(endpoint.reached for endpoint in self.endpoints)

    def render(self) -> str:
        with self._cond:
            return "\n".join(f"  {endpoint.render()}" for endpoint in self.endpoints)

    @contextlib.contextmanager
    def slot(self, tried: Collection[Endpoint] = ()) -> Iterator[EndpointSlot]:
        """Room for one request on the best endpoint, preferring those not in `tried`; waits while none has room."""
        with self._cond:
            self.breaker.check()
            while (choice := self._choose(tried)) is None:
                self._cond.wait(self._until_next_return())
                self.breaker.check()
            choice.sent += 1
            choice.last_chosen = self._choices
            self._choices += 1
            slot = EndpointSlot(self, choice, choice.limiter.take(), trial=choice.set_aside_until is not None)
        try:
            yield slot
        finally:
            choice.limiter.release()

    def _choose(self, tried: Collection[Endpoint]) -> Endpoint | None:
        now = self._clock()
        open_now = [endpoint for endpoint in self.endpoints if self._admits(endpoint, now)]
        untried = [endpoint for endpoint in open_now if endpoint not in tried]
        return min(untried or open_now, key=lambda e: (-e.limiter.room, e.last_chosen), default=None)

    @staticmethod
    def _admits(endpoint: Endpoint, now: float) -> bool:
        if endpoint.set_aside_until is None:
            return endpoint.limiter.room > 0
        return now >= endpoint.set_aside_until and endpoint.limiter.in_flight == 0  # one trial at a time

    def _until_next_return(self) -> float | None:
        """Seconds until a set-aside endpoint may be tried again; None: wait for a request to finish."""
        now = self._clock()
        returns = [e.set_aside_until - now for e in self.endpoints
                   if e.set_aside_until is not None and e.set_aside_until > now]
        return min(returns, default=None)

    def record_success(self, endpoint: Endpoint, trial: bool) -> None:
        with self._cond:
            endpoint.served += 1
            endpoint.consecutive_failures = 0
            self.breaker.succeeded()
            if trial:
                endpoint.set_aside_until = None
                endpoint.set_aside_streak = 0
                self._cond.notify_all()

    def record_failure(self, endpoint: Endpoint, cause: str, trial: bool) -> None:
        with self._cond:
            endpoint.failures[cause] += 1
            endpoint.consecutive_failures += 1
            self.breaker.failed(cause)
            if self.breaker.tripped:
                self._cond.notify_all()  # requests waiting for room give up
            in_rotation = endpoint.set_aside_until is None
            too_many = endpoint.consecutive_failures >= self.policy.set_aside_after
            if trial or (in_rotation and too_many and self._others_in_rotation(endpoint)):
                self._set_aside(endpoint)

    def _others_in_rotation(self, endpoint: Endpoint) -> bool:
        return any(other.set_aside_until is None for other in self.endpoints if other is not endpoint)

    def _set_aside(self, endpoint: Endpoint) -> None:
        policy = self.policy
        cooldown = min(policy.max_cooldown_s, policy.cooldown_s * 2 ** endpoint.set_aside_streak)
        endpoint.set_aside_until = self._clock() + cooldown
        endpoint.set_aside_streak += 1
        endpoint.times_set_aside += 1
        self._cond.notify_all()  # waiters recompute when to look again

    def record_rate_limit(self, retry_after: float | None) -> None:
        """A 429: the limiter's to answer, and the breaker's once the limit does not lift."""
        with self._cond:
            self.breaker.rate_limited(retry_after)
            if self.breaker.tripped:
                self._cond.notify_all()  # requests waiting for room give up

    def stop(self, error: Callable[[], TracevoteError]) -> None:
        """No request is sent from now on: each raises `error()` (a refusal no retry can mend, for every call)."""
        with self._cond:
            self.breaker.stop(error)
            self._cond.notify_all()

    def record_reached(self, endpoint: Endpoint) -> None:
        with self._cond:
            endpoint.reached = True


@dataclass(frozen=True)
class EndpointSlot:
    """One request's place on an endpoint; its outcome is reported here. A `trial` is the one request a
    set-aside endpoint gets once its cooldown is over."""

    pool: EndpointPool
    endpoint: Endpoint
    limiter_slot: LimiterSlot
    trial: bool

    def reached(self) -> None:
        """An HTTP response (of any status) came back."""
        self.pool.record_reached(self.endpoint)

    def succeeded(self) -> None:
        self.pool.record_success(self.endpoint, self.trial)
        self.limiter_slot.succeeded()

    def rate_limited(self, retry_after: float | None) -> None:
        self.limiter_slot.rate_limited()
        self.pool.record_rate_limit(retry_after)

    def failed(self, cause: str) -> None:
        self.pool.record_failure(self.endpoint, cause, self.trial)
