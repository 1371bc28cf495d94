"""ingest's fast path (msgspec's typed decoding) against the slow one and the store's definitions: numbers read bit
for bit as orjson reads them, documents it does not read left to the slow path, the measures as the store has them,
and no compiled loops (numba) loaded by a process that parses a completion."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import hang_guard_s
from tracevote.core.retry import TransientError
from tracevote.sampling import ingest, ingest_fast
from tracevote.store.logprobs import clean_logprobs, token_confidence


def reply(chosen: list[bytes], top: list[list[bytes]] | None = None) -> bytes:
    """A compact reply whose logprobs are written as given (JSON number texts, or anything else)."""
    rows = top if top is not None else [[] for _ in chosen]
    items = b",".join(b'{"token":"t%d","logprob":%s,"bytes":[116],"top_logprobs":[%s]}' % (
        i, value, b",".join(b'{"token":"a","logprob":%s,"bytes":[97]}' % entry for entry in row))
        for i, (value, row) in enumerate(zip(chosen, rows, strict=True)))
    return (b'{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"t"},"logprobs":{"content":['
            + items + b']},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":%d}}' % len(chosen))


def as_written(value: float, form: str) -> bytes:
    if form == "repr":
        return repr(value).encode()
    if form == "fixed":
        return f"{value:.9f}".encode()
    if form == "exponent":
        return f"{value:.6e}".encode()
    if form == "float32 in full":
        with np.errstate(over="ignore"):
            return repr(float(np.float32(value))).encode()
    return orjson.dumps(value)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.floats(allow_nan=False, allow_infinity=False, width=64),
                          st.sampled_from(["repr", "fixed", "exponent", "float32 in full", "orjson"])),
                min_size=1, max_size=40))
def test_numbers_are_read_bit_for_bit_as_orjson_reads_them(values: list[tuple[float, str]]) -> None:
    texts = [text for text in (as_written(value, form) for value, form in values) if b"inf" not in text]
    if not texts:
        return
    parsed = ingest_fast.parse_fast(reply(texts, [[text] for text in texts]), 1, False)
    expected = np.array([orjson.loads(text) for text in texts], dtype=np.float64)
    assert parsed is not None
    assert np.array_equal(parsed.chosen.view(np.int64), expected.view(np.int64))  # -0.0 and every last bit included
    assert np.array_equal(parsed.top[:, 0].view(np.int64), expected.view(np.int64))


@pytest.mark.parametrize("text", [b"-0.03448649", b"0", b"-0", b"-0.0", b"9999", b"-9999.0", b"1E+2", b"1e-7",
                                  b"123456789012345", b"1234567890123456789", b"0.1234567890123456789",
                                  b"1e22", b"1e23", b"1e-22", b"1e-23", b"-1.7976931348623157e308",
                                  b"5e-324", b"123456789012345678901234567890", b"0.000000000000000000000000001",
                                  b"-0e0", b"-0.0e5"])
def test_edge_numbers_match_orjson(text: bytes) -> None:
    parsed = ingest_fast.parse_fast(reply([b"-1.5", text]), 0, False)
    expected = float(orjson.loads(text))
    assert parsed is not None
    assert parsed.chosen[1] == expected and np.signbit(parsed.chosen[1]) == np.signbit(expected)


TWO = [b"-1.5", b"-2.5"]


def outcome(parse: Any) -> Any:
    """A Sample's tokens and stored arrays (as text: NaN equals NaN there), or the cause of the TransientError it
    raised."""
    try:
        sample = parse()
    except TransientError as exc:
        return exc.cause
    return repr([sample.tokens, sample.token_logprobs.tolist(), sample.top_logprobs.tolist()])


@pytest.mark.parametrize(("chosen", "top", "why"), [
    ([b"-1.5", b"NaN"], [TWO, TWO], "not JSON: only the stdlib reads NaN"),
    ([b"-1.5", b"-2"], [TWO, [b"-Infinity", b"-3"]], "not JSON: only the stdlib reads -Infinity"),
    ([b"-1.5", b"1e999"], [TWO, TWO], "beyond float64"),
    ([b"-1.5", b"true"], [TWO, TWO], "not a number, though numpy reads it as 1.0"),
    ([b"-1.5", b"-2"], [TWO, [b"null", b"-3"]], "null, which numpy reads as NaN"),
    ([b"-1.5", b"-2"], [TWO, [b"-2"]], "rows of unequal length (llama.cpp)"),
])
def test_what_the_fast_path_does_not_read_the_slow_path_decides(chosen: list[bytes], top: list[list[bytes]],
                                                                why: str) -> None:
    body = reply(chosen, top)
    options: dict[str, Any] = {"problem_id": "p", "sample_id": 0, "latency_s": 0.0, "keep_top_logprobs": True,
                               "expect_top_logprobs": 2}
    assert ingest_fast.parse_fast(body, 2, False) is None, why
    slow = outcome(lambda: ingest.sample_of(ingest._parse_slow(body, 2, False), **options))
    assert outcome(lambda: ingest.parse_completion(body, **options)) == slow


def test_a_process_that_parses_a_completion_loads_no_compiled_loops() -> None:
    script = ("import sys\n"
              "from tracevote.sampling.ingest import parse_completion\n"
              "sample = parse_completion(sys.stdin.buffer.read(), problem_id='p', sample_id=0, latency_s=0.0,\n"
              "                          keep_top_logprobs=True, expect_top_logprobs=1)\n"
              "print(len(sample.tokens), 'numba' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", script], input=reply([b"-0.5", b"-1"], [[b"-0.5"], [b"-1"]]),
                            capture_output=True, timeout=hang_guard_s(), check=True)
    assert result.stdout.split() == [b"2", b"False"]


LOGPROBS = st.one_of(st.floats(-30, 0), st.sampled_from([0.0, -0.0, -9999.0, -9999.5, -1e300, np.nan, np.inf,
                                                          -np.inf, -1e-45, 3.4e38, 3.5e38]))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 6).flatmap(lambda k: st.lists(st.tuples(LOGPROBS, st.lists(LOGPROBS, min_size=k, max_size=k)),
                                                    max_size=12).map(lambda rows: (k, rows))),
       st.booleans())
def test_stored_measures_are_the_stores_own_bit_for_bit(case: tuple[int, list], keep_top: bool) -> None:
    k, rows = case
    chosen = np.array([row[0] for row in rows], dtype=np.float64)
    top = np.array([row[1] for row in rows], dtype=np.float64).reshape(len(rows), k)
    token_logprobs, confidence, top_logprobs = ingest_fast.stored_measures(chosen, top, keep_top)
    with np.errstate(over="ignore"):  # 3.5e38 rounds to float32's inf: absent, as the store has it
        expected_logprobs, expected_top = clean_logprobs(chosen), clean_logprobs(top)
        expected = token_confidence(top, chosen).astype(np.float32)
    assert np.array_equal(token_logprobs, expected_logprobs, equal_nan=True)
    assert np.array_equal(confidence.view(np.int32)[~np.isnan(expected)], expected.view(np.int32)[~np.isnan(expected)])
    assert np.array_equal(np.isnan(confidence), np.isnan(expected))
    assert (top_logprobs is None) if not keep_top else np.array_equal(top_logprobs, expected_top, equal_nan=True)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(LOGPROBS, min_size=3, max_size=3), min_size=1, max_size=8))
def test_rows_best_first_is_what_sorting_would_leave_unchanged(rows: list[list[float]]) -> None:
    top = np.array(rows, dtype=np.float64)
    unchanged = ingest_fast._best_first_order(top) is None
    order = np.argsort(-top, axis=1, kind="stable")
    assert unchanged == np.array_equal(np.take_along_axis(top, order, axis=1), top, equal_nan=True)
