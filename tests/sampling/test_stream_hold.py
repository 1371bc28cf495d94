"""When a stream's held tokens go to the observer (sampling.stream_hold): a full batch, a hold that ran out, the
observer's count of tokens it can take, a cancel; how long a wait for the next read may last; and the same holds
end to end, stream_completion against a loopback server that writes a chunk only when asked."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.conftest import EVENT_TIMEOUT_S
from tests.sampling.test_client import messages
from tests.sampling.test_stream import client_for, provider_stream, stream_until_served
from tests.sse_server import SSEScript, events, serve_sse
from tracevote.sampling.stream import Streamed, TokenBatch, read_stream, stream_completion
from tracevote.sampling.stream_hold import (
    CANCEL_POLL_S,
    HOLD_CHUNKS,
    HOLD_S,
    UNCOUNTED_CHUNKS,
    UNCOUNTED_HOLD_S,
    Hold,
)


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


@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "until-close"])
def test_tokens_held_back_go_to_the_observer_before_the_client_waits_on_a_server_that_writes_when_asked(
        chunked: bool) -> None:
    """stream_completion's defaults hold tokens back; a server that writes the next chunk only once the observer has
    seen the last one still gets each one seen (a hold that waited for more would never end)."""
    script = SSEScript(events(provider_stream("openai")), paced=True, chunked=chunked)
    seen: list[int] = []

    def observer(batch: TokenBatch) -> str | None:
        seen.append(len(batch.tokens))
        if sum(seen) >= 3:
            return "stop"
        script.go()
        return None

    result = stream_until_served(script, observer)
    assert result.stop_reason == "confidence" and result.n_tokens == sum(seen) == 3 and script.client_closed.is_set()


def test_an_observer_that_could_stop_soon_gets_the_tokens_sooner() -> None:
    """An observer answering how many more tokens it can take caps the batch below `batch_chunks`."""
    sizes: list[int] = []

    def observer(batch: TokenBatch) -> int:
        sizes.append(len(batch.tokens))
        return 3

    result = read_stream(events(provider_stream("openai")), top_logprobs=20, observer=observer, batch_chunks=8)
    assert sum(sizes) == result.n_tokens and sizes[0] == 8 and max(sizes[1:]) == 3


def test_an_observer_one_token_from_a_possible_stop_gets_each_token_as_it_arrives() -> None:
    """Near a stop (the observer can take 1 more token) nothing is held back, however long the hold: a server that
    writes a token only once the last was seen streams the whole trace, one token a batch."""
    script = SSEScript(events(provider_stream("openai")), paced=True)
    sizes: list[int] = []

    def observer(batch: TokenBatch) -> int:
        sizes.append(len(batch.tokens))
        script.go()
        return 1

    for _ in range(3):  # the chunks after the last token (finish, usage, [DONE]) are not tokens: let them out
        script.go()
    with serve_sse(script) as url, client_for(url) as client:
        result = stream_completion(client, messages(), sample_key="p/0", observer=observer, batch_chunks=1_000_000,
                                   hold_s=3600.0, want=1)
    assert result.n_tokens == 41 == len(sizes) and set(sizes) == {1} and result.stop_reason == "finished"


def test_a_cancel_reaches_a_client_holding_tokens_back_for_an_hour() -> None:
    """An observer that can take a million more tokens lets the client hold them back, here for an hour; a cancel
    (the live run's consensus stop) hands them over at once, whether it comes while the client sleeps on them or
    before it reads them, and the observer closes the stream."""
    script = SSEScript(events(provider_stream("openai")), paced=True)
    cancel = threading.Event()
    seen: list[int] = []

    def observer(batch: TokenBatch) -> str | int:
        seen.append(len(batch.tokens))
        if cancel.is_set():
            return "stop"
        script.go()  # one more token, which the client holds back
        return 1_000_000

    def cancel_once_written() -> None:
        deadline = time.monotonic() + EVENT_TIMEOUT_S
        while script.written < 3 and time.monotonic() < deadline:  # the role chunk, the first token, one more
            time.sleep(0.01)
        cancel.set()

    results: list[Streamed] = []  # the server writes the role chunk and the first token unasked
    with serve_sse(script) as url, client_for(url) as client:
        canceller = threading.Thread(target=cancel_once_written)
        canceller.start()
        reader = threading.Thread(target=lambda: results.append(stream_completion(
            client, messages(), sample_key="p/0", observer=observer, batch_chunks=1_000_000, hold_s=3600.0,
            want=1, cancel=cancel)))  # the first token at once: the server writes the next only when asked
        reader.start()
        reader.join(EVENT_TIMEOUT_S)
        canceller.join(EVENT_TIMEOUT_S)
        assert not reader.is_alive(), "the client kept holding its tokens after the cancel"
        assert script.finished.wait(EVENT_TIMEOUT_S)
    assert results[0].stop_reason == "confidence" and results[0].n_tokens == sum(seen) == 2
    assert script.client_closed.is_set() and script.written == 3


def test_the_docs_state_the_clients_own_holds() -> None:
    docs = Path(__file__).resolve().parents[2] / "docs"
    endpoints, live = ((docs / name).read_text(encoding="utf-8") for name in ("endpoints.md", "live-online.md"))
    uncounted = f"{UNCOUNTED_CHUNKS:,} chunks or {UNCOUNTED_HOLD_S:g} s"
    assert f"{HOLD_CHUNKS:,} chunks were read or {HOLD_S:g} s after" in endpoints and uncounted in endpoints
    assert f"up to {HOLD_CHUNKS:,} chunks, or {HOLD_S:g} s after" in live
