"""Concurrency that adapts to rate limits: fewer requests in flight after a 429, more after successes.

    limiter = AdaptiveLimiter(8)
    with limiter.slot() as slot:       # waits while 8 requests are in flight
        ...                            # one request
        slot.rate_limited()            # on a 429: the cap drops to 4
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from tracevote.core.errors import ConfigError


class AdaptiveLimiter:
    """Caps requests in flight: halves the cap on a 429, adds one after a cap's worth of successes.

    Several 429s from requests that started under the same cap halve it once, not once each.
    """

    def __init__(self, max_concurrency: int, min_concurrency: int = 1,
                 condition: threading.Condition | None = None) -> None:
        if not 1 <= min_concurrency <= max_concurrency:
            raise ConfigError(f"concurrency limits {min_concurrency}..{max_concurrency} are not 1 <= min <= max")
        self.max_concurrency = max_concurrency
        self.min_concurrency = min_concurrency
        self._limit = max_concurrency
        self._in_flight = 0
        self._generation = 0  # bumped at each cut: a 429 from an older generation is already answered
        self._successes = 0
        self.lowest = max_concurrency
        # shared by the limiters of several endpoints, so one wait hears of room on any of them
        self._cond = condition or threading.Condition()

    @property
    def limit(self) -> int:
        with self._cond:
            return self._limit

    @property
    def in_flight(self) -> int:
        with self._cond:
            return self._in_flight

    @property
    def room(self) -> int:
        """Requests that may start now."""
        with self._cond:
            return self._limit - self._in_flight

    @contextlib.contextmanager
    def slot(self) -> Iterator[LimiterSlot]:
        """Wait for room, hold it for one request; report the outcome on the slot."""
        with self._cond:
            self._cond.wait_for(lambda: self._in_flight < self._limit)
            slot = self.take()
        try:
            yield slot
        finally:
            self.release()

    def take(self) -> LimiterSlot:
        """Hold room for one request without waiting (the caller checked `room`); `release` gives it back."""
        with self._cond:
            if self._in_flight >= self._limit:
                raise RuntimeError("AdaptiveLimiter.take without room")
            self._in_flight += 1
            return LimiterSlot(self, self._generation)

    def release(self) -> None:
        with self._cond:
            self._in_flight -= 1
            self._cond.notify_all()

    def rate_limited(self, generation: int) -> None:
        with self._cond:
            if generation == self._generation:
                self._limit = max(self.min_concurrency, self._limit // 2)
                self.lowest = min(self.lowest, self._limit)
                self._generation += 1
                self._successes = 0

    def succeeded(self) -> None:
        with self._cond:
            self._successes += 1
            if self._successes >= self._limit and self._limit < self.max_concurrency:
                self._limit += 1
                self._successes = 0
                self._cond.notify_all()


@dataclass(frozen=True)
class LimiterSlot:
    limiter: AdaptiveLimiter
    generation: int

    def rate_limited(self) -> None:
        self.limiter.rate_limited(self.generation)

    def succeeded(self) -> None:
        self.limiter.succeeded()
