from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest

from tracevote.core.errors import DataError
from tracevote.store import codec, frame_writer, framing
from tracevote.store.logprobs import clean_logprobs, token_confidence, top_error_bound
from tracevote.store.records import Sample


def make_sample(n: int = 50, k: int = 5, *, sample_id: int = 0, tokens: list[str] | None = None,
                keep_top: bool = True, seed: int = 0) -> Sample:
    rng = np.random.default_rng(seed)
    tokens = tokens if tokens is not None else [["The", " answer", " is", " \\boxed{", "7", "}", " é", "∑"][i % 8]
                                                for i in range(n)]
    n = len(tokens)
    chosen = -rng.exponential(0.2, n).astype(np.float32)
    top = np.sort(rng.uniform(-20, 0, (n, k)), axis=1)[:, ::-1].astype(np.float32)
    if k:
        top[::7, -1] = np.nan  # absent (sentinel) entries
    return Sample(problem_id="p-1", sample_id=sample_id, text="".join(tokens), tokens=tokens,
                  token_logprobs=chosen, top_logprobs=top if keep_top else None,
                  top_tokens=None, token_confidence=None if keep_top else -chosen,
                  answer=7, finish_reason="stop", prompt_tokens=42, completion_tokens=n, latency_s=1.25)


@pytest.mark.parametrize(
    "sample",
    [make_sample(), make_sample(keep_top=False), make_sample(tokens=[]),
     make_sample(tokens=["\ufffd", "ab"]),  # tokens that do not concatenate to the text's bytes
     make_sample(n=3, k=0)],
    ids=["top-k", "confidence-only", "empty", "partial-utf8", "k=0"],
)
def test_codec_round_trip(sample: Sample) -> None:
    back = codec.to_sample(codec.decode(codec.encode(sample)))
    assert (back.problem_id, back.sample_id, back.answer, back.finish_reason) == ("p-1", 0, 7, "stop")
    assert (back.prompt_tokens, back.completion_tokens, back.latency_s) == (42, sample.n_tokens, 1.25)
    assert back.text == sample.text and back.tokens == sample.tokens
    np.testing.assert_array_equal(back.token_logprobs, sample.token_logprobs)
    if sample.top_logprobs is None:
        assert back.top_logprobs is None
        np.testing.assert_array_equal(back.token_confidence, sample.token_confidence)
    else:
        # quantised storage: within the stated bound, NaN (absent) stays NaN
        bound = top_error_bound(sample.top_logprobs, sample.token_logprobs)
        assert (np.abs(back.top_logprobs - sample.top_logprobs) <= bound)[~np.isnan(sample.top_logprobs)].all()
        assert np.array_equal(np.isnan(back.top_logprobs), np.isnan(sample.top_logprobs))


def test_codec_stores_exact_confidence_of_a_sample_without_it() -> None:
    sample = make_sample()
    stored = codec.decode(codec.encode(sample)).blobs["token_confidence"]
    exact = token_confidence(sample.top_logprobs, sample.token_logprobs)
    assert stored.dtype == np.float32
    np.testing.assert_allclose(stored, exact, rtol=1e-7)


def test_score_fields_read_only_the_confidence_block() -> None:
    sample = make_sample(n=400)
    payload = bytearray(codec.encode(sample, raw=b"{}"))
    header, first_block = codec._header(memoryview(payload))
    sizes = {entry[0]: entry[1] for entry in header["blocks"]}
    assert list(sizes) == ["confidence", "text", "top", "extra"]
    payload[first_block + sizes["confidence"]:] = bytes(len(payload) - first_block - sizes["confidence"])
    fields = codec.score_fields(payload)  # text, top-k and raw zeroed out: never read
    assert (fields.sample_id, fields.finish_reason, fields.candidates.boxed) == (0, "stop", 7)
    np.testing.assert_allclose(fields.confidence, token_confidence(sample.top_logprobs, sample.token_logprobs),
                               rtol=1e-7)
    with pytest.raises(ValueError, match="block 'text' is cut short or corrupt"):
        codec.decode(payload)


