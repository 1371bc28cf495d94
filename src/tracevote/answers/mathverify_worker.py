"""The worker side of `MathJudge` (tracevote.answers.mathverify): what runs in its pool's processes, in their main
thread, never in the caller's process. Math-Verify's own signal timeouts are off here; the parent's wall clock
limits every comparison and kills a worker that overruns.

Each worker keeps the parses of the texts it has seen (`PARSE_MEMO` of them, per rule): a gold is parsed once
for all the answers compared with it (a pool's thousands of traces), and an answer written exactly as its gold,
as a correct one often is, costs no second parse. Parsing is ~all of a comparison's time (verify ~1%), and a
parse is a pure function of its text with the timeouts off; verify only reads what it is given.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, Literal

FallbackReason = Literal["timeout", "worker crashed", "unparsable gold", "unparsable answer", "comparison error"]
# answers: our own reading of extracted answers (each wrapped in $...$, an unparsable side falls back to a
# normalised string comparison). grading: the grading toolkit's scorer, exactly (see `grading_outcome`).
JudgeRule = Literal["answers", "grading"]
# What a worker returns for one comparison: Math-Verify's answer, or None and why it could not give one.
Outcome = tuple[bool | None, FallbackReason | None]
PARSE_MEMO = 4096  # texts per rule whose parses a worker keeps

_WORKER_BARRIER: Any = None


def _math_text(text: str) -> str:
    """An extracted answer as Math-Verify's LaTeX extraction reads it best: inside one pair of ``$``."""
    return "$" + text.strip().strip("$").strip() + "$"


@lru_cache(maxsize=PARSE_MEMO)
def _answers_parse(text: str) -> tuple[Any, ...] | None:
    """Math-Verify's parse of `text` as the answers rule reads it (its own timeout off), or None when it yields no
    sympy object. A tuple, so that no caller can change what the memo holds."""
    from math_verify import parse
    from sympy import Basic, MatrixBase

    parsed = parse(_math_text(text), parsing_timeout=None)
    return tuple(parsed) if any(isinstance(item, Basic | MatrixBase) for item in parsed) else None


@lru_cache(maxsize=PARSE_MEMO)
def _grading_parse(text: str) -> tuple[Any, ...]:
    """``parse(text)`` with Math-Verify's default extraction, its own timeout off."""
    from math_verify import parse

    return tuple(parse(text, parsing_timeout=None))


def _verify_pair(gold: str, answer: str) -> Outcome:
    """Math-Verify's verdict on one pair, gold first (verify is not symmetric), timeouts off."""
    from math_verify import verify

    try:
        gold_parsed = _answers_parse(gold)
        if gold_parsed is None:
            return None, "unparsable gold"
        answer_parsed = _answers_parse(answer)
        if answer_parsed is None:
            return None, "unparsable answer"
        return bool(verify(list(gold_parsed), list(answer_parsed), timeout_seconds=None)), None
    except Exception:
        return None, "comparison error"


def grading_outcome(gold: str, answer: str) -> Outcome:
    """The grading scorer's verdict: ``verify(parse(gold), parse(answer))`` with Math-Verify's default extraction
    and ``raise_on_error`` off, as a plain call in a main thread does, but with its signal timeouts off (the
    parent's wall clock limits it instead). Math-Verify then catches its own errors (an unparsable side gives
    []: not equal); only an exception that still escapes makes the pair fall back to strings."""
    from math_verify import verify

    try:
        gold_parsed, answer_parsed = list(_grading_parse(gold)), list(_grading_parse(answer))
        return bool(verify(gold_parsed, answer_parsed, timeout_seconds=None)), None
    except Exception:
        return None, "comparison error"


def verify_chunk(pairs: Sequence[tuple[str, str]], rule: JudgeRule = "answers") -> list[Outcome]:
    """The outcomes of a chunk of (gold, answer) pairs: one round trip to a worker for all of them."""
    compare = grading_outcome if rule == "grading" else _verify_pair
    return [compare(gold, answer) for gold, answer in pairs]


def warm_up() -> None:
    """Import Math-Verify and make a first comparison of each rule (it builds its LaTeX grammar and regexes then,
    ~0.1 s), so that neither counts against a comparison's limit."""
    import math_verify  # noqa: F401  (fails here, breaking the pool, rather than as a fallback per comparison)

    # The "timeout is disabled" warning is expected here: the parent enforces the limit.
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    _verify_pair("\\frac{1}{2}", "0.5")
    grading_outcome("\\frac{1}{2}", "0.5")


def init_worker(barrier: Any) -> None:
    """Warm Math-Verify once per worker (a no-op in a worker forked warm from the fork server)."""
    global _WORKER_BARRIER
    _WORKER_BARRIER = barrier
    warm_up()


def worker_ready(timeout_s: float) -> None:
    """Wait until every worker of the pool has started and warmed up (so all are spawned before timing)."""
    _WORKER_BARRIER.wait(timeout_s)
