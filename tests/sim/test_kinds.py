"""Kinds of call: the solve responses pinned byte for byte, and the X-Tracevote-Kind marker end to end."""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import requests

from tracevote.core.config_deepconf import DecodingConfig
from tracevote.core.config_endpoints import ModelConfig, SimConfig
from tracevote.core.errors import FatalAPIError
from tracevote.core.retry import Backoff
from tracevote.core.simulated import KIND_HEADER, SAMPLE_HEADER, SOLVE
from tracevote.critique.critic_prompt import CRITIC
from tracevote.critique.prompts import CRITIQUE
from tracevote.debate.prompts import ANSWER, RANK, REVISE
from tracevote.sampling.client import ChatClient
from tracevote.sampling.prompts import Prompt, build_messages, solve_prompt
from tracevote.sim.kinds import KNOWN_KINDS, UnknownKindError, register_kind, unregister_kind
from tracevote.sim.model import SimModel
from tracevote.sim.render import Degrade
from tracevote.sim.request import SimRequest
from tracevote.sim.server import SimServer, start_server, stop_server

CFG = SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=120)
ANSWERS = {"Find x.": 42, "Find the number of primes below 30.": 10}
TEMPLATE = "{problem}\n\nPlease reason step by step, and put your final answer within \\boxed{{}}."
BUILT_IN = {SOLVE, ANSWER, REVISE, RANK, CRITIQUE, CRITIC}  # solve, the debate, critique and grading critic kinds


def request(problem: str = "Find the number of primes below 30.", system: str | None = None,
            **overrides: Any) -> dict[str, Any]:
    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": TEMPLATE.format(problem=problem)})
    return {"model": "deepseek-v4-flash", "messages": messages, "temperature": 0.6, "max_tokens": 1024,
            "logprobs": True, "top_logprobs": 20, **overrides}


# sha256 of the bodies the solve path wrote before kinds existed: a refactor must not change a byte. Made by
# running SimModel(CFG, ANSWERS).complete_bytes(body, key, degrade=...) at commit 520954e, the last before kinds
# (ece0c5e added the pins; re-run there for this note, same digests). A changed digest means the simulator draws
# other bytes for the same request: simulated pools and ledgers built before no longer match ones built now
# (stored calls are never redrawn), so change a pin only with a deliberate change to the simulator.
# test_pinned_bodies_hold_what_their_requests_ask checks the same bodies' content without the digests.
# Re-pinned once, deliberately, by issue 43: the model's name is part of every draw's seed (two names, two models).
PINNED = [
    (request(), "aime/0", "none", "89061c1312c87be04d487eac4f9f79c5410e08986300511bce620d8dff9040ad"),
    (request("Find x.", temperature=0.0), "aime/1", "none",
     "7715faf596cea832717ef7a6d51797cc05e547dfed76ef42fef6bc403049839b"),
    (request("Find x.", system="Be brief.", top_logprobs=5, max_tokens=40), "gsm/7", "none",
     "d4a20177959ff568fd524700b619dc4c27f0fcfee9a5841c967e2dde80a0874e"),
    (request("Problem 3.", logprobs=False, top_logprobs=0), "p/3", "none",
     "c35c2c23f9e09110f42549c6a74ff3891ceb47ab3be9919749fc28f65d7e61f6"),
    (request(top_logprobs=5), "aime/2", "sentinel", "33f2eb70817c0552c86e81ed27e4bf3b1ad5dfee29abae92f78941032342198d"),
]


@pytest.mark.parametrize(("body", "key", "degrade", "sha256"), PINNED,
                         ids=["top20-t0.6", "greedy", "system-top5-cut", "no-logprobs", "sentinel"])
def test_solve_responses_are_pinned_byte_for_byte(body: dict[str, Any], key: str, degrade: Any,
                                                  sha256: str) -> None:
    assert hashlib.sha256(SimModel(CFG, ANSWERS).complete_bytes(body, key, degrade=degrade)).hexdigest() == sha256


