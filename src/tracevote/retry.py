"""Retry policy shared by every HTTP caller: back off with jitter, honour Retry-After, give up bounded,
and count every failure by its cause."""

from __future__ import annotations

import collections
import email.utils
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import tenacity

T = TypeVar("T")


class TransientError(Exception):
    """A failure that may succeed on retry; `cause` is a short label counted in summaries."""

    def __init__(self, cause: str, detail: str = "", retry_after: float | None = None) -> None:
        super().__init__(f"{cause}: {detail}" if detail else cause)
        self.cause = cause
        self.retry_after = retry_after


@dataclass(frozen=True)
class Backoff:
    """Retry pacing: waits grow from `initial_s` up to `max_s`; a sample gives up after `max_elapsed_s`."""

    initial_s: float = 0.5
    max_s: float = 30.0
    max_elapsed_s: float | None = None  # None: (timeout + max_s) per attempt


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
    try:
        when = email.utils.parsedate_to_datetime(header).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


class _WaitRetryAfterOrBackoff(tenacity.wait.wait_base):
    def __init__(self, initial_s: float, max_s: float) -> None:
        self.backoff = tenacity.wait_random_exponential(multiplier=initial_s, max=max_s)
        self.max_s = max_s

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        if isinstance(exc, TransientError) and exc.retry_after is not None:
            return min(exc.retry_after, self.max_s)
        return self.backoff(retry_state)


def call_with_retries(
    call: Callable[[], T],
    *,
    attempts: int,
    max_elapsed_s: float,
    initial_backoff_s: float = 0.5,
    max_backoff_s: float = 30.0,
    on_retry: Callable[[TransientError], None] | None = None,
) -> T:
    """Run `call`, retrying TransientError; re-raise the last one once attempts or time run out."""

    def before_sleep(state: tenacity.RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        if on_retry is not None and isinstance(exc, TransientError):
            on_retry(exc)

    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception_type(TransientError),
        stop=tenacity.stop_after_attempt(attempts) | tenacity.stop_after_delay(max_elapsed_s),
        wait=_WaitRetryAfterOrBackoff(initial_backoff_s, max_backoff_s),
        before_sleep=before_sleep,
        reraise=True,
    )
    return retrying(call)