def test_score_fields_re_extract_candidates_of_another_extract_version(monkeypatch: pytest.MonkeyPatch) -> None:
    payload = codec.encode(make_sample(tokens=["so ", r"\boxed{12}"]))
    monkeypatch.setattr(codec, "EXTRACT_VERSION", codec.EXTRACT_VERSION + 1)
    assert codec.score_fields(payload).candidates.boxed == 12


@pytest.mark.parametrize("reasoning", ["", r"first \boxed{\frac{1}{2}} é"], ids=["content-only", "split"])
def test_text_fields_give_back_the_text_and_the_reasoning(reasoning: str) -> None:
    sample = dataclasses.replace(make_sample(tokens=["so ", r"\boxed{12}"]), reasoning=reasoning)
    fields = codec.text_fields(codec.encode(sample))
    assert (fields.sample_id, fields.text, fields.reasoning, fields.finish_reason) == (
        0, r"so \boxed{12}", reasoning, "stop")


def test_corrupt_header_is_an_error() -> None:
    payload = bytearray(codec.encode(make_sample()))
    payload[20] ^= 0xFF
    with pytest.raises(ValueError, match="header is cut short or corrupt"):
        codec.score_fields(payload)


def test_raw_response_is_kept_when_asked() -> None:
    payload = codec.encode(make_sample(), raw=b'{"id": "x"}')
    assert codec.decode(payload).blobs["raw"].tobytes() == b'{"id": "x"}'


def test_sentinels_become_absent() -> None:
    cleaned = clean_logprobs(np.array([-0.5, -9999.0, -10000.0, np.inf, -np.inf, np.nan, 0.0]))
    assert cleaned[0] == np.float32(-0.5) and cleaned[-1] == 0.0
    assert np.isnan(cleaned[1:6]).all()


def write_frames(path: Path, ids: list[int]) -> None:
    with frame_writer.FrameWriter(path) as writer:
        for sample_id in ids:
            writer.append(sample_id, codec.encode(make_sample(sample_id=sample_id, seed=sample_id)))


@pytest.mark.parametrize("cut", [1, 5, 13, 17, 100])
def test_torn_tail_is_ignored_then_truncated(tmp_path: Path, cut: int) -> None:
    log = tmp_path / "p.tvf"
    write_frames(log, [0, 1, 2])
    whole = log.stat().st_size
    with open(log, "r+b") as handle:  # a kill in the middle of the last frame's write
        handle.truncate(whole - cut)
    assert [sid for sid, _ in framing.iter_payloads(log)] == [0, 1]

    with frame_writer.FrameWriter(log) as writer:
        assert writer.torn_bytes > 0
        assert writer.keys == {0, 1}
        writer.append(2, codec.encode(make_sample(sample_id=2)))
    assert [sid for sid, _ in framing.iter_payloads(log)] == [0, 1, 2]


def test_corrupt_tail_bytes_fail_the_checksum(tmp_path: Path) -> None:
    log = tmp_path / "p.tvf"
    write_frames(log, [0, 1])
    with open(log, "r+b") as handle:
        handle.seek(-3, os.SEEK_END)
        handle.write(b"\x00\x00\x00")
    frames = framing.scan(log)
    assert [f.key for f in frames] == [0]


def test_duplicate_sample_ids_keep_the_first(tmp_path: Path) -> None:
    log = tmp_path / "p.tvf"
    with frame_writer.FrameWriter(log) as writer:
        writer.append(4, b"first")
        writer.append(4, b"second")
    assert list(framing.iter_payloads(log)) == [(4, b"first")]


def test_one_writer_at_a_time(tmp_path: Path) -> None:
    log = tmp_path / "p.tvf"
    with frame_writer.FrameWriter(log), pytest.raises(DataError, match="another process is writing"):
        frame_writer.FrameWriter(log)