def check_logprobs(entries: list[dict[str, Any]], body: dict[str, Any], degrade: str) -> None:
    """Each entry's token, bytes and top-k as the request asked: k alternatives, all -9999 when degraded to the
    sentinel, the chosen token first when greedy."""
    for entry in entries:
        assert entry["bytes"] == list(entry["token"].encode("utf-8"))
        assert len(entry["top_logprobs"]) == body["top_logprobs"]
        if degrade == "sentinel":
            assert {entry["logprob"], *(top["logprob"] for top in entry["top_logprobs"])} == {-9999.0}
        elif body["temperature"] == 0.0:
            assert entry["top_logprobs"][0]["token"] == entry["token"]


@pytest.mark.parametrize(("body", "key", "degrade", "sha256"), PINNED,
                         ids=["top20-t0.6", "greedy", "system-top5-cut", "no-logprobs", "sentinel"])
def test_pinned_bodies_hold_what_their_requests_ask(body: dict[str, Any], key: str, degrade: Any,
                                                   sha256: str) -> None:
    document = orjson.loads(SimModel(CFG, ANSWERS).complete_bytes(body, key, degrade=degrade))
    choice, usage = document["choices"][0], document["usage"]
    assert document["model"] == body["model"] and choice["message"]["role"] == "assistant"
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    cut = usage["completion_tokens"] == body["max_tokens"]
    assert choice["finish_reason"] == ("length" if cut else "stop")
    assert cut or re.search(r"\\boxed\{\d+\}$", choice["message"]["content"])  # a finished trace answers
    if not body["logprobs"]:
        assert choice["logprobs"] is None
        return
    entries = choice["logprobs"]["content"]
    assert len(entries) == usage["completion_tokens"]
    assert "".join(entry["token"] for entry in entries) == choice["message"]["content"]
    check_logprobs(entries, body, degrade)


def toy(req: SimRequest, key: str | None, model: SimModel, *, degrade: Degrade) -> bytes:
    """A later method's kind, in miniature: a solve trace drawn from its own stream of the call key."""
    return model.solve(req, None if key is None else f"{key}/toy", degrade=degrade)


@pytest.fixture
def toy_kind() -> Iterator[str]:
    register_kind("toy", toy)
    try:
        yield "toy"
    finally:
        unregister_kind("toy")


@contextlib.contextmanager
def sim_server() -> Iterator[SimServer]:
    server = start_server(SimModel(CFG, ANSWERS))
    try:
        yield server
    finally:
        stop_server(server)


def client(base_url: str) -> ChatClient:
    model = ModelConfig(backend="openai", base_url=base_url, name="deepseek-v4-flash", extra_body={},
                        api_key_env="TRACEVOTE_TEST_KEY", needs_key=False, sim=CFG)
    return ChatClient(model, DecodingConfig(temperature=0.6, top_p=None, max_tokens=1024, top_logprobs=20),
                      api_key=None, timeout_s=5.0, max_retries=3, backoff=Backoff(initial_s=0.001, max_s=0.01))


def stats(server: SimServer) -> dict[str, Any]:
    return requests.get(server.base_url + "/_stats", timeout=5).json()


def post(server: SimServer, body: dict[str, Any], headers: dict[str, str]) -> requests.Response:
    """A bare POST, as curl or an old client sends it: only the headers given."""
    return requests.post(server.base_url + "/chat/completions", data=orjson.dumps(body), timeout=5,
                         headers={"Content-Type": "application/json", **headers})


def test_without_the_kind_header_a_call_is_a_solve_call() -> None:
    body = request()
    with sim_server() as server:
        bare = post(server, body, {SAMPLE_HEADER: "aime/0"})
        marked = client(server.base_url).complete_raw(body["messages"], sample_key="aime/0")
        seen = stats(server)
    assert bare.status_code == 200
    assert bare.content == marked.body == SimModel(CFG, ANSWERS).complete_bytes(body, "aime/0")
    assert seen["by_kind"] == {SOLVE: 2}


