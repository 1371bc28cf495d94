"""When a stream's held tokens go to the observer (sampling.stream_hold): a full batch, a hold that ran out, the
observer's count of tokens it can take, a cancel; and how long a wait for the next read may last."""

from __future__ import annotations

import threading

import pytest

from tracevote.sampling.stream_hold import CANCEL_POLL_S, UNCOUNTED_CHUNKS, UNCOUNTED_HOLD_S, Hold


def cancelled() -> threading.Event:
    event = threading.Event()
    event.set()
    return event


@pytest.mark.parametrize(("hold", "held", "held_for", "due"), [
    (Hold(16, None, counted=True), 15, 100.0, False),  # no time bound: only a full batch
    (Hold(16, None, counted=True), 16, 0.0, True),
    (Hold(1024, 0.3, counted=True), 1, 0.29, False),
    (Hold(1024, 0.3, counted=True), 1, 0.3, True),  # the hold ran out
    (Hold(1024, 0.3, counted=False), UNCOUNTED_CHUNKS, 0.0, True),  # the observer has not said: smaller batches
    (Hold(1024, 0.3, counted=False), 1, UNCOUNTED_HOLD_S, True),  # ... and shorter holds
    (Hold(1024, 0.3, counted=True, want=3), 3, 0.0, True),  # it could stop after 3 more: no more are held
    (Hold(1024, 0.3, counted=True, want=0), 1, 0.0, True),  # it could stop at the next: each goes at once
    (Hold(1024, 3600.0, counted=True, want=10**6, cancel=cancelled()), 1, 0.0, True),  # a cancel ends any hold
])
def test_held_tokens_go_over_when_due(hold: Hold, held: int, held_for: float, due: bool) -> None:
    assert hold.due(held, held_for) is due


@pytest.mark.parametrize(("hold", "held_for", "wait"), [
    (Hold(16, None, counted=True), 5.0, None),  # as long as the next read takes
    (Hold(16, 0.3, counted=True), 0.1, 0.2),  # until the hold runs out
    (Hold(16, 0.3, counted=True), 0.5, 0.0),
    (Hold(16, 0.3, counted=True, cancel=threading.Event()), 0.1, CANCEL_POLL_S),  # in slices, to see a cancel
    (Hold(16, None, counted=True, cancel=threading.Event()), 0.0, CANCEL_POLL_S),
])
def test_a_wait_for_the_next_read_ends_at_the_holds_deadline_or_in_slices_for_a_cancel(
        hold: Hold, held_for: float, wait: float | None) -> None:
    assert hold.wait_s(held_for) == (None if wait is None else pytest.approx(wait))


@pytest.mark.parametrize(("answer", "counted", "want"), [(5, True, 5), (None, False, None), ("stop", False, None)])
def test_the_observers_answer_sets_the_count(answer: object, counted: bool, want: int | None) -> None:
    hold = Hold(1024, 0.3, counted=True, want=1)
    hold.heard(answer)
    assert (hold.counted, hold.want) == (counted, want)
