"""The run-time spend cap: a call starts only while spent + in flight (at worst case) + its worst case fit."""

from __future__ import annotations

import pytest

from tracevote.sampling.budget import SpendCap, SpendCapError


@pytest.mark.parametrize(("spent", "in_flight", "next_worst", "starts"), [
    (0.0, [], 0.0075, True),  # exactly the cap
    (0.0, [], 0.0076, False),
    (0.004, [0.003], 0.0005, True),
    (0.004, [0.003], 0.0006, False),  # the in-flight worst cases count, not what they will cost
])
def test_a_call_starts_only_if_its_worst_case_fits(spent: float, in_flight: list[float], next_worst: float,
                                                   starts: bool) -> None:
    cap = SpendCap(0.0075, "pool.max_cost_usd")
    cap.reserve(0.0, lambda: 0)
    cap.settle(0.0, spent)
    for worst in in_flight:
        cap.reserve(worst, lambda: 0)
    if starts:
        cap.reserve(next_worst, lambda: 0)
    else:
        with pytest.raises(SpendCapError, match=r"spent \$[0-9.]+ of \$0\.0075.* 7 calls not sent.*Raise "
                                                r"pool\.max_cost_usd in params\.yaml"):
            cap.reserve(next_worst, lambda: 7)


def test_a_landed_call_frees_its_worst_case_and_adds_what_it_cost() -> None:
    cap = SpendCap(0.01, "debate.max_cost_usd")
    cap.reserve(0.006, lambda: 0)
    cap.settle(0.006, 0.001)
    assert (cap.spent_usd, cap.reserved_usd) == (0.001, 0.0)
    cap.reserve(0.009, lambda: 0)  # 0.001 + 0.009 fits again


def test_what_was_paid_before_the_calls_counts_against_the_cap() -> None:
    """build_pool's probe is paid before its samples: a call that fits the cap alone is refused beside it."""
    SpendCap(0.0075, "pool.max_cost_usd").reserve(0.0075, lambda: 0)
    with pytest.raises(SpendCapError, match=r"spent \$0\.0010 of \$0\.0075"):
        SpendCap(0.0075, "pool.max_cost_usd", spent_usd=0.001).reserve(0.0075, lambda: 1)


def test_calls_that_all_landed_leave_nothing_in_flight_not_a_floats_residue() -> None:
    """0.1 + 0.2 - 0.1 - 0.2 is 5.6e-17 in floats: the line once read "$0.000000000000000056 in flight"."""
    cap = SpendCap(0.5, "critique.max_cost_usd")
    for worst in (0.1, 0.2):
        cap.reserve(worst, lambda: 0)
    for worst in (0.1, 0.2):
        cap.settle(worst, 0.0)
    assert cap.reserved_usd == 0.0
    with pytest.raises(SpendCapError) as caught:
        cap.reserve(0.6, lambda: 3)
    assert "in flight" not in str(caught.value)
    assert "spent $0 of $0.5000, and the next call could cost up to $0.6000; 3 calls not sent" in str(caught.value)
