"""Running paid calls into a ledger: each stored the moment it arrives, none paid twice, resumable mid-conversation.

A conversation is a step function: given the replies so far, it names its next call, or None when it is
done. Traces are one-call conversations; a debate is one long conversation whose later calls read the
earlier replies. On a rerun every conversation replays from the ledger: each stored reply is loaded
instead of requested, the conversation's state is rebuilt from them, and only its first missing call
onwards is paid for.

Worker threads make the requests; only the calling thread writes, one whole frame per call, so a kill at
any moment loses at most the calls in flight: submitted and not yet written, at most `calls_at_risk(concurrency)`.
A conversation has at most one call in flight.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import dataclasses
import errno
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from tracevote.core.costs import spent_text
from tracevote.core.errors import (
    ContextLengthError,
    DataError,
    FatalAPIError,
    ReasoningBudgetError,
    StorageError,
    TracevoteError,
)
from tracevote.core.retry import TransientError
from tracevote.sampling.breaker import OutageError
from tracevote.sampling.budget import SpendCap, SpendCapError
from tracevote.store.calls import Call
from tracevote.store.frame_writer import FrameWriter
from tracevote.store.framing import Key

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


class Conversation(Protocol[R]):
    def next_call(self, replies: Sequence[R]) -> Call | None:
        """The next call given the replies so far (oldest first), or None when the conversation is done."""
        ...


@dataclass(frozen=True)
class OneCall:
    """A conversation of one call: a sampled trace, a critique."""

    call: Call

    def next_call(self, replies: Sequence[object]) -> Call | None:
        return None if replies else self.call


class CallStore(Protocol[R_co]):
    """Where replies go and come back from: a trace Pool or a CallLedger."""

    def load(self, call: Call) -> R_co: ...

    def writer(self, item_id: str) -> FrameWriter: ...

    def check_kind(self, simulated: bool) -> None: ...


@dataclass(frozen=True)
class Paid(Generic[R]):
    """What one call returned: the reply, the bytes the ledger stores, and its usage and cost."""

    reply: R
    payload: bytes
    prompt_tokens: int
    completion_tokens: int
    usd: float
    simulated: bool = False  # tracevote's simulator answered (the ledger refuses a reply of the other kind)
    failed_for_context: bool = False  # the server refused it as too long for the model: stored as that failure


@dataclass(frozen=True)
class Shared(Generic[R]):
    """What one request answering several calls returned (`n` samples sharing one prefill, Call.shared_with): the
    Paid of each call it answered, by key, and the cause of each it could not (those stay missing for this run)."""

    answered: dict[Key, Paid[R]]
    failed: dict[Key, str]

    @property
    def usd(self) -> float:
        return sum(paid.usd for paid in self.answered.values())


CallFn = Callable[[Call], "Paid[R] | Shared[R]"]

# Calls queued per worker, so a worker starts its next request while the calling thread writes the last reply.
_QUEUED_PER_WORKER = 2


def calls_at_risk(concurrency: int) -> int:
    """The most calls a kill -9 can lose: each submitted call, sent or answered, is unwritten until stored."""
    return _QUEUED_PER_WORKER * concurrency


@dataclass
class RunSummary:
    requested: int = 0  # calls sent (and answered, or given up on)
    stored: int = 0
    replayed: int = 0  # stored replies read back to rebuild conversations
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usd: float = 0.0
    elapsed_s: float = 0.0
    failures: collections.Counter[str] = field(default_factory=collections.Counter)
    simulated_as: str | None = None  # the model a simulated run's cost is priced as
    unit: str = "calls"
    priced_as: str | None = None  # the model whose prices apply: a run the simulator answers reads as simulated_as it
    context_failed: int = 0  # stored as refused for the model's context window (each item goes on, or ends, without)

    def add(self, paid: Paid) -> None:
        if paid.simulated and self.simulated_as is None:  # a sim-server behind backend openai: say so from now on
            self.simulated_as = self.priced_as or "the priced model"
        self.stored += 1
        self.context_failed += paid.failed_for_context
        self.prompt_tokens += paid.prompt_tokens
        self.completion_tokens += paid.completion_tokens
        self.usd += paid.usd

    def render(self) -> str:
        replayed = f" ({self.replayed} stored replies replayed)" if self.replayed else ""
        lines = [f"stored {self.stored} of {self.requested} requested {self.unit} in {self.elapsed_s:.1f}s"
                 f"{replayed}; {self.prompt_tokens} prompt + {self.completion_tokens} completion tokens, "
                 f"{spent_text(self.usd, self.simulated_as)}"]
        lines += [f"  failed after retries: {count} x {cause}" for cause, count in self.failures.most_common()]
        if self.context_failed:
            lines.append(f"  failed for context: {self.context_failed} {self.unit} longer than the model's context "
                         f"window (HTTP 400), recorded as failed and not asked again; lower max_tokens or use a "
                         f"larger-window endpoint")
        return "\n".join(lines)


@dataclass
class _Thread(Generic[R]):
    """One conversation on its way: the replies so far and the call in flight."""

    conversation: Conversation[R]
    replies: list[R] = field(default_factory=list)
    call: Call | None = None


def run_calls(store: CallStore[R], conversations: Iterable[Conversation[R]], call_fn: CallFn[R], *,
              concurrency: int, summary: RunSummary | None = None,
              on_stored: Callable[[Paid[R], RunSummary], None] | None = None,
              cap: SpendCap | None = None, worst_usd: Callable[[Call], float] | None = None,
              first_alone: bool = False) -> RunSummary:
    """Run every conversation to its end, `concurrency` calls at a time; stop at once on a non-retryable error.

    With a `cap`, a call starts only while the cap holds its `worst_usd` on top of what was spent and what is in
    flight. An outage (OutageError), a refusal no retry fixes (FatalAPIError: a bad key, an unknown model, an empty
    quota, a request the server will not answer), a failed write (StorageError), the cap (SpendCapError) or a budget
    spent on hidden reasoning (ReasoningBudgetError) stop the run softly: nothing more is sent, the calls in flight
    land and are stored (each was paid for), then the error is raised.
    `first_alone` sends one call at a time until a reply arrives, so `store.check_kind` judges the server's kind
    (simulated or real) before more than one call is paid for.

    A call whose retries ran out is counted in `failures` and ends its conversation for this run (the
    rerun resumes it). Conversations start in the order given, each as a slot frees up.
    """
    summary = summary or RunSummary()
    started = time.monotonic()
    waiting = iter(conversations)
    executor = cf.ThreadPoolExecutor(concurrency, thread_name_prefix="call")
    with ExitStack() as stack:
        writers = _Writers(store, stack)
        in_flight: dict[cf.Future[Paid[R] | Shared[R]], _Thread[R]] = {}

        stop = _Stop()

        def advance(thread: _Thread[R]) -> None:
            call = None if stop.error else _next_missing_call(thread, store, writers, summary)
            if call is not None and cap is not None and worst_usd is not None:
                try:
                    cap.reserve(worst_usd(call), lambda: 1 + sum(1 for _ in waiting))
                except SpendCapError as exc:
                    stop.halt(exc, in_flight)
                    return
            if call is not None:
                writers.claim(call)
                thread.call = call
                in_flight[executor.submit(call_fn, call)] = thread

        try:
            while True:
                if not stop.error:
                    alone = first_alone and not summary.stored
                    _start_conversations(1 if alone else calls_at_risk(concurrency), in_flight, waiting, advance)
                if not in_flight:
                    break
                done, _ = cf.wait(in_flight, return_when=cf.FIRST_COMPLETED)
                for future in done:
                    thread = in_flight.pop(future)
                    calls = len(thread.call.keys) if thread.call is not None else 1
                    paid = stop.result(future, summary, in_flight, calls)
                    if cap is not None and worst_usd is not None and thread.call is not None:
                        cap.settle(worst_usd(thread.call), paid.usd if paid is not None else 0.0)
                    if paid is None or thread.call is None:
                        continue
                    stored_all = True
                    for call, part in _answered(thread.call, paid, summary):
                        store.check_kind(part.simulated)
                        if not stop.store(writers, call, part, in_flight):
                            stored_all = False
                            continue
                        summary.add(part)
                        if on_stored is not None:
                            on_stored(part, summary)
                        thread.replies.append(part.reply)
                    if stored_all:
                        advance(thread)
            stop.store_kept(writers, summary, on_stored)
        finally:
            # On any other error (a bug, a ledger that answers another request) or ^C, drop what has not started;
            # calls in flight finish on their own.
            executor.shutdown(wait=False, cancel_futures=True)
    summary.elapsed_s = time.monotonic() - started
    if isinstance(stop.error, SpendCapError) and cap is not None:
        raise cap.stopped()  # now that the calls in flight have landed: the final spend
    if isinstance(stop.error, OutageError):
        raise stop.error.with_stored(summary.stored, summary.unit)
    if stop.error is not None:
        raise stop.error
    return summary


CONTEXT_FAILURE = "longer than the model's context window (HTTP 400)"
# a context-length refusal (a FatalAPIError too) ends only its own conversation: _result takes it in first
STOPPING_ERRORS = (OutageError, FatalAPIError, StorageError, SpendCapError, ReasoningBudgetError)


class _Stop:
    """The first error that ends a run but lets the calls in flight land (an outage, a refusal, a failed write, a cap):
    queued calls are cancelled and none is started; replies already paid for are stored until a write fails."""

    def __init__(self) -> None:
        self.error: TracevoteError | None = None
        self._writes_failed = False
        self._kept: list[tuple[Call, Paid]] = []  # paid replies not stored since the disk refused a write

    def result(self, future: cf.Future, summary: RunSummary, in_flight: dict, calls: int) -> Paid | Shared | None:
        if future.cancelled():
            return None
        try:
            return _result(future, summary, calls)
        except STOPPING_ERRORS as exc:
            self.halt(exc, in_flight)
            return None

    def store(self, writers: _Writers, call: Call | None, paid: Paid, in_flight: dict) -> bool:
        """Store a reply; once the disk has refused a write, keep it (and the refused one) for store_kept."""
        if call is None:
            return False
        if self._writes_failed:
            self._kept.append((call, paid))
            return False
        try:
            writers.store(call, paid.payload)
        except (OSError, StorageError) as exc:
            if isinstance(exc, OSError) and exc.errno not in _DISK_ERRNOS:
                raise
            self._writes_failed = True
            self._kept.append((call, paid))
            self.halt(exc if isinstance(exc, StorageError) else _storage_error(exc, writers.path(call)), in_flight)
            return False
        return True

    def store_kept(self, writers: _Writers, summary: RunSummary,
                   on_stored: Callable[[Paid, RunSummary], None] | None) -> None:
        """Once every call in flight has landed, append each kept reply once more: a refused append leaves its log
        whole (framing cuts it back), and room may have come back (another log under a size limit, space freed
        meanwhile). What still cannot be stored is counted in the error: at most calls_at_risk(concurrency)."""
        kept, self._kept = self._kept, []
        lost = 0
        for call, paid in kept:
            try:
                writers.store(call, paid.payload)
            except (OSError, StorageError) as exc:
                if isinstance(exc, OSError) and exc.errno not in _DISK_ERRNOS:
                    raise
                lost += 1
                continue
            summary.add(paid)
            if on_stored is not None:
                on_stored(paid, summary)
        if kept and isinstance(self.error, StorageError):
            self.error = StorageError(
                f"{self.error}. Of the {len(kept)} paid replies that landed once the disk refused, {len(kept) - lost} "
                f"were stored on a second try and {lost} could not be (the rerun requests those again)")

    def halt(self, error: TracevoteError, in_flight: dict) -> None:
        if self.error is None:
            self.error = error
        for future in in_flight:
            future.cancel()  # only those not started: a request already sent is paid for and lands


# a write the disk refused: full, over a size limit or quota, read-only, failing
_DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS, errno.EIO})


def _storage_error(exc: OSError, path: Path) -> StorageError:
    """One line for a refused write the store did not already phrase: the path, the cause, the free space."""
    free = shutil.disk_usage(path.parent).free
    return StorageError(f"{path}: {exc.strerror} while storing a reply ({free / 2**20:.1f} MiB free); the run stopped "
                        f"sending requests. Free some space and run the stage again: it requests only what is missing")


def _start_conversations(limit: int, in_flight: dict, waiting: Iterator, advance: Callable) -> None:
    while len(in_flight) < limit:
        conversation = next(waiting, None)
        if conversation is None:
            return
        advance(_Thread(conversation))


def _next_missing_call(thread: _Thread[R], store: CallStore[R], writers: _Writers, summary: RunSummary) -> Call | None:
    """Replay stored replies into the conversation until it names a call not stored (or ends)."""
    while True:
        call = thread.conversation.next_call(thread.replies)
        if call is None or not writers.is_stored(call):
            return call
        thread.replies.append(store.load(call))
        summary.replayed += 1


def _result(future: cf.Future, summary: RunSummary, calls: int) -> Paid | Shared | None:
    """The future's reply; `calls` is how many calls its request answers (each counted as requested)."""
    summary.requested += calls
    try:
        return future.result()
    except TransientError as exc:  # retries ran out: the calls stay missing, and the cause is counted
        summary.failures[exc.cause] += calls
        return None
    except ContextLengthError:  # that one prompt is too long for the model: its conversation ends, the run goes on
        summary.failures[CONTEXT_FAILURE] += calls
        return None
    except TracevoteError:
        raise


