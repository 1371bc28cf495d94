"""Retry policy shared by every HTTP caller: back off with jitter, honour Retry-After, give up bounded,
and count every failure by its cause.

An endpoint never reached (refused, unresolved, TLS failure, connect timeout before any response) is
given up on sooner than a failure mid-build: Backoff.unreachable_attempts tries, waits of at most
Backoff.unreachable_max_s, so a wrong base_url is reported within seconds rather than minutes.

A Retry-After is honoured up to Backoff.max_s (30 s). One longer than LONG_RETRY_AFTER_S (10 minutes: a daily or
billing-period limit) is not waited out at all: the call retries on the ordinary backoff (0.5 s, growing), only to
confirm the limit holds, and the run's breaker (tracevote.sampling.breaker) stops the run after a few such answers
in a row. Waiting 30 s at a time would only fetch the same answer more slowly.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import tenacity

T = TypeVar("T")
LONG_RETRY_AFTER_S = 600.0  # a Retry-After over this says the limit will not lift within a run's patience


class TransientError(Exception):
    """A failure that may succeed on retry; `cause` is a short label counted in summaries."""

    def __init__(self, cause: str, detail: str = "", retry_after: float | None = None, *,
                 unreachable: bool = False) -> None:
        super().__init__(f"{cause}: {detail}" if detail else cause)
        self.cause = cause
        self.detail = detail
        self.retry_after = retry_after
        self.unreachable = unreachable  # no connection made, and none ever was to any endpoint
        self.where = ""  # the URL that failed, filled in by the client that knows it


@dataclass(frozen=True)
class RetryNotice:
    """One failed attempt about to be retried, for an entry point to show: attempt 3 of 8, then a wait."""

    error: TransientError
    attempt: int
    attempts: int
    wait_s: float
    where: str = ""  # the URL, filled in by the caller that knows it
    in_a_row: int = 0  # failures of this cause in a row over the whole run (the breaker's count), 0: unknown

    def render(self) -> str:
        """"connecting to http://127.0.0.1:9/chat/completions: attempt 2/3 failed (connection refused),
        retrying in 1.3 s"."""
        where = f"connecting to {self.where}" if self.error.unreachable else self.where or "request"
        return (f"{where}: attempt {self.attempt}/{self.attempts} failed ({self.error.cause}), "
                f"retrying in {self.wait_s:.1f} s")

    def waiting(self) -> str:
        """What a progress line shows while the retry waits: "waiting 30 s: HTTP 429, 12 in a row"."""
        return f"waiting {self.wait_s:.0f} s: {self.why()}" if self.wait_s >= 1 else f"retrying: {self.why()}"

    def why(self) -> str:
        """"HTTP 429, 12 in a row, Retry-After 86400 s"; the cause alone when it is a first failure."""
        parts = [self.error.cause]
        if self.in_a_row > 1:
            parts.append(f"{self.in_a_row} in a row")
        if self.error.retry_after is not None and self.error.retry_after > self.wait_s + 0.5:
            parts.append(f"the server asks for {self.error.retry_after:.0f} s")
        return ", ".join(parts)


@dataclass(frozen=True)
class Backoff:
    """Retry pacing: waits grow from `initial_s` up to `max_s`; a sample gives up after `max_elapsed_s`."""

    initial_s: float = 0.5
    max_s: float = 30.0
    max_elapsed_s: float | None = None  # None: (timeout + max_s) per attempt
    unreachable_attempts: int = 3  # tries while the endpoint has never been reached
    unreachable_max_s: float = 2.0  # longest wait between those tries


class CauseCounter:
    """Thread-safe counts by cause: {"HTTP 429": 3, "timeout": 1}."""

    def __init__(self) -> None:
        self._counts: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()

    def add(self, cause: str) -> None:
        with self._lock:
            self._counts[cause] += 1

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self._counts.values())


def parse_retry_after(header: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header: "7" -> 7.0; an HTTP date -> seconds until it."""
    if not header:
        return None
    header = header.strip()
    try:
        return max(0.0, float(header))
    except ValueError:
        pass
    import email.utils  # here, not at the top, as tenacity below

    try:
        when = email.utils.parsedate_to_datetime(header).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def _last_error(retry_state: tenacity.RetryCallState) -> TransientError | None:
    exc = retry_state.outcome.exception() if retry_state.outcome else None
    return exc if isinstance(exc, TransientError) else None


class _WaitRetryAfterOrBackoff:
    """tenacity's `wait`: any callable from the retry state to seconds."""

    def __init__(self, initial_s: float, max_s: float, unreachable_max_s: float) -> None:
        import tenacity

        self.backoff = tenacity.wait_random_exponential(multiplier=initial_s, max=max_s)
        self.max_s = max_s
        self.unreachable_max_s = unreachable_max_s

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        exc = _last_error(retry_state)
        if exc is not None and exc.retry_after is not None and exc.retry_after <= LONG_RETRY_AFTER_S:
            return min(exc.retry_after, self.max_s)
        if exc is not None and exc.unreachable:
            return min(self.backoff(retry_state), self.unreachable_max_s)
        return self.backoff(retry_state)


def attempts_for(exc: TransientError, attempts: int, unreachable_attempts: int) -> int:
    """How many tries this failure gets: fewer while the endpoint has never been reached."""
    return min(attempts, unreachable_attempts) if exc.unreachable else attempts


def call_with_retries(
    call: Callable[[], T],
    *,
    attempts: int,
    max_elapsed_s: float,
    backoff: Backoff | None = None,
    on_retry: Callable[[RetryNotice], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Run `call`, retrying TransientError; re-raise the last one once attempts or time run out.

    Waits follow `backoff` (its max_elapsed_s is the caller's to turn into `max_elapsed_s`); a failure
    marked `unreachable` gets only `backoff.unreachable_attempts` tries. `sleep` waits between attempts (a
    caller's may end early, e.g. when a circuit breaker trips).
    """

    # here, not at the top: this module's errors and notices are imported by every stage that may call out (fetch,
    # the paid stages), most of which find nothing to send and never retry
    import tenacity

    backoff = backoff or Backoff()

    def allowed(state: tenacity.RetryCallState) -> int:
        exc = _last_error(state)
        return attempts if exc is None else attempts_for(exc, attempts, backoff.unreachable_attempts)

    def before_sleep(state: tenacity.RetryCallState) -> None:
        exc = _last_error(state)
        if on_retry is not None and exc is not None:
            wait_s = state.next_action.sleep if state.next_action else 0.0
            on_retry(RetryNotice(exc, state.attempt_number, allowed(state), wait_s))

    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception_type(TransientError),
        stop=tenacity.stop_after_delay(max_elapsed_s) | (lambda state: state.attempt_number >= allowed(state)),
        wait=_WaitRetryAfterOrBackoff(backoff.initial_s, backoff.max_s, backoff.unreachable_max_s),
        before_sleep=before_sleep,
        sleep=sleep,
        reraise=True,
    )
    return retrying(call)
