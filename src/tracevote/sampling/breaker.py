"""The run's circuit breaker: a sustained outage ends the run instead of retrying every call for hours.

One breaker is shared by every worker and every endpoint of a client. It trips on either
  - OUTAGE_ATTEMPTS consecutive failed attempts (at least OUTAGE_ATTEMPTS_PER_ENDPOINT per endpoint) with no
    success in between, over all calls and endpoints; or
  - OUTAGE_SECONDS without a success (since the run started or the last success) while attempts keep failing.
A 429 is the rate limiter's to answer and counts for neither. Once tripped, no attempt is sent: the next one
raises OutageError, and attempts waiting in backoff wake at once (see `sleep`) and give up.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable

from tracevote.core.errors import TracevoteError

OUTAGE_ATTEMPTS = 24  # consecutive failed attempts over the whole run
OUTAGE_ATTEMPTS_PER_ENDPOINT = 3  # with many endpoints the count is at least this many per endpoint
OUTAGE_SECONDS = 300.0  # no success for this long while attempts keep failing


class OutageError(TracevoteError):
    """The breaker tripped: the run stopped sending (the message names the cause)."""


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
        self._cause = ""

    @property
    def tripped(self) -> bool:
        return self._tripped.is_set()

    def succeeded(self) -> None:
        with self._lock:
            self._last_success = self._clock()
            self._streak.clear()

    def failed(self, cause: str) -> None:
        with self._lock:
            self._streak[cause] += 1
            failures = sum(self._streak.values())
            quiet_s = self._clock() - (self._last_success if self._last_success is not None else self._started)
            quiet_too_long = quiet_s >= OUTAGE_SECONDS and failures >= OUTAGE_ATTEMPTS_PER_ENDPOINT * self.n_endpoints
            if not self._tripped.is_set() and (failures >= self.limit or quiet_too_long):
                self._cause = self._describe(failures, quiet_s)
                self._tripped.set()

    def check(self) -> None:
        """Raise OutageError when tripped: no request may be sent."""
        if self._tripped.is_set():
            raise OutageError(self.message())

    def sleep(self, seconds: float) -> None:
        """A backoff wait that ends at once when the breaker trips."""
        self._tripped.wait(seconds)

    def message(self) -> str:
        return (f"the server looks down: {self._cause}; the run stopped sending requests (replies received are "
                f"stored). Run the stage again once the server is back: it requests only what is missing")

    def _describe(self, failures: int, quiet_s: float) -> str:
        causes = ", ".join(f"{cause} x{count}" for cause, count in self._streak.most_common())
        endpoints = f"{self.n_endpoints} endpoint{'s' if self.n_endpoints > 1 else ''}"
        since = ("no success since the run started" if self._last_success is None
                 else f"no success for {quiet_s:.0f} s")
        return f"{causes} on {failures} consecutive attempts over {endpoints}, {since}"
