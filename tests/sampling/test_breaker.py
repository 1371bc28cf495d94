"""The run's circuit breaker on a clock the test moves: when it trips, what it says, and that a success resets it."""

from __future__ import annotations

import pytest

from tracevote.sampling.breaker import (
    OUTAGE_ATTEMPTS,
    OUTAGE_ATTEMPTS_PER_ENDPOINT,
    OUTAGE_SECONDS,
    Breaker,
    OutageError,
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(("n_endpoints", "limit"), [
    (1, OUTAGE_ATTEMPTS), (2, OUTAGE_ATTEMPTS), (20, 20 * OUTAGE_ATTEMPTS_PER_ENDPOINT)])
def test_it_trips_on_the_limit_th_consecutive_failure(n_endpoints: int, limit: int) -> None:
    breaker = Breaker(n_endpoints, Clock())
    for _ in range(limit - 1):
        breaker.failed("HTTP 503")
    breaker.check()  # one short: still sending
    breaker.failed("HTTP 503")
    with pytest.raises(OutageError, match=rf"HTTP 503 x{limit} on {limit} consecutive attempts over {n_endpoints} "
                                          r"endpoints?, no success since the run started.*Run the stage again"):
        breaker.check()


def test_a_success_in_between_resets_the_count() -> None:
    breaker = Breaker(1, Clock())
    for _ in range(3):
        for _ in range(OUTAGE_ATTEMPTS - 1):
            breaker.failed("timeout")
        breaker.succeeded()
    breaker.check()
    assert not breaker.tripped


@pytest.mark.parametrize(("quiet_s", "failures", "tripped"), [
    (OUTAGE_SECONDS - 1, OUTAGE_ATTEMPTS_PER_ENDPOINT, False),  # not long enough
    (OUTAGE_SECONDS, OUTAGE_ATTEMPTS_PER_ENDPOINT - 1, False),  # long, but too few failures in a row
    (OUTAGE_SECONDS, OUTAGE_ATTEMPTS_PER_ENDPOINT, True),
])
def test_it_trips_after_a_long_silence_while_attempts_keep_failing(quiet_s: float, failures: int,
                                                                   tripped: bool) -> None:
    clock = Clock()
    breaker = Breaker(1, clock)
    breaker.succeeded()
    clock.now = quiet_s
    for _ in range(failures):
        breaker.failed("timeout")
    assert breaker.tripped is tripped
    if tripped:
        assert f"no success for {OUTAGE_SECONDS:.0f} s" in breaker.message()


def test_a_backoff_wait_ends_when_it_trips() -> None:
    breaker = Breaker(1, Clock())
    for _ in range(OUTAGE_ATTEMPTS):
        breaker.failed("HTTP 500")
    breaker.sleep(3600)  # returns at once: the test would hang otherwise
    assert breaker.tripped
