"""The run's circuit breaker on a clock the test moves: when it trips, what it says, and that a success resets it."""

from __future__ import annotations

import pytest

from tracevote.core.errors import QuotaError
from tracevote.core.retry import LONG_RETRY_AFTER_S
from tracevote.sampling.breaker import (
    LONG_LIMIT_ATTEMPTS,
    OUTAGE_ATTEMPTS,
    OUTAGE_ATTEMPTS_PER_ENDPOINT,
    OUTAGE_SECONDS,
    RATE_LIMIT_ATTEMPTS,
    RATE_LIMIT_SECONDS,
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


@pytest.mark.parametrize(("retry_after", "tripped"), [
    (LONG_RETRY_AFTER_S + 1, True),  # the server says the limit outlasts a run's patience
    (86400.0, True),
    (LONG_RETRY_AFTER_S, False),  # a long minute-scale wait: waited (up to 30 s a time), not a reason to stop
    (1.0, False),
    (None, False),  # no Retry-After: only the time rule applies
])
def test_429s_asking_to_wait_longer_than_a_run_waits_trip_it_after_a_few_in_a_row(retry_after: float | None,
                                                                                 tripped: bool) -> None:
    breaker = Breaker(1, Clock())
    for _ in range(LONG_LIMIT_ATTEMPTS - 1):
        breaker.rate_limited(retry_after)
    assert not breaker.tripped
    breaker.rate_limited(retry_after)
    assert breaker.tripped is tripped


def test_a_short_429_in_between_restarts_the_count_of_long_ones() -> None:
    breaker = Breaker(1, Clock())
    for _ in range(3):
        for _ in range(LONG_LIMIT_ATTEMPTS - 1):
            breaker.rate_limited(86400.0)
        breaker.rate_limited(2.0)
    assert not breaker.tripped


@pytest.mark.parametrize(("lasted_s", "in_a_row", "tripped"), [
    (RATE_LIMIT_SECONDS - 1, 100, False),  # many, but not for long
    (RATE_LIMIT_SECONDS, RATE_LIMIT_ATTEMPTS - 1, False),  # long, but too few
    (RATE_LIMIT_SECONDS, RATE_LIMIT_ATTEMPTS, True),
])
def test_429s_that_never_let_a_request_through_trip_it_after_a_while(lasted_s: float, in_a_row: int,
                                                                   tripped: bool) -> None:
    clock = Clock()
    breaker = Breaker(1, clock)
    for i in range(in_a_row):
        clock.now = lasted_s * i / max(1, in_a_row - 1)
        breaker.rate_limited(None if i % 2 else 20.0)
    assert breaker.tripped is tripped
    if tripped:
        message = breaker.message()
        assert message.startswith(f"rate limited: HTTP 429 on {in_a_row} attempts in a row over 1 endpoint for 5 min")
        assert "no Retry-After" in message and "replies received are stored" in message
        assert "Run the stage again once the limit lifts" in message


def test_a_success_ends_a_rate_limit_and_429s_are_not_failures() -> None:
    clock = Clock()
    breaker = Breaker(1, clock)
    for _ in range(OUTAGE_ATTEMPTS * 2):
        breaker.rate_limited(None)  # not an outage however many
    clock.now = RATE_LIMIT_SECONDS - 1
    breaker.succeeded()
    clock.now = 2 * RATE_LIMIT_SECONDS - 2
    for _ in range(RATE_LIMIT_ATTEMPTS):
        breaker.rate_limited(None)  # its own limit began after the success: under RATE_LIMIT_SECONDS
    assert not breaker.tripped
    assert breaker.in_a_row("HTTP 429") == RATE_LIMIT_ATTEMPTS and breaker.in_a_row("timeout") == 0


def test_a_stop_refuses_every_later_attempt_with_its_own_error_and_the_first_cause_stays() -> None:
    breaker = Breaker(1, Clock())
    breaker.stop(lambda: QuotaError("out of quota", 429))
    for _ in range(OUTAGE_ATTEMPTS):
        breaker.failed("HTTP 503")
    for _ in range(2):
        with pytest.raises(QuotaError, match="out of quota"):
            breaker.check()


def test_an_outage_error_counts_what_the_run_stored() -> None:
    breaker = Breaker(1, Clock())
    for _ in range(OUTAGE_ATTEMPTS):
        breaker.failed("timeout")
    with pytest.raises(OutageError) as caught:
        breaker.check()
    counted = str(caught.value.with_stored(12, "samples"))
    assert "(12 samples received by this run are stored)" in counted and "Run the stage again" in counted