def _answered(call: Call, paid: Paid[R] | Shared[R], summary: RunSummary) -> list[tuple[Call, Paid[R]]]:
    """Each call a reply answers, with its Paid; a Shared reply's unanswered calls are counted as failures (they
    stay missing: the rerun asks for them again)."""
    if isinstance(paid, Paid):
        return [(call, paid)]
    for cause in paid.failed.values():
        summary.failures[cause] += 1
    return [(dataclasses.replace(call, key=key, shared_with=()), part) for key, part in paid.answered.items()]


class _Writers:
    """One frame writer per item, opened when a conversation first touches it (its `keys` are what is
    stored), and the calls claimed so far."""

    def __init__(self, store: CallStore, stack: ExitStack) -> None:
        self._store = store
        self._stack = stack
        self._writers: dict[str, FrameWriter] = {}
        self._claimed: set[tuple[str, Key]] = set()

    def is_stored(self, call: Call) -> bool:
        return call.key in self._writer(call.item_id).keys

    def claim(self, call: Call) -> None:
        """Two conversations asking for the same call would pay for it twice: a bug in the stage."""
        for key in call.keys:
            if (call.item_id, key) in self._claimed:
                raise DataError(f"item {call.item_id}: call {key!r} is asked for by two conversations")
            self._claimed.add((call.item_id, key))

    def store(self, call: Call, payload: bytes) -> None:
        self._writer(call.item_id).append(call.key, payload)

    def path(self, call: Call) -> Path:
        return self._writer(call.item_id).path

    def _writer(self, item_id: str) -> FrameWriter:
        if item_id not in self._writers:
            self._writers[item_id] = self._stack.enter_context(self._store.writer(item_id))
        return self._writers[item_id]
