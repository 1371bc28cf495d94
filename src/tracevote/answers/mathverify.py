"""The `math` answer format: LaTeX answers compared with Math-Verify, safely from any thread.

Math-Verify's own timeouts use ``signal.alarm``, which only works in the main thread, and a signal cannot
interrupt sympy while it is stuck inside C code (a power tower such as ``9^{9^{9^{9^{9}}}}`` never ends).
So `MathJudge` runs ``parse`` + ``verify`` in worker processes (forked warm from a fork server that
imported Math-Verify once or, with start method "fork", from this process once it has) with those timeouts switched off
(``parse(..., parsing_timeout=None)``, ``verify(..., timeout_seconds=None)``) and enforces the limit from
the parent with a wall clock: a worker that overruns is killed, the pool is replaced, and that comparison
falls back to a normalised string comparison (see `normalize_answer_text`). The parent sends no signals,
so a judge can be used from any thread. The workers' side is tracevote.answers.mathverify_worker.
The examples here are not run as doctests (+SKIP): they start worker processes, which
tests/answers/test_mathverify.py runs.

    >>> with MathJudge(timeout_s=5.0) as judge:  # doctest: +SKIP
    ...     judge.compare("\\\\frac{1}{2}", "0.5")
    MathVerdict(equal=True, method='math_verify', reason=None)
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor

from tracevote.answers.mathverify_worker import (
    FallbackReason,
    JudgeRule,
    Outcome,
    init_worker,
    verify_chunk,
    warm_up,
    worker_ready,
)

VerdictMethod = Literal["math_verify", "string", "unjudged"]
StartMethod = Literal["spawn", "forkserver", "fork"]
# The chunks being compared: each one's indices in the pairs, and the time.monotonic() it must be done by.
InFlight: TypeAlias = "dict[Future[list[Outcome]], tuple[list[int], float]]"


@dataclass(frozen=True)
class MathVerdict:
    """Whether an answer equals the gold, how that was decided, and why it fell back to strings (if it did).

    >>> MathVerdict(equal=False, method="string", reason="timeout").reason
    'timeout'
    """

    equal: bool
    method: VerdictMethod
    reason: FallbackReason | None = None


_WRAPPER = re.compile(r"\\(?:boxed|fbox)\{(.*)\}", re.DOTALL)
_TEXT_COMMAND = re.compile(r"\\(?:text|textbf|textrm|mathrm|mathbf|mbox)\{([^{}]*)\}")
_SPACING = re.compile(r"\\[,;:! ]|\\left|\\right|\s+")
_CHOICE = re.compile(r"\(([A-Za-z])\)")


def normalize_answer_text(text: str) -> str:
    """An answer as the string fallback compares it.

    Steps, in order: strip whitespace, a trailing period and enclosing ``$``; unwrap a ``\\boxed{...}``
    (or ``\\fbox``) around the whole answer; keep the content of ``\\text{}``, ``\\textbf{}``,
    ``\\mathrm{}``, ``\\mathbf{}``, ``\\mbox{}``; read ``\\dfrac``/``\\tfrac`` as ``\\frac``; drop
    ``\\left``, ``\\right``, LaTeX spacing (``\\,`` ``\\;`` ``\\:`` ``\\!``) and all whitespace; drop a
    trailing period; read a lone choice ``(B)`` as ``B``. No mathematics: "0.5" and "\\frac{1}{2}" differ.

    >>> normalize_answer_text(" $\\\\boxed{\\\\text{(B)}}$. ")
    'B'
    >>> normalize_answer_text("\\\\dfrac{1}{ 2 }")
    '\\\\frac{1}{2}'
    """
    text = text.strip().rstrip(".").strip().strip("$").strip()
    while (match := _WRAPPER.fullmatch(text)) is not None:
        text = match.group(1).strip()
    text = _TEXT_COMMAND.sub(r"\1", text)
    text = text.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    text = _SPACING.sub("", text).rstrip(".")
    choice = _CHOICE.fullmatch(text)
    return choice.group(1) if choice else text


def string_verdict(gold: str, answer: str, reason: FallbackReason) -> MathVerdict:
    """The fallback verdict: equal when both normalised texts are the same and not empty.

    >>> string_verdict("\\\\boxed{42}", "$42$", "timeout")
    MathVerdict(equal=True, method='string', reason='timeout')
    """
    normal_gold, normal_answer = normalize_answer_text(gold), normalize_answer_text(answer)
    return MathVerdict(equal=bool(normal_gold) and normal_gold == normal_answer, method="string", reason=reason)


# ---- parent side ----


class MathJudge:
    """Compares LaTeX answers with Math-Verify in a bounded pool of worker processes, from any thread.

    Each comparison gets `timeout_s` seconds of wall clock. A chunk of up to `chunk_size` comparisons goes
    to a worker in one round trip and gets the same limit; a chunk that overruns is killed and its pairs
    are retried one by one with the full limit, so only a comparison that overruns on its own falls back
    to `string_verdict` under "timeout". The counts of fallbacks by reason are in `fallbacks`.
    `rule` "grading" compares as the grading toolkit's scorer does instead (`grading_outcome`,
    `grading_fallback`): there an overrun comparison is wrong, not compared as strings.

    >>> with MathJudge(max_workers=1, timeout_s=5.0) as judge:  # doctest: +SKIP
    ...     judge.compare_many([("\\\\frac{1}{2}", "0.5"), ("5", "x=5"), ("7", "8")])
    ...     judge.fallback_summary()
    [MathVerdict(equal=True, ...), MathVerdict(equal=True, ...), MathVerdict(equal=False, ...)]
    None
    """

    def __init__(
        self,
        *,
        max_workers: int = 1,
        timeout_s: float = 5.0,
        chunk_size: int = 16,
        start_method: StartMethod = "forkserver",
        startup_timeout_s: float = 300.0,
        rule: JudgeRule = "answers",
    ) -> None:
        if max_workers < 1 or chunk_size < 1 or timeout_s <= 0 or startup_timeout_s <= 0:
            raise ValueError("max_workers and chunk_size must be >= 1, and the timeouts > 0")
        self.max_workers = max_workers
        self.timeout_s = timeout_s
        self.chunk_size = chunk_size
        self.startup_timeout_s = startup_timeout_s
        self.rule = rule
        # multiprocessing and concurrent.futures (~0.04 CPU s) are imported where a judge is made or its workers
        # started, not at the top: the modules that import this one for its verdicts (the score table's readers,
        # the grading critic, the explorer) never compare an answer
        import multiprocessing

        self._context = multiprocessing.get_context(start_method)
        if start_method == "forkserver":
            # Workers fork from one server that imported and warmed Math-Verify once (spawn starts an interpreter
            # and imports it per worker). Applies when this process first starts its fork server.
            self._context.set_forkserver_preload(["tracevote.answers.mathverify_warm"])
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None
        self._closed = False
        self._fallbacks: Counter[str] = Counter()

    def __enter__(self) -> MathJudge:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def fallbacks(self) -> Counter[str]:
        """A copy of the counts of string fallbacks by reason, e.g. ``Counter({'timeout': 2})``."""
        with self._lock:
            return Counter(self._fallbacks)

    def fallback_summary(self) -> str | None:
        """One line for a stage's report, or None when nothing fell back.

        e.g. "5 comparisons fell back to string comparison (timeout 2, unparsable answer 3)".
        """
        counts = self.fallbacks
        total = sum(counts.values())
        if not total:
            return None
        reasons = ", ".join(f"{reason} {count}" for reason, count in sorted(counts.items()))
        noun = "comparison" if total == 1 else "comparisons"
        return f"{total} {noun} fell back to string comparison ({reasons})"

    def compare(self, gold: str, answer: str) -> MathVerdict:
        """Whether `answer` equals `gold` (gold first: Math-Verify is not symmetric).

        ``judge.compare("\\\\dfrac{\\\\sqrt{3}}{2}", "\\\\frac{\\\\sqrt3}{2}").equal`` is True.
        """
        return self.compare_many([(gold, answer)])[0]

    def compare_many(self, pairs: Iterable[tuple[str, str]]) -> list[MathVerdict]:
        """The verdicts of (gold, answer) pairs, in order, sent to the workers in chunks of `chunk_size`.

        ``judge.compare_many([("10\\\\%", "10"), ("(1,2)", "(2,1)")])`` gives equal=True, then equal=False.
        """
        pairs = [(gold, answer) for gold, answer in pairs]
        with self._lock:
            if self._closed:
                raise RuntimeError("this MathJudge is closed")
            outcomes = self._outcomes(pairs)
            verdicts = [_verdict(pair, outcome, self.rule) for pair, outcome in zip(pairs, outcomes, strict=True)]
            self._fallbacks.update(verdict.reason for verdict in verdicts if verdict.reason is not None)
        return verdicts

    def close(self) -> None:
        """Stop the workers (killing any still busy); the judge can not be used afterwards."""
        with self._lock:
            self._closed = True
            self._drop_pool()

    def _outcomes(self, pairs: list[tuple[str, str]]) -> list[Outcome]:
        """Chunks first, `max_workers` at a time; then the pairs of chunks that failed, one at a time."""
        outcomes: list[Outcome | None] = [None] * len(pairs)
        chunks = [
            list(range(start, min(start + self.chunk_size, len(pairs))))
            for start in range(0, len(pairs), self.chunk_size)
        ]
        retry = self._run_chunks(pairs, chunks, outcomes, alone=False)
        for index in retry:  # alone, a pair's timeout or crash is its own: nothing is retried again
            self._run_chunks(pairs, [[index]], outcomes, alone=True)
        return [outcome if outcome is not None else (None, "comparison error") for outcome in outcomes]

    def _run_chunks(
        self, pairs: list[tuple[str, str]], chunks: list[list[int]], outcomes: list[Outcome | None], *, alone: bool
    ) -> list[int]:
        """Runs `chunks` with every worker busy (one chunk each), each chunk `timeout_s` from when it was sent,
        and fills `outcomes`. Returns the indices to retry alone: those of chunks that overran (unless a single
        pair: then it timed out), crashed (unless `alone`: then its pair crashed the worker) or were in flight
        when the pool had to be killed for another's overrun or crash. Any failure replaces the pool."""
        from concurrent.futures import FIRST_COMPLETED, wait

        pending = deque(chunks)
        in_flight: InFlight = {}
        retry: list[int] = []
        while pending or in_flight:
            pool = self._ready_pool()
            while pending and len(in_flight) < self.max_workers:
                chunk = pending.popleft()
                future = pool.submit(verify_chunk, [pairs[i] for i in chunk], self.rule)
                in_flight[future] = (chunk, time.monotonic() + self.timeout_s)
            first_deadline = min(deadline for _, deadline in in_flight.values())
            done, _ = wait(in_flight, timeout=max(0.0, first_deadline - time.monotonic()), return_when=FIRST_COMPLETED)
            taken = [self._take(future, in_flight.pop(future)[0], outcomes, alone) for future in done]
            overrun, expired = _expire(in_flight, outcomes)
            retry += expired + [index for _, failed in taken for index in failed]
            if overrun or any(crashed for crashed, _ in taken):
                retry += [index for chunk, _ in in_flight.values() for index in chunk]
                in_flight.clear()
                self._drop_pool()
        return sorted(retry)

    @staticmethod
    def _take(future: Future[list[Outcome]], chunk: list[int], outcomes: list[Outcome | None],
              alone: bool) -> tuple[bool, list[int]]:
        """Fills `outcomes` from a finished chunk. Returns whether its worker failed, and the indices to retry
        then (none when it ran `alone`: the failure is its pair's own)."""
        from concurrent.futures.process import BrokenProcessPool

        try:
            chunk_outcomes = future.result()
        except Exception as error:
            if not alone:
                return True, chunk
            reason: FallbackReason = "worker crashed" if isinstance(error, BrokenProcessPool) else "comparison error"
            outcomes[chunk[0]] = (None, reason)
            return True, []
        for index, outcome in zip(chunk, chunk_outcomes, strict=True):
            outcomes[index] = outcome
        return False, []

    def _ready_pool(self) -> ProcessPoolExecutor:
        """The pool, started and warmed up first if there is none (not counted against any limit)."""
        from concurrent.futures import ProcessPoolExecutor, wait

        if self._pool is None:
            if self._context.get_start_method() == "fork":
                warm_up()  # once here rather than in every worker (a no-op once loaded)
            barrier = self._context.Barrier(self.max_workers)
            pool = ProcessPoolExecutor(
                max_workers=self.max_workers, mp_context=self._context, initializer=init_worker, initargs=(barrier,)
            )
            self._pool = pool
            # Each task blocks its worker until all have started, so the pool spawns all of them now.
            ready = [pool.submit(worker_ready, self.startup_timeout_s) for _ in range(self.max_workers)]
            done, not_done = wait(ready, timeout=self.startup_timeout_s)
            if not_done or any(future.exception() is not None for future in done):
                self._drop_pool()
                raise RuntimeError(
                    f"the Math-Verify workers failed to start, or did not start within {self.startup_timeout_s} s"
                )
        return self._pool

    def _drop_pool(self) -> None:
        """Kill the pool's workers (busy or not) and forget the pool; the next comparison starts a new one."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        # ProcessPoolExecutor has no public way to stop a busy worker before Python 3.14 (`kill_workers`).
        processes = list((getattr(pool, "_processes", None) or {}).values())
        manager = getattr(pool, "_executor_manager_thread", None)
        kill_workers = getattr(pool, "kill_workers", None)
        if kill_workers is not None:
            kill_workers()
        for process in processes:
            if process.is_alive():
                process.kill()
        pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.join(timeout=10)
        # subtle: the pool's manager thread closes its wake-up pipe as it winds down; left running, it races with
        # the interpreter's exit hook, which writes to that pipe unlocked before Python 3.12.8 (CPython gh-125451):
        # "OSError: [Errno 9] Bad file descriptor" at exit. Its workers are dead, so it ends at once.
        if manager is not None:
            manager.join(timeout=10)


def _expire(in_flight: InFlight, outcomes: list[Outcome | None]) -> tuple[bool, list[int]]:
    """Takes the chunks past their deadline out of `in_flight`: a single pair has timed out, the pairs of a longer
    chunk are to be retried alone. Returns whether any expired, and those pairs: chunks [3] and [4, 5] overran ->
    outcome 3 is a timeout, (True, [4, 5])."""
    now = time.monotonic()
    expired = [future for future, (_, deadline) in in_flight.items() if deadline <= now]
    retry: list[int] = []
    for future in expired:
        chunk = in_flight.pop(future)[0]
        if len(chunk) == 1:
            outcomes[chunk[0]] = (None, "timeout")
        else:
            retry += chunk
    return bool(expired), retry


def _verdict(pair: tuple[str, str], outcome: Outcome, rule: JudgeRule) -> MathVerdict:
    """Math-Verify's verdict, or the rule's fallback when the outcome says why there is none."""
    equal, reason = outcome
    if equal is not None and reason is None:
        return MathVerdict(equal=equal, method="math_verify")
    reason = reason or "comparison error"
    if rule == "grading":
        return grading_fallback(pair[0], pair[1], reason)
    return string_verdict(pair[0], pair[1], reason)


def grading_fallback(gold: str, answer: str, reason: FallbackReason) -> MathVerdict:
    """The grading scorer's fallback: a comparison that overran its limit or crashed its worker is wrong
    (method "unjudged"); one where Math-Verify raised compares the stripped, lower-cased strings.

    >>> grading_fallback(" Yes", "yes ", "comparison error")
    MathVerdict(equal=True, method='string', reason='comparison error')
    >>> grading_fallback("7", "7", "timeout")
    MathVerdict(equal=False, method='unjudged', reason='timeout')
    """
    if reason in ("timeout", "worker crashed"):
        return MathVerdict(equal=False, method="unjudged", reason=reason)
    return MathVerdict(equal=gold.strip().lower() == answer.strip().lower(), method="string", reason=reason)


def _shown(value: Any) -> str:
    """A value as an error message quotes it: short, one line."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
