"""The compiled loops the streaming client's batch path still uses (sampling.kernels, through
ingest_fast.parse_items) against plain references: JSON numbers read exactly as orjson reads them (or refused), and
keys found wherever the bytes hold them. Goes with kernels.py when the stream's rewrite drops stream_fast."""

from __future__ import annotations

import re

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracevote.sampling import ingest_fast

FILLER = b'{"choices":[{"x":1,' * 2  # the keys the kernels find lie past a document's first 14 bytes


def read(texts: list[bytes], terminator: bytes = b",") -> np.ndarray | None:
    """Each text as a number after a colon, read by the fast path's number reader."""
    body = FILLER + b"".join(b'"v":' + text + terminator for text in texts)
    raw = np.frombuffer(body, dtype=np.uint8)
    colons = np.array([m.end() - 1 for m in re.finditer(rb'"v":', body)], dtype=np.int64)
    numbers = ingest_fast._read_numbers(body, raw, colons)
    return None if numbers is None else numbers[0]


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
                min_size=1, max_size=40),
       st.sampled_from([b",", b"}"]))
def test_numbers_are_read_bit_for_bit_as_orjson_reads_them(values: list[tuple[float, str]], terminator: bytes) -> None:
    texts = [as_written(value, form) for value, form in values]
    texts = [text for text in texts if b"inf" not in text]  # fixed/exponent forms of huge float32 widenings
    if not texts:
        return
    got = read(texts, terminator)
    expected = np.array([orjson.loads(text) for text in texts], dtype=np.float64)
    assert got is not None
    assert np.array_equal(got.view(np.int64), expected.view(np.int64))  # -0.0 and every last bit included


@pytest.mark.parametrize("text", [b"-0.03448649", b"0", b"-0", b"-0.0", b"9999", b"-9999.0", b"1E+2", b"1e-7",
                                  b"123456789012345", b"1234567890123456789", b"0.1234567890123456789",
                                  b"1e22", b"1e23", b"1e-22", b"1e-23", b"-1.7976931348623157e308",
                                  b"5e-324", b"123456789012345678901234567890", b"0.000000000000000000000000001",
                                  b"-0e0", b"-0.0e5"])
def test_edge_numbers_match_orjson(text: bytes) -> None:
    got = read([text])
    expected = orjson.loads(text)
    assert got is not None and got[0] == expected and np.signbit(got[0]) == np.signbit(expected)


@pytest.mark.parametrize("text", [b"01", b"-01", b"1.", b".5", b"+1", b"-", b"1e", b"1e+", b"NaN", b"Infinity",
                                  b"- 1", b"0x1", b"1.5.3", b"1e5.5", b'"1"', b"null", b"true", b"1 ",
                                  b"1e999999999"])  # orjson: "number is infinity"
def test_what_json_does_not_call_a_number_sends_the_document_to_the_slow_path(text: bytes) -> None:
    assert read([b"-1.5", text]) is None


FRAGMENTS = [b'"logprob":', b'_logprobs":', b'"top_logprobs":', b"logprob", b'logprob"', b"g", b":", b'"', b"\\\"",
             b"x", b"top", b"ogprobs", b"\n", b"12", b"g" * 9]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=60), st.integers(0, 15))
def test_keys_are_found_wherever_the_bytes_hold_them(fragments: list[bytes], shift: int) -> None:
    body = FILLER + b"y" * shift + b"".join(fragments)
    keys = ingest_fast._find_keys(np.frombuffer(body, dtype=np.uint8))
    logprob = [m.end() - 1 for m in re.finditer(rb'"logprob":', body)]
    top = [m.end() - 1 for m in re.finditer(rb'_logprobs":', body)]
    assert keys.logprob.tolist() == logprob and keys.top.tolist() == top
