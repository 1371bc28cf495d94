"""Split thinking: replies whose server's reasoning parser moved the thinking out of `content`.

The fixtures (tests/fixtures/reasoning/, built by its build_split.py in each server's documented shape) hold one
generation sent with a reasoning parser and without one. Pools must keep the reasoning and the content, every
generated token's logprobs in order, and give the same confidences and answers either way.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import orjson
import pytest

from tests.sampling.test_client import SIM, make_client, messages, sim_server
from tests.sse_server import events, split_every
from tracevote.core.config_deepconf import DecodingConfig
from tracevote.core.retry import TransientError
from tracevote.sampling import ingest, ingest_fast
from tracevote.sampling.ingest import parse_completion
from tracevote.sampling.stream import Streamed, read_stream, stream_completion
from tracevote.sim.model import SimModel
from tracevote.store import codec
from tracevote.store.records import Sample

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "reasoning"
# (with a parser, the same generation without one)
PAIRS = [("vllm_parser", "vllm_no_parser"), ("sglang_parser", "vllm_no_parser"),
         ("vllm_parser_cut", "vllm_no_parser_cut")]


def reply(name: str) -> bytes:
    return (FIXTURES / f"{name}.json").read_bytes()


def sample_of(body: bytes) -> Sample:
    return parse_completion(body, problem_id="p", sample_id=0, latency_s=0.0, keep_top_logprobs=True,
                            expect_top_logprobs=20)


def message_of(body: bytes) -> dict[str, object]:
    return orjson.loads(body)["choices"][0]["message"]


def assert_same_tokens(split: Sample | object, plain: Sample) -> None:
    assert split.tokens == plain.tokens  # type: ignore[attr-defined]
    np.testing.assert_array_equal(split.token_logprobs, plain.token_logprobs)  # type: ignore[attr-defined]
    np.testing.assert_array_equal(split.token_confidence, plain.token_confidence)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("parsed", "unparsed"), PAIRS)
def test_a_parsers_reply_keeps_reasoning_content_and_every_tokens_logprobs(parsed: str, unparsed: str) -> None:
    split, plain = sample_of(reply(parsed)), sample_of(reply(unparsed))
    message = message_of(reply(parsed))
    assert split.reasoning == message.get("reasoning", message.get("reasoning_content"))
    assert split.text == (message["content"] or "")
    assert plain.reasoning == "" and plain.text.startswith("<think>")
    assert split.tokens[0] == "<think>" and len(split.tokens) == split.completion_tokens  # tags included, in order
    assert_same_tokens(split, plain)
    assert split.answer == plain.answer == 18  # the cut one's box is in its reasoning alone


@pytest.mark.parametrize("name", ["vllm_parser", "sglang_parser", "vllm_parser_cut"])
def test_the_fast_and_the_slow_path_read_the_reasoning_alike(name: str) -> None:
    body = reply(name)
    fast, slow = ingest_fast.parse_fast(body, 20, True), ingest._parse_slow(body, 20, True)
    assert fast is not None  # vLLM's and SGLang's compact layout: the fast path takes it
    assert (fast.text, fast.reasoning, fast.tokens) == (slow.text, slow.reasoning, slow.tokens)
    assert fast.reasoning
    np.testing.assert_array_equal(fast.chosen, slow.chosen)


@pytest.mark.parametrize(("parsed", "unparsed"), PAIRS)
def test_a_pool_record_scores_the_same_with_and_without_a_parser(parsed: str, unparsed: str) -> None:
    split, plain = sample_of(reply(parsed)), sample_of(reply(unparsed))
    split_fields, plain_fields = codec.score_fields(codec.encode(split)), codec.score_fields(codec.encode(plain))
    assert split_fields.candidates == plain_fields.candidates
    np.testing.assert_array_equal(split_fields.confidence, plain_fields.confidence)
    back = codec.to_sample(codec.decode(codec.encode(split)))
    assert (back.reasoning, back.text, back.tokens) == (split.reasoning, split.text, split.tokens)


def test_a_record_without_reasoning_holds_no_reasoning_array() -> None:
    payload = codec.encode(sample_of(reply("vllm_no_parser")))
    assert "reasoning" not in codec.decode(payload).blobs and codec.decode(payload).header["v"] == 3
    assert codec.to_sample(codec.decode(payload)).reasoning == ""


@pytest.mark.parametrize("name", ["vllm_parser", "sglang_parser", "vllm_no_parser"])
@pytest.mark.parametrize("split", [0, 1, 7, 500])
def test_a_parsers_stream_is_its_whole_reply(name: str, split: int) -> None:
    sse = (FIXTURES / f"{name}.sse").read_bytes()
    result = read_stream(events(sse) if split == 0 else split_every(sse, split), top_logprobs=20)
    whole = sample_of(reply(name))
    # SGLang strips the whole reply's texts, not the deltas
    assert (result.reasoning.strip(), result.text.strip()) == (whole.reasoning.strip(), whole.text.strip())
    assert result.reasoning if "parser" in name.replace("no_parser", "") else not result.reasoning
    assert_same_tokens(result, whole)


def sim_traces(reasoning_parser: str | None, *, stream: bool, max_tokens: int = 4096) -> list[Sample]:
    """Traces drawn through the real client from the simulator, with or without its reasoning parser."""
    decoding = DecodingConfig(temperature=0.6, top_p=None, max_tokens=max_tokens, top_logprobs=5)
    with sim_server(reasoning_parser=reasoning_parser) as server, \
            make_client(server.base_url, decoding=decoding) as client:
        if not stream:
            return [client.sample(messages(), problem_id="p", sample_id=i, keep_top_logprobs=True)
                    for i in range(4)]
        return [_as_sample(stream_completion(client, messages(), sample_key=f"p/{i}")) for i in range(4)]


def _as_sample(streamed: object) -> Sample:
    return Sample(problem_id="p", sample_id=0, text=streamed.text, tokens=streamed.tokens,  # type: ignore[attr-defined]
                  token_logprobs=streamed.token_logprobs, top_logprobs=None, top_tokens=None,  # type: ignore
                  token_confidence=streamed.token_confidence, answer=None, finish_reason="stop",  # type: ignore
                  prompt_tokens=0, completion_tokens=0, latency_s=0.0, reasoning=streamed.reasoning)  # type: ignore


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
@pytest.mark.parametrize("stream", [False, True])
def test_the_simulators_reasoning_parser_splits_the_same_traces(field: str, stream: bool) -> None:
    split, plain = sim_traces(field, stream=stream), sim_traces(None, stream=stream)
    for thought, whole in zip(split, plain, strict=True):
        assert thought.reasoning and thought.text.startswith("\n\nTherefore, the answer is")
        assert thought.reasoning + thought.text == whole.text and whole.reasoning == ""
        assert_same_tokens(thought, whole)
        split_record, plain_record = codec.score_fields(codec.encode(thought)), codec.score_fields(codec.encode(whole))
        assert split_record.candidates == plain_record.candidates and split_record.candidates.box_found


def test_a_simulated_trace_cut_while_thinking_has_no_content() -> None:
    split, plain = sim_traces("reasoning", stream=False, max_tokens=40), sim_traces(None, stream=False, max_tokens=40)
    for thought, whole in zip(split, plain, strict=True):
        assert thought.reasoning + thought.text == whole.text and thought.finish_reason == whole.finish_reason
        assert_same_tokens(thought, whole)
        assert thought.answer == whole.answer
    cut = [thought for thought in split if thought.finish_reason == "length"]
    assert cut and all(thought.text == "" and thought.reasoning for thought in cut)  # cut while thinking


def test_a_split_reply_without_logprobs_is_missing_logprobs_whole_or_streamed() -> None:
    """vLLM with include_reasoning false drops every logprob: no trace without confidences is kept."""
    doc = orjson.loads(reply("vllm_parser"))
    doc["choices"][0]["logprobs"] = None
    with pytest.raises(TransientError) as whole:
        sample_of(orjson.dumps(doc))
    sse = (FIXTURES / "vllm_parser.sse").read_bytes()
    chunks = [orjson.loads(line[6:]) for line in sse.split(b"\n") if line.startswith(b"data: {")]
    for chunk in chunks:
        for choice in chunk["choices"]:
            choice["logprobs"] = None
    bare = b"".join(b"data: " + orjson.dumps(chunk) + b"\n\n" for chunk in chunks) + b"data: [DONE]\n\n"
    with pytest.raises(TransientError) as streamed:
        read_stream([bare], top_logprobs=20)
    assert whole.value.cause == streamed.value.cause == "missing logprobs"


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_a_streams_thinking_is_read_as_its_answer_is(field: str) -> None:
    """The thinking's deltas and the answer's, read in one piece: the same tokens, the thinking apart."""
    model = SimModel(dataclasses.replace(SIM, mean_tokens=400))  # long enough for batches whatever the trace's draw
    request = {"model": "deepseek-v4-flash", "messages": messages(), "max_tokens": 4096, "logprobs": True,
               "top_logprobs": 5, "stream": True}

    def read(parser: str | None) -> Streamed:
        body = b"".join(event.data for event in model.stream(request, "p/1", reasoning_parser=parser))
        return read_stream([body], top_logprobs=5)

    split, plain = read(field), read(None)
    assert split.reasoning + split.text == plain.text and split.text.startswith("\n\nTherefore")
    assert_same_tokens(split, plain)
    assert split.chunks == plain.chunks > 150


def test_thinking_in_a_chunk_out_of_the_learned_layout_keeps_its_place() -> None:
    """A chunk whose `created` ticks leaves the layout the reader learned: its text is read one by one, after the
    thinking cut by the layout before it."""
    lines = (FIXTURES / "vllm_parser.sse").read_bytes().split(b"\n\n")
    for index in (12, 20):  # two chunks of thinking, each starting a layout of its own
        lines[index] = lines[index].replace(b'"created":1795732427', b'"created":1795732428')
    result = read_stream([b"\n\n".join(lines)], top_logprobs=20)
    whole = sample_of(reply("vllm_parser"))
    assert (result.reasoning, result.text) == (whole.reasoning, whole.text)
    assert_same_tokens(result, whole)
