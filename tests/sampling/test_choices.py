"""Several traces from one reply (sampling.choices): each choice parsed as a lone reply is, a failed choice failing
alone, the usage counted once and split, a reply that cannot be read asked for again; over real HTTP against the
simulator, and on the real llama.cpp server's recorded reply to n=3."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import orjson
import pytest

from tests.sampling.test_client import model_config
from tracevote.core.config_deepconf import DecodingConfig
from tracevote.core.config_endpoints import SimConfig
from tracevote.core.profiles import PROFILES
from tracevote.core.retry import TransientError
from tracevote.sampling.choices import one_choice_bodies, parse_choices, sample_choices, split_evenly
from tracevote.sampling.client import ChatClient
from tracevote.sampling.ingest import parse_completion
from tracevote.sim.model import SimModel
from tracevote.sim.nchoices import complete_n
from tracevote.sim.server import ServerOptions, running_server
from tracevote.store.records import Sample

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "llamacpp"
SIM = SimConfig(seed=3, signal=1.0, accuracy=0.5, mean_tokens=80)
DECODING = DecodingConfig(temperature=0.7, top_p=None, max_tokens=200, top_logprobs=5, seed=None)
MESSAGES = [{"role": "user", "content": "What is 6 * 7?\n\nPlease reason step by step."}]


def sim_reply(n: int, first: int = 0) -> bytes:
    """The simulator's reply to one request for n choices from sample `first` on (local profile: vLLM's rules)."""
    request = {"model": "m", "messages": MESSAGES, "logprobs": True, "top_logprobs": 5, "max_tokens": 200,
               "temperature": 0.7}
    return complete_n(SimModel(SIM), request, f"p/{first}", n, degrade="none", kind="solve",
                      profile=PROFILES["local"])


def spaced(body: bytes) -> bytes:
    """The reply as OpenAI lays it out (spaces, new lines): not the compact layout, so read by a full parse."""
    return json.dumps(orjson.loads(body), indent=1).encode()


LAYOUTS = pytest.mark.parametrize("layout", [bytes, spaced], ids=["compact", "spaced"])


def parse(body: bytes, ids: list[int]) -> dict[int, Sample | TransientError]:
    return parse_choices(body, problem_id="p", sample_ids=ids, latency_s=0.5, keep_top_logprobs=True,
                         expect_top_logprobs=5)


@LAYOUTS
def test_each_choice_is_the_sample_a_lone_reply_gives_with_the_prompt_split(layout: Callable[[bytes], bytes]) -> None:
    body = sim_reply(3, first=4)
    samples = parse(layout(body), [4, 5, 6])
    usage = orjson.loads(body)["usage"]
    for index, sample_id in enumerate([4, 5, 6]):
        lone_body = orjson.dumps({**orjson.loads(body), "choices": [orjson.loads(body)["choices"][index]]})
        lone = parse_completion(lone_body, problem_id="p", sample_id=sample_id, latency_s=0.5,
                                keep_top_logprobs=True, expect_top_logprobs=5)
        sample = samples[sample_id]
        assert isinstance(sample, Sample) and sample.sample_id == sample_id
        assert (sample.text, sample.tokens, sample.answer) == (lone.text, lone.tokens, lone.answer)
        np.testing.assert_array_equal(sample.token_confidence, lone.token_confidence)
        assert sample.completion_tokens == sample.n_tokens
    assert sum(s.prompt_tokens for s in samples.values()) == usage["prompt_tokens"]  # counted once
    assert sum(s.completion_tokens for s in samples.values()) == usage["completion_tokens"]


@LAYOUTS
def test_a_choice_without_logprobs_or_cut_short_fails_alone(layout: Callable[[bytes], bytes]) -> None:
    doc = orjson.loads(sim_reply(3))
    doc["choices"][1]["logprobs"] = None
    doc["choices"][2]["finish_reason"] = "content_filter"
    outcomes = parse(layout(orjson.dumps(doc)), [0, 1, 2])
    assert isinstance(outcomes[0], Sample)
    assert isinstance(outcomes[1], TransientError) and outcomes[1].cause == "missing logprobs"
    assert isinstance(outcomes[2], TransientError) and outcomes[2].cause == "finish_reason content_filter"
    assert outcomes[0].prompt_tokens == doc["usage"]["prompt_tokens"]  # the only trace kept bears the prompt


@LAYOUTS
def test_a_reply_that_cannot_be_read_or_whose_every_choice_failed_raises(layout: Callable[[bytes], bytes]) -> None:
    body = layout(sim_reply(2))
    with pytest.raises(TransientError, match="truncated body"):
        parse(body[: len(body) // 2], [0, 1])
    doc = orjson.loads(body)
    for choice in doc["choices"]:
        choice["logprobs"] = None
    with pytest.raises(TransientError, match="missing logprobs"):
        parse(layout(orjson.dumps(doc)), [0, 1])


@LAYOUTS
def test_the_real_llamacpp_server_answers_n_3_with_one_choice(layout: Callable[[bytes], bytes]) -> None:
    reply = json.loads((FIXTURES / "chat_n3.json").read_text(encoding="utf-8"))["reply"]
    outcomes = parse(layout(orjson.dumps(reply)), [0, 1, 2])
    assert isinstance(outcomes[0], Sample) and outcomes[0].prompt_tokens == reply["usage"]["prompt_tokens"]
    assert [o.cause for o in (outcomes[1], outcomes[2])] == ["fewer choices than n"] * 2  # type: ignore[union-attr]


def test_a_kept_raw_reply_holds_its_own_choice_only() -> None:
    body = sim_reply(2)
    bodies = one_choice_bodies(body, [7, 8])
    for index, sample_id in enumerate([7, 8]):
        doc = orjson.loads(bodies[sample_id])
        assert len(doc["choices"]) == 1 and doc["choices"][0]["index"] == 0
        assert doc["choices"][0]["message"] == orjson.loads(body)["choices"][index]["message"]


@pytest.mark.parametrize(("total", "parts"), [(10, 4), (0, 3), (7, 1), (5, 8)])
def test_split_evenly_adds_up(total: int, parts: int) -> None:
    shares = split_evenly(total, parts)
    assert sum(shares) == total and len(shares) == parts and max(shares) - min(shares) <= 1


def test_one_request_over_http_gives_the_traces_lone_requests_give() -> None:
    model = SimModel(SIM)
    with running_server(model, options=ServerOptions(profile="local")) as url:
        client = ChatClient(model_config(url, profile=PROFILES["local"]), DECODING, api_key=None, timeout_s=30,
                            max_retries=0)
        with client:
            outcomes, raw, raw_ids = sample_choices(client, MESSAGES, problem_id="p", sample_ids=[2, 3, 4],
                                           keep_top_logprobs=True)
            lone = {sid: client.sample(MESSAGES, problem_id="p", sample_id=sid, keep_top_logprobs=True)
                    for sid in (2, 3, 4)}
    assert raw.simulated and len(orjson.loads(raw.body)["choices"]) == 3 and raw_ids == [2, 3, 4]
    for sid, sample in outcomes.items():
        assert isinstance(sample, Sample)
        assert (sample.text, sample.tokens) == (lone[sid].text, lone[sid].tokens)
        np.testing.assert_array_equal(sample.token_logprobs, lone[sid].token_logprobs)
