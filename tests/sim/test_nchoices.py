"""The simulated server's `n` over HTTP: n choices, each the lone reply of its own sample key, the prompt counted
once; one choice where the profile's provider or --ignore-n says n is not honoured; n refused where OpenAI
refuses it, and with a stream."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import requests

from tracevote.core.config_endpoints import SimConfig
from tracevote.core.simulated import SAMPLE_HEADER
from tracevote.sim.model import SimModel
from tracevote.sim.nchoices import choice_keys
from tracevote.sim.server import ServerOptions, running_server

SIM = SimConfig(seed=1, signal=1.0, accuracy=0.5, mean_tokens=60)
BODY = {"model": "m", "messages": [{"role": "user", "content": "What is 9 + 4?"}], "logprobs": True,
        "top_logprobs": 3, "max_tokens": 150, "temperature": 0.8}


def post(url: str, key: str | None, **fields: Any) -> requests.Response:
    headers = {SAMPLE_HEADER: key} if key else {}
    return requests.post(f"{url}/chat/completions", data=orjson.dumps({**BODY, **fields}), headers=headers,
                         timeout=30)


def test_n_choices_are_the_lone_replies_of_their_own_keys_and_the_prompt_is_counted_once() -> None:
    with running_server(SimModel(SIM), options=ServerOptions(profile="local")) as url:
        shared = post(url, "q/5", n=3).json()
        lone = [post(url, f"q/{s}").json() for s in (5, 6, 7)]
    assert [choice["index"] for choice in shared["choices"]] == [0, 1, 2]
    for choice, alone in zip(shared["choices"], lone, strict=True):
        assert choice["message"] == alone["choices"][0]["message"]
        assert choice["logprobs"] == alone["choices"][0]["logprobs"]
    assert shared["usage"]["prompt_tokens"] == lone[0]["usage"]["prompt_tokens"]
    assert shared["usage"]["completion_tokens"] == sum(r["usage"]["completion_tokens"] for r in lone)
    assert shared["usage"]["total_tokens"] == shared["usage"]["prompt_tokens"] + shared["usage"]["completion_tokens"]


@pytest.mark.parametrize(("profile", "ignore_n"), [("local", True), ("deepseek", False),
                                                   ("llama-cpp-python", False)])
def test_a_server_that_does_not_honour_n_answers_one_choice(profile: str, ignore_n: bool) -> None:
    with running_server(SimModel(SIM), options=ServerOptions(profile=profile, ignore_n=ignore_n)) as url:
        reply = post(url, "q/0", n=4).json()
        lone = post(url, "q/0").json()
    assert len(reply["choices"]) == 1 and reply["choices"][0]["message"] == lone["choices"][0]["message"]


def test_refuse_n_answers_as_llama_server_does() -> None:
    with running_server(SimModel(SIM), options=ServerOptions(profile="local", refuse_n=True)) as url:
        refused, lone = post(url, "q/0", n=2), post(url, "q/0", n=1)
    assert refused.status_code == 500 and refused.json()["error"]["message"] == "Only one completion choice is allowed"
    assert lone.status_code == 200


@pytest.mark.parametrize(("fields", "status", "words"), [
    ({"n": 0}, 400, "n: 0 must be between 1 and 128"),
    ({"n": 129}, 400, "must be between 1 and 128"),
    ({"n": "2"}, 422, "n: expected an integer"),
    ({"n": 2, "stream": True}, 400, "not supported with stream"),
])
def test_n_is_refused_where_it_cannot_be_served(fields: dict[str, Any], status: int, words: str) -> None:
    with running_server(SimModel(SIM), options=ServerOptions(profile="local")) as url:
        reply = post(url, "q/0", **fields)
    assert reply.status_code == status and words in reply.json()["error"]["message"]


def test_a_nologprobs_fault_strikes_only_the_last_choice() -> None:
    from tracevote.sim.faults import parse_faults
    from tracevote.sim.server import start_server, stop_server

    server = start_server(SimModel(SIM), parse_faults("nologprobs=1.0"), ServerOptions(profile="local"))
    try:
        reply = post(server.base_url, "q/0", n=3).json()
        stats = server.stats.snapshot()
    finally:
        stop_server(server)
    assert [("logprobs" in choice) for choice in reply["choices"]] == [True, True, False]
    assert stats["choices"] == {"q/0": 1, "q/1": 1, "q/2": 1}


def test_choice_keys() -> None:
    assert choice_keys("p/4", 3) == ["p/4", "p/5", "p/6"]
    assert choice_keys("probe/n", 2) == ["probe/n", "probe/n#1"]
    assert choice_keys(None, 2) == [None, None]