def test_an_unknown_kind_is_refused_at_once_naming_it_and_the_known_kinds() -> None:
    with sim_server() as server:
        bare = post(server, request(), {KIND_HEADER: "debate-revise"})
        with pytest.raises(FatalAPIError) as caught:
            client(server.base_url).complete_raw(request()["messages"], sample_key="q/0", kind="debate-revise")
        seen = stats(server)
    assert bare.status_code == 400
    error = bare.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["type"] == "invalid_request_error"
    assert "'debate-revise'" in error["message"]
    assert "knows: critic, critique, debate_answer, debate_rank, debate_revise, solve" in error["message"]
    assert caught.value.status == 400 and "'debate-revise'" in str(caught.value)
    assert seen["requests"] == 2 and seen["outcomes"] == {"400": 2}  # not retried
    assert seen["by_kind"] == {"debate-revise": 2}


def test_a_registered_kind_answers_through_the_server_and_the_client(toy_kind: str) -> None:
    messages = request()["messages"]
    with sim_server() as server:
        chat = client(server.base_url)
        solved = chat.complete_raw(messages, sample_key="aime/0")
        raw = chat.complete_raw(messages, sample_key="aime/0", kind=toy_kind)
        again = chat.complete_raw(messages, sample_key="aime/0", kind=toy_kind)
        sample, sampled = chat.sample_with_body(messages, problem_id="aime", sample_id=0, keep_top_logprobs=True,
                                                kind=toy_kind)
        seen = stats(server)
    assert raw.body == again.body == sampled.body != solved.body  # told apart by the marker alone, same text
    assert raw.body == SimModel(CFG, ANSWERS).complete_bytes(request(), "aime/0", kind=toy_kind)
    assert sample.n_tokens > 0
    assert seen["by_kind"] == {SOLVE: 1, toy_kind: 3}
    assert toy_kind in KNOWN_KINDS


def test_a_call_without_logprobs_round_trips_with_logprobs_null() -> None:
    with sim_server() as server:
        raw = client(server.base_url).complete_raw(request()["messages"], sample_key="q/0", logprobs=False,
                                                   max_tokens=64)
    document = orjson.loads(raw.body)
    assert document["choices"][0]["logprobs"] is None
    assert document["choices"][0]["message"]["content"] and document["usage"]["completion_tokens"] <= 64


def test_requests_are_counted_per_kind(toy_kind: str) -> None:
    messages = request()["messages"]
    with sim_server() as server:
        chat = client(server.base_url)
        for i in range(3):
            chat.complete_raw(messages, sample_key=f"a/{i}")
        for i in range(2):
            chat.complete_raw(messages, sample_key=f"a/{i}", kind=toy_kind, logprobs=False)
        post(server, request(), {})  # no key, no kind
        post(server, request(), {KIND_HEADER: "nope"})
        seen = stats(server)
    assert seen["by_kind"] == {SOLVE: 4, toy_kind: 2, "nope": 1}
    assert seen["requests"] == sum(seen["by_kind"].values()) == 7
    assert seen["outcomes"] == {"ok": 6, "400": 1}


@pytest.mark.parametrize(("name", "responder", "says"), [
    ("Solve Again", toy, "lower-case"),
    ("", toy, "lower-case"),
    ("solve", toy, "already has a responder"),
])
def test_bad_registrations_are_refused(name: str, responder: Any, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        register_kind(name, responder)
    assert set(KNOWN_KINDS) == BUILT_IN


def test_registering_the_same_responder_twice_is_harmless(toy_kind: str) -> None:
    register_kind(toy_kind, toy)
    with pytest.raises(ValueError, match="cannot be unregistered"):
        unregister_kind(SOLVE)
    assert set(KNOWN_KINDS) == BUILT_IN | {toy_kind}


def test_the_model_refuses_an_unknown_kind() -> None:
    with pytest.raises(UnknownKindError) as caught:
        SimModel(CFG).complete_bytes(request(), "a/0", kind="rank")
    assert caught.value.status == 400 and caught.value.kind == "rank"


def test_the_solve_prompt_names_its_kind() -> None:
    prompt = solve_prompt("Find x.", system="Be brief.")
    assert prompt == Prompt(SOLVE, build_messages("Find x.", system="Be brief."))
    assert prompt.kind in KNOWN_KINDS
    assert prompt.messages[-1]["content"] == TEMPLATE.format(problem="Find x.")
