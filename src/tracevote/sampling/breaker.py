"""The run's circuit breaker: a sustained outage or a rate limit that never lifts ends the run instead of
retrying every call for hours.

One breaker is shared by every worker and every endpoint of a client. It trips on
  - OUTAGE_ATTEMPTS consecutive failed attempts (at least OUTAGE_ATTEMPTS_PER_ENDPOINT per endpoint) with no
    success in between, over all calls and endpoints; or
  - OUTAGE_SECONDS without a success (since the run started or the last success) while attempts keep failing;
  - a rate limit that does not lift: LONG_LIMIT_ATTEMPTS 429s in a row (at least one per endpoint) whose
    Retry-After is over LONG_RETRY_AFTER_S (the server itself says the limit lasts longer than a run waits), or
    RATE_LIMIT_SECONDS of 429s with no success in between and at least RATE_LIMIT_ATTEMPTS of them in a row
    (any Retry-After, or none);
  - `stop(error)`: a refusal no retry can mend for any call (a quota or billing error), at once.
A 429 is not a failure of the server (it is up, only busy): it counts only for the rate-limit rules, and its
waits follow Retry-After (core.retry). Once tripped, no attempt is sent: the next one raises the breaker's
error, and attempts waiting in backoff wake at once (see `sleep`) and give up.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from tracevote.core.errors import TracevoteError
from tracevote.core.retry import LONG_RETRY_AFTER_S

OUTAGE_ATTEMPTS = 24  # consecutive failed attempts over the whole run
OUTAGE_ATTEMPTS_PER_ENDPOINT = 3  # with many endpoints the count is at least this many per endpoint
OUTAGE_SECONDS = 300.0  # no success for this long while attempts keep failing
LONG_LIMIT_ATTEMPTS = 3  # 429s in a row each asking to wait more than LONG_RETRY_AFTER_S
RATE_LIMIT_ATTEMPTS = 8  # 429s in a row, at least, before RATE_LIMIT_SECONDS of them trip the breaker
RATE_LIMIT_SECONDS = 300.0  # 429s for this long with no success in between


class OutageError(TracevoteError):
    """The breaker tripped: the run stopped sending. The message names the cause, what is stored and how to resume;
    `with_stored` gives the same error counting what the run stored."""

    def __init__(self, cause: str, resume: str, stored: str = "replies received are stored") -> None:
        super().__init__(f"{cause}; the run stopped sending requests ({stored}). {resume}")
        self.cause = cause
        self.resume = resume

    def with_stored(self, count: int, unit: str) -> OutageError:
        """"... (12 samples received by this run are stored) ..."."""
        return OutageError(self.cause, self.resume, f"{count} {unit} received by this run are stored")


@dataclass
class _RateLimit:
    """The 429s since the last success."""

    in_a_row: int = 0
    long_in_a_row: int = 0  # of which the last ones in a row asked to wait more than LONG_RETRY_AFTER_S
    since: float = 0.0  # when the first of them came back
    retry_after: float | None = None  # the last one's Retry-After


class Breaker:
    """Counts failed attempts over a run; `check()` raises OutageError once it has tripped."""

    def __init__(self, n_endpoints: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = max(OUTAGE_ATTEMPTS, OUTAGE_ATTEMPTS_PER_ENDPOINT * n_endpoints)
        self.n_endpoints = n_endpoints
        self._clock = clock
        self._lock = threading.Lock()
        self._tripped = threading.Event()
        self._started = clock()
        self._last_success: float | None = None
        self._streak: collections.Counter[str] = collections.Counter()
        self._limited = _RateLimit()
        self._error: Callable[[], TracevoteError] | None = None

    @property
    def tripped(self) -> bool:
        return self._tripped.is_set()

    def succeeded(self) -> None:
        with self._lock:
            self._last_success = self._clock()
            self._streak.clear()
            self._limited = _RateLimit()

    def in_a_row(self, cause: str) -> int:
        """How many attempts in a row, over the run, failed with `cause` (429s counted apart from failures)."""
        with self._lock:
            return self._limited.in_a_row if cause == "HTTP 429" else sum(self._streak.values())

    def failed(self, cause: str) -> None:
        with self._lock:
            self._streak[cause] += 1
            failures = sum(self._streak.values())
            quiet_s = self._clock() - (self._last_success if self._last_success is not None else self._started)
            quiet_too_long = quiet_s >= OUTAGE_SECONDS and failures >= OUTAGE_ATTEMPTS_PER_ENDPOINT * self.n_endpoints
            if failures >= self.limit or quiet_too_long:
                self._trip(self._outage(failures, quiet_s))

    def rate_limited(self, retry_after: float | None) -> None:
        """A 429 came back, asking to wait `retry_after` seconds (None: it did not say)."""
        with self._lock:
            now = self._clock()
            limited = self._limited
            if limited.in_a_row == 0:
                limited.since = now
            limited.in_a_row += 1
            long_wait = retry_after is not None and retry_after > LONG_RETRY_AFTER_S
            limited.long_in_a_row = limited.long_in_a_row + 1 if long_wait else 0
            limited.retry_after = retry_after
            lasted = now - limited.since
            if (limited.long_in_a_row >= max(LONG_LIMIT_ATTEMPTS, self.n_endpoints)
                    or (lasted >= RATE_LIMIT_SECONDS and limited.in_a_row >= RATE_LIMIT_ATTEMPTS)):
                self._trip(self._rate_limit(lasted))

    def stop(self, error: Callable[[], TracevoteError]) -> None:
        """Stop the run at once: every attempt from now on raises `error()` (a quota or billing refusal)."""
        with self._lock:
            self._trip(error)

    def check(self) -> None:
        """Raise the breaker's error when tripped: no request may be sent."""
        if self._tripped.is_set() and self._error is not None:
            raise self._error()

    def sleep(self, seconds: float) -> None:
        """A backoff wait that ends at once when the breaker trips."""
        self._tripped.wait(seconds)

    def _trip(self, error: Callable[[], TracevoteError]) -> None:
        if not self._tripped.is_set():  # the first cause is the one reported
            self._error = error
            self._tripped.set()

    def message(self) -> str:
        """The tripped breaker's message ("" while it has not tripped)."""
        return str(self._error()) if self._error is not None else ""

    def _outage(self, failures: int, quiet_s: float) -> Callable[[], OutageError]:
        causes = ", ".join(f"{cause} x{count}" for cause, count in self._streak.most_common())
        since = ("no success since the run started" if self._last_success is None
                 else f"no success for {quiet_s:.0f} s")
        cause = f"the server looks down: {causes} on {failures} consecutive attempts over {self._endpoints()}, {since}"
        return lambda: OutageError(cause, "Run the stage again once the server is back: it requests only what is "
                                          "missing")

    def _rate_limit(self, lasted: float) -> Callable[[], OutageError]:
        limited = self._limited
        asks = ("none saying how long to wait (no Retry-After)" if limited.retry_after is None
                else f"the last asking to wait {_duration(limited.retry_after)} (Retry-After: "
                     f"{limited.retry_after:.0f})")
        cause = (f"rate limited: HTTP 429 on {limited.in_a_row} attempts in a row over {self._endpoints()} for "
                 f"{_duration(lasted)}, {asks}, and the limit is not lifting")
        return lambda: OutageError(cause, "Run the stage again once the limit lifts (or with a lower concurrency, "
                                          "or a key with a higher limit): it requests only what is missing")

    def _endpoints(self) -> str:
        return f"{self.n_endpoints} endpoint{'s' if self.n_endpoints > 1 else ''}"


def _duration(seconds: float) -> str:
    """"3 s", "12 min", "24 h"."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.0f} h"
