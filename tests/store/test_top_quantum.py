"""The top-k as format 3 stores it: every value within logprobs.top_error_bound, absent ones absent, the chosen
token's own entry exact; format-2 pools (float16 top-k) still read exactly as they did."""

from __future__ import annotations

import dataclasses
import io
import shutil
from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.bench_pool import at_vllm_precision, responses
from tests.conftest import FIXTURES
from tests.store.test_framing_codec import make_sample
from tracevote.sampling.ingest import parse_completion
from tracevote.store import codec
from tracevote.store.interchange import export_pool
from tracevote.store.logprobs import TOP_SCALE, TOP_STEP, top_error_bound, top_from_steps, top_steps
from tracevote.store.pool import Pool
from tracevote.store.records import Sample

POOL_V2 = FIXTURES / "pool_v2"  # written by the format-2 encoder (commit 9587072) with its export lines

logprob = st.floats(min_value=-9998.0, max_value=1.0, width=32)


@st.composite
def top_rows(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """(top [n, k], chosen [n]) as a response gives them: rows best first (or not), some entries absent, the
    chosen logprob one of its row's entries, or another value, or absent."""
    n, k = draw(st.integers(0, 12)), draw(st.integers(0, 20))
    top = np.array(draw(st.lists(logprob, min_size=n * k, max_size=n * k)), dtype=np.float32).reshape(n, k)
    if draw(st.booleans()):
        top = -np.sort(-top, axis=1)
    top[np.array(draw(st.lists(st.booleans(), min_size=n * k, max_size=n * k)), dtype=bool).reshape(n, k)] = np.nan
    chosen = np.array(draw(st.lists(logprob, min_size=n, max_size=n)), dtype=np.float32)
    for i in range(n):
        how = draw(st.sampled_from(["entry", "other", "absent"]))
        if how == "entry" and k:
            chosen[i] = top[i, draw(st.integers(0, k - 1))]
        elif how == "absent":
            chosen[i] = np.nan
    return top, chosen


def stored(top: np.ndarray, chosen: np.ndarray) -> np.ndarray:
    arrays = top_steps(top, chosen)
    return top_from_steps(arrays["top_steps"], arrays.get("top_absent"), chosen, TOP_STEP, TOP_SCALE).T


def assert_within_bound(back: np.ndarray, top: np.ndarray, chosen: np.ndarray) -> None:
    present = ~np.isnan(top)
    assert back.dtype == np.float32 and back.shape == top.shape
    assert np.array_equal(~np.isnan(back), present)
    assert (np.abs(back.astype(np.float64) - top) <= top_error_bound(top, chosen))[present].all()


@settings(max_examples=300, deadline=None)
@given(top_rows())
def test_every_stored_value_is_within_the_bound(rows: tuple[np.ndarray, np.ndarray]) -> None:
    top, chosen = rows
    back = stored(top, chosen)
    assert_within_bound(back, top, chosen)
    own = top == chosen[:, None]
    assert np.array_equal(back[own], top[own])  # the chosen token's own entry is exact


@pytest.mark.parametrize(("distance", "bound"), [(0.0, 4.9e-4), (1.0, 9.8e-4), (10.0, 5.4e-3), (30.0, 1.52e-2)])
def test_the_bound_is_2_to_the_minus_11_of_one_nat_plus_the_distance(distance: float, bound: float) -> None:
    chosen = np.array([-0.25], dtype=np.float32)
    top = chosen[:, None] - np.float32(distance)
    assert top_error_bound(top, chosen)[0, 0] == pytest.approx(bound, rel=0.01)


def test_best_first_rows_led_by_the_chosen_token_store_zero_then_rising_levels() -> None:
    rng = np.random.default_rng(1)
    top = -np.sort(rng.exponential(3.0, (500, 20)), axis=1).astype(np.float32)
    steps = top_steps(top, top[:, 0])["top_steps"]
    assert steps.dtype == np.uint16 and steps.shape == (20, 500)
    assert not steps[0].any() and not (steps % 2).any()  # zigzag: even means a step up (or none)


def test_values_far_apart_take_wide_steps_and_stay_within_the_bound() -> None:
    top = np.array([[1e30, -9998.0, -1e-30], [3e38, -3e38, 0.0]], dtype=np.float32)
    chosen = np.array([-9998.0, 0.0], dtype=np.float32)
    assert top_steps(top, chosen)["top_steps"].dtype == np.uint32
    assert_within_bound(stored(top, chosen), top, chosen)


def vllm_precision_samples() -> list[Sample]:
    """Simulated responses with every logprob a float32 of full digits, as vLLM prints them, ingested."""
    bodies = [at_vllm_precision(body, i) for i, body in enumerate(responses(3, 300))]
    return [parse_completion(body, problem_id="p", sample_id=i, latency_s=0.0, keep_top_logprobs=True,
                             expect_top_logprobs=20) for i, body in enumerate(bodies)]


def test_ingested_vllm_precision_responses_keep_the_bound_and_exact_confidence() -> None:
    for sample in vllm_precision_samples():
        back = codec.to_sample(codec.decode(codec.encode(sample)))
        assert_within_bound(back.top_logprobs, sample.top_logprobs, sample.token_logprobs)
        assert np.array_equal(back.token_confidence, sample.token_confidence)  # C_i as ingestion computed it
        assert np.array_equal(back.token_logprobs, sample.token_logprobs)


def header_of(payload: bytes) -> dict:
    return codec._header(memoryview(payload))[0]


def test_a_payload_with_top_k_is_format_3_and_one_without_is_format_2() -> None:
    with_top, without = header_of(codec.encode(make_sample())), header_of(codec.encode(make_sample(keep_top=False)))
    assert (with_top["v"], with_top["top_quantum"]) == (3, [TOP_STEP, TOP_SCALE])
    assert without["v"] == 2 and "top_quantum" not in without


def test_an_unknown_version_is_refused() -> None:
    payload = codec.encode(make_sample(keep_top=False))
    header = header_of(payload)
    changed = orjson.dumps({**header, "v": 4})
    with pytest.raises(ValueError, match="unknown sample format version 4"):
        codec.decode(codec.HEAD.pack(codec.MAGIC, len(changed), codec.zlib.crc32(changed)) + changed +
                     payload[codec.HEAD.size + len(orjson.dumps(header)):])


def test_a_format_2_pool_exports_exactly_what_the_format_2_code_exported() -> None:
    pool = Pool(POOL_V2)
    assert {header_of(bytes(p))["v"] for pid in ("p1", "p2") for _, p in pool.iter_payloads(pid)} == {2}
    out = io.BytesIO()
    export_pool(pool, ["p1", "p2"], out)
    assert out.getvalue() == (POOL_V2 / "expected.jsonl").read_bytes()


def test_format_3_samples_appended_to_a_format_2_pool_read_beside_the_old_ones(tmp_path: Path) -> None:
    shutil.copytree(POOL_V2, tmp_path / "pool")
    pool = Pool(tmp_path / "pool")
    old = next(s for s in pool.iter_samples("p1") if s.sample_id == 0)
    with pool.writer("p1") as writer:
        writer.append(9, codec.encode(dataclasses.replace(old, sample_id=9)))
    new = next(s for s in pool.iter_samples("p1") if s.sample_id == 9)
    assert_within_bound(new.top_logprobs, old.top_logprobs, old.token_logprobs)
    traces = pool.read_problem("p1", 10)
    assert traces.sample_ids.tolist() == [0, 1, 2, 9]
    first, last = (traces.token_confidence[a:b] for a, b in ((0, traces.offsets[1]), traces.offsets[-2:]))
    assert np.array_equal(first, last)  # C_i is stored as it is in both formats


def test_every_fixture_sample_rewritten_as_format_3_keeps_the_bound() -> None:
    pool = Pool(POOL_V2)
    kept = [s for pid in ("p1", "p2") for s in pool.iter_samples(pid) if s.top_logprobs is not None]
    assert len(kept) == 3 and any(np.isnan(s.top_logprobs).any() for s in kept)  # absent entries included
    for sample in kept:
        back = codec.to_sample(codec.decode(codec.encode(sample)))
        assert_within_bound(back.top_logprobs, sample.top_logprobs, sample.token_logprobs)
        assert np.array_equal(back.token_confidence, sample.token_confidence)
