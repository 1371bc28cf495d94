"""to_sample decodes a sample's tokens once and slices the text: the same tokens as decoding each token's bytes
alone, and the same error where a token's byte length cuts a character (a corrupt payload)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracevote.store import codec
from tracevote.store.records import Sample

SMILE = "\U0001f600".encode()  # 4 bytes
HIGH, LOW = "\ud83d".encode("utf-8", "surrogatepass"), "\ude00".encode("utf-8", "surrogatepass")


def one_by_one(source: bytes, lengths: list[int]) -> list[str]:
    """What to_sample did before: each token's bytes decoded on their own."""
    ends = np.cumsum(np.array(lengths, dtype=np.int64)).tolist()
    return [source[end - n:end].decode("utf-8", errors="surrogatepass") for end, n in zip(ends, lengths, strict=True)]


def outcome(cut, source: bytes, lengths: list[int]) -> list[str] | tuple[str, str]:
    try:
        return cut(source, lengths)
    except UnicodeDecodeError as error:
        return ("UnicodeDecodeError", str(error))


def sliced(source: bytes, lengths: list[int]) -> list[str]:
    return codec._tokens(np.frombuffer(source, np.uint8), np.array(lengths, dtype=np.uint16))


@pytest.mark.parametrize(("source", "lengths", "expected"), [
    (b"", [], []),
    (b"ab", [1, 1], ["a", "b"]),
    (b"a" + SMILE + b"b", [1, 4, 1], ["a", "\U0001f600", "b"]),
    ("é€".encode(), [2, 3], ["é", "€"]),
    (b"ab", [0, 2, 0], ["", "ab", ""]),
    (HIGH + LOW + b"x", [3, 4], ["\ud83d", "\ude00x"]),  # a character split across tokens, as ingest stores it
    (b"abc", [1, 1], ["a", "b"]),  # lengths short of the bytes
])
def test_tokens_are_the_ones_each_decoded_alone_gives(source: bytes, lengths: list[int], expected: list[str]) -> None:
    assert sliced(source, lengths) == one_by_one(source, lengths) == expected


@pytest.mark.parametrize(("source", "lengths"), [
    ("é".encode(), [1, 1]),  # a cut inside a two-byte character
    (SMILE, [2, 2]),
    (b"a" + SMILE, [2, 3]),
    (b"ab\xff", [1, 2]),  # bytes that are no UTF-8
])
def test_a_length_that_cuts_a_character_raises_as_before(source: bytes, lengths: list[int]) -> None:
    with pytest.raises(UnicodeDecodeError) as raised:
        one_by_one(source, lengths)
    assert outcome(sliced, source, lengths) == ("UnicodeDecodeError", str(raised.value))


pieces = st.sampled_from([b"a", b"Z", b" ", "é".encode(), "€".encode(), SMILE, HIGH, LOW, b"\x80", b"\xff", b""])


@given(st.lists(pieces, max_size=12).map(b"".join), st.lists(st.integers(0, 6), max_size=12))
def test_any_bytes_and_cuts_give_what_decoding_each_token_gave(source: bytes, lengths: list[int]) -> None:
    assert outcome(sliced, source, lengths) == outcome(one_by_one, source, lengths)


def test_to_sample_of_a_payload_whose_lengths_cut_a_character_raises() -> None:
    sample = Sample(problem_id="p", sample_id=0, text="é", tokens=["é"], token_logprobs=np.zeros(1, np.float32),
                    top_logprobs=None, top_tokens=None, token_confidence=None, answer=None, finish_reason="stop",
                    prompt_tokens=1, completion_tokens=1, latency_s=0.0, reasoning="")
    decoded = codec.decode(codec.encode(sample))
    assert codec.to_sample(decoded).tokens == ["é"]
    cut = dataclasses.replace(decoded, blobs={**decoded.blobs, "token_lens": np.array([1, 1], np.uint16)})
    with pytest.raises(UnicodeDecodeError):
        codec.to_sample(cut)
