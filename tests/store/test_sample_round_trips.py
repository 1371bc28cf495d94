"""Every field of a generated Sample survives the codec (encode -> decode -> to_sample) and the interchange format
(an export line read back by import, and a whole file through `pool import` then `pool export`)."""

from __future__ import annotations

import dataclasses
import string
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import FIXTURES
from tracevote.answers.extract import extract_answer
from tracevote.core.config import load_params
from tracevote.datasets.problems import Problem
from tracevote.sampling.prompts import setting_messages
from tracevote.store import codec
from tracevote.store.interchange import export_pool, import_file, parse_line, to_json_line
from tracevote.store.logprobs import top_error_bound
from tracevote.store.pool import Pool, Setting
from tracevote.store.records import Sample

NAN = float("nan")
ARRAYS = ("token_logprobs", "top_logprobs", "token_confidence")
FIELDS = ("problem_id", "sample_id", "text", "tokens", "top_tokens", "answer", "finish_reason", "prompt_tokens",
          "completion_tokens", "latency_s")

# What a parsed response holds: float32 logprobs, NaN where absent (a sentinel is NaN by then). The codec
# quantises the top-k (logprobs.top_steps): it comes back within logprobs.top_error_bound, not bit for bit.
logprob32 = st.one_of(st.floats(min_value=-9998.0, max_value=1.0, width=32), st.just(NAN))
ids = st.text(string.ascii_letters + string.digits + "._-", min_size=1, max_size=20)
counts = st.integers(min_value=0, max_value=2**32 - 1)
# A lone surrogate is half of a character split across tokens (ingest reads one where a server escapes it).
# The codec stores one in a token or the text, but not in top_tokens (kept as JSON) nor can an export line.
any_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=8)
with_surrogates = st.text(st.one_of(st.characters(exclude_categories=["Cs"]), st.characters(categories=["Cs"])),
                          max_size=8)


def float32s(draw: st.DrawFn, values: st.SearchStrategy[float], shape: tuple[int, ...]) -> np.ndarray:
    flat = draw(st.lists(values, min_size=int(np.prod(shape)), max_size=int(np.prod(shape))))
    return np.array(flat, dtype=np.float32).reshape(shape)


@st.composite
def samples(draw: st.DrawFn, text: st.SearchStrategy[str] = any_text, problem_ids: st.SearchStrategy[str] = ids
            ) -> Sample:
    """A Sample as ingest builds one: tokens (the text, or another text when they do not concatenate to it),
    C_i, and the top-k (with its tokens) or none; its answer is what the text gives."""
    tokens = draw(st.lists(text, max_size=12))
    n, k = len(tokens), draw(st.integers(min_value=0, max_value=5))
    joined = "".join(tokens)
    text_of_sample = draw(st.one_of(st.just(joined), text))
    # subtle: a JSON line has no row to carry the width of a zero-token top-k: (0, 5) reads back as (0, 0)
    top = draw(st.one_of(st.none(), st.just(k))) if n or k == 0 else None
    return Sample(
        problem_id=draw(problem_ids), sample_id=draw(counts), text=text_of_sample, tokens=tokens,
        token_logprobs=float32s(draw, logprob32, (n,)),
        top_logprobs=None if top is None else float32s(draw, logprob32, (n, k)),
        top_tokens=None if top is None else draw(st.lists(st.lists(any_text, min_size=k, max_size=k), min_size=n,
                                                          max_size=n)),
        token_confidence=float32s(draw, logprob32, (n,)), answer=extract_answer(text_of_sample),
        finish_reason=draw(st.sampled_from(["stop", "length", "content_filter"])), prompt_tokens=draw(counts),
        completion_tokens=draw(counts), latency_s=draw(st.floats(min_value=0.0, max_value=1e6)))


def assert_same_sample(back: Sample, sample: Sample, *, top_quantised: bool = False) -> None:
    """Every field equal; with `top_quantised` the top-k only within the codec's bound (absent ones still absent)."""
    for name in FIELDS:
        assert getattr(back, name) == getattr(sample, name), name
    for name in ARRAYS:
        got, want = getattr(back, name), getattr(sample, name)
        assert (got is None) == (want is None), name
        if want is None:
            continue
        assert got.dtype == np.float32 and got.shape == want.shape, name
        if top_quantised and name == "top_logprobs":
            assert np.array_equal(np.isnan(got), np.isnan(want))
            present = ~np.isnan(want)
            bound = top_error_bound(want, sample.token_logprobs)
            assert (np.abs(got - want)[present] <= bound[present]).all()
        else:
            assert np.array_equal(got, want, equal_nan=True), name


@settings(max_examples=150, deadline=None)
@given(samples(text=with_surrogates))
def test_the_codec_gives_back_every_field(sample: Sample) -> None:
    assert_same_sample(codec.to_sample(codec.decode(codec.encode(sample, keep_top_tokens=True))), sample,
                       top_quantised=True)


@settings(max_examples=50, deadline=None)
@given(samples())
def test_the_usage_read_from_the_header_is_the_samples(sample: Sample) -> None:
    usage = codec.usage_of(codec.encode(sample))
    assert (usage.prompt_tokens, usage.completion_tokens, usage.latency_s) == (
        sample.prompt_tokens, sample.completion_tokens, sample.latency_s)


@settings(max_examples=150, deadline=None)
@given(samples(), st.booleans())
def test_an_export_line_reads_back_as_the_sample(sample: Sample, simulated: bool) -> None:
    back, said_simulated = parse_line(to_json_line(sample, simulated=simulated), "line 1")
    assert said_simulated is simulated
    assert_same_sample(back, sample)


def as_stored(sample: Sample) -> Sample:
    return codec.to_sample(codec.decode(codec.encode(sample)))


def distinct(batch: list[Sample]) -> list[Sample]:
    """The first sample of each (problem, sample id): a pool holds one."""
    kept: dict[tuple[str, int], Sample] = {}
    for sample in batch:
        kept.setdefault((sample.problem_id, sample.sample_id), sample)
    return list(kept.values())


def imported_then_exported(batch: list[Sample], folder: Path) -> list[bytes]:
    """The batch written as an interchange file, imported into a new pool, exported again: its lines."""
    source = folder / "samples.jsonl"
    source.write_bytes(b"".join(to_json_line(sample, simulated=False) for sample in batch))
    problem_ids = sorted({sample.problem_id for sample in batch})
    pool = Pool.open_or_create(folder / "pools", Setting.from_params(load_params(FIXTURES / "params.yaml")),
                               simulated=False)
    problems = [Problem(problem_id, f"problem {problem_id}", 0) for problem_id in problem_ids]
    pool.register(setting_messages(problems, pool.setting))
    import_file(source, pool, problems, keep_top_logprobs=True, n_pool=None)
    out = folder / "exported.jsonl"
    with open(out, "wb") as handle:
        export_pool(pool, problem_ids, handle)
    return out.read_bytes().splitlines(keepends=True)


@settings(max_examples=25, deadline=None)
@given(st.lists(samples(problem_ids=st.sampled_from(["p-1", "p-2"])), min_size=1, max_size=4).map(distinct))
def test_pool_import_then_export_gives_the_same_lines(batch: list[Sample]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        exported = imported_then_exported(batch, Path(folder))
    # subtle: a pool keeps no top-k token strings: import checks a file's top_tokens, then stores none; and it
    # keeps the top-k quantised, as the codec gives it back
    expected = [to_json_line(dataclasses.replace(sample, top_tokens=None, top_logprobs=as_stored(sample).top_logprobs),
                             simulated=False) for sample in batch]
    assert sorted(exported) == sorted(expected)
