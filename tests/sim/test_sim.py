"""The simulated model: DeepSeek's format, determinism, truncation, and a tunable confidence signal."""

from __future__ import annotations

import collections
import re
from concurrent.futures import ThreadPoolExecutor

import msgspec
import numpy as np
import orjson
import pytest

from tracevote.core.config_endpoints import SimConfig
from tracevote.core.simulated import FINGERPRINT_PREFIX
from tracevote.sim.model import SimModel
from tracevote.sim.request import SimRequestError

CFG = SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=120)
TEMPLATE = "{problem}\n\nPlease reason step by step, and put your final answer within \\boxed{{}}."
BOXED = re.compile(r"\\boxed\{(\d+)\}")


def request(problem: str = "Find the number of primes below 30.", **overrides: object) -> dict:
    return {"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": TEMPLATE.format(problem=problem)}],
            "temperature": 0.6, "max_tokens": 1024, "logprobs": True, "top_logprobs": 20, **overrides}


def choice(response: dict) -> dict:
    return response["choices"][0]


def boxed(text: str) -> int | None:
    found = BOXED.findall(text)
    return int(found[-1]) if found else None


class _Entry(msgspec.Struct):
    logprob: float


class _Item(msgspec.Struct):
    top_logprobs: list[_Entry]


class _Logprobs(msgspec.Struct):
    content: list[_Item]


class _Message(msgspec.Struct):
    content: str


class _Choice(msgspec.Struct):
    message: _Message
    logprobs: _Logprobs


class _Reply(msgspec.Struct):
    """The fields of a reply the confidence test reads; decoding only them costs a fifth of a dict per entry."""
    choices: list[_Choice]


REPLY = msgspec.json.Decoder(_Reply)


def trace_confidence(reply: _Reply) -> float:
    """The mean over a trace's tokens of C_i = -mean(top-k logprobs)."""
    items = reply.choices[0].logprobs.content
    return float(np.mean(-np.array([[e.logprob for e in item.top_logprobs] for item in items]).mean(axis=1)))


def auroc(positive: list[float], negative: list[float]) -> float:
    pos, neg = np.asarray(positive)[:, None], np.asarray(negative)[None, :]
    return float((pos > neg).mean() + 0.5 * (pos == neg).mean())


def test_same_key_same_response_whatever_the_order_and_threads() -> None:
    keys = [f"aime/{i}" for i in range(12)]
    in_order = {key: SimModel(CFG).complete_bytes(request(), key) for key in keys}
    model = SimModel(CFG)
    with ThreadPoolExecutor(4) as pool:
        shuffled = dict(zip(keys[::-1], pool.map(lambda k: model.complete_bytes(request(), k), keys[::-1]),
                            strict=True))
    assert shuffled == in_order
    assert len(set(in_order.values())) == len(keys)


def test_a_problem_is_drawn_once_per_model_and_answers_as_a_fresh_models() -> None:
    model = SimModel(CFG)
    replies = [model.complete_bytes(request(), f"aime/{i}") for i in range(3)]
    # the problem's draws (its p, distractors, weights) are kept: one draw, then reused
    assert (model._problem.cache_info().misses, model._problem.cache_info().hits) == (1, 2)
    assert replies == [SimModel(CFG).complete_bytes(request(), f"aime/{i}") for i in range(3)]


def test_without_a_key_each_prompt_counts_its_own_samples() -> None:
    first, second = SimModel(CFG), SimModel(CFG)
    other = request("Another problem.")
    got = [first.complete_bytes(request()), first.complete_bytes(other), first.complete_bytes(request())]
    assert got[0] == second.complete_bytes(request(), "#0") == SimModel(CFG).complete_bytes(request())
    assert got[1] == second.complete_bytes(other, "#0")
    assert got[2] == second.complete_bytes(request(), "#1") != got[0]


def test_the_seed_changes_every_response() -> None:
    reseeded = SimModel(SimConfig(seed=1, signal=1.0, accuracy=0.45, mean_tokens=120))
    assert reseeded.complete_bytes(request(), "a/0") != SimModel(CFG).complete_bytes(request(), "a/0")


def test_response_has_deepseek_chat_completion_format() -> None:
    response = SimModel(CFG).complete(request(model="any-model-name"), "a/0")
    assert set(response) == {"id", "object", "created", "model", "choices", "usage", "system_fingerprint"}
    assert response["object"] == "chat.completion"
    assert response["model"] == "any-model-name"
    assert response["system_fingerprint"].startswith(FINGERPRINT_PREFIX)
    c = choice(response)
    assert c["index"] == 0 and c["message"]["role"] == "assistant"
    items = c["logprobs"]["content"]
    assert "".join(item["token"] for item in items) == c["message"]["content"]
    usage = response["usage"]
    assert usage["completion_tokens"] == len(items)
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["prompt_cache_hit_tokens"] + usage["prompt_cache_miss_tokens"] == usage["prompt_tokens"]


def test_every_token_and_entry_is_well_formed() -> None:
    items = choice(SimModel(CFG).complete(request(), "a/1"))["logprobs"]["content"]
    for item in items:
        assert bytes(item["bytes"]) == item["token"].encode()
        top = item["top_logprobs"]
        values = [e["logprob"] for e in top]
        assert values == sorted(values, reverse=True)
        assert len({e["token"] for e in top}) == len(top)
        assert all(bytes(e["bytes"]) == e["token"].encode() for e in top)
        if item["token"] in {e["token"] for e in top}:
            assert {e["token"]: e["logprob"] for e in top}[item["token"]] == item["logprob"]
    chosen = np.array([item["logprob"] for item in items])
    assert np.median(chosen) > -0.01  # mostly sure of the chosen token
    assert (chosen <= 0).all()


@pytest.mark.parametrize("k", [0, 1, 5, 20])
def test_top_logprobs_has_k_entries(k: int) -> None:
    items = choice(SimModel(CFG).complete(request(top_logprobs=k), "a/0"))["logprobs"]["content"]
    assert {len(item["top_logprobs"]) for item in items} == {k}


def test_without_logprobs_the_field_is_null() -> None:
    response = SimModel(CFG).complete(request(logprobs=False, top_logprobs=0), "a/0")
    assert choice(response)["logprobs"] is None


def test_max_tokens_cuts_the_trace_before_its_box() -> None:
    model = SimModel(CFG)
    full = choice(model.complete(request(max_tokens=4096), "a/2"))
    cut = choice(model.complete(request(max_tokens=40), "a/2"))
    assert full["finish_reason"] == "stop" and boxed(full["message"]["content"]) is not None
    assert cut["finish_reason"] == "length"
    assert len(cut["logprobs"]["content"]) == 40
    assert "\\boxed" not in cut["message"]["content"]
    assert full["message"]["content"].startswith(cut["message"]["content"])  # the same trace, cut short
    assert full["logprobs"]["content"][:40] == cut["logprobs"]["content"]


def test_lengths_are_spread_around_mean_tokens() -> None:
    model = SimModel(SimConfig(seed=0, signal=0.0, accuracy=0.45, mean_tokens=300))
    # no logprobs asked: a trace's length is drawn before its tokens, the same with or without them
    lengths = [model.complete(request(max_tokens=8192, logprobs=False, top_logprobs=0), f"a/{i}")["usage"][
        "completion_tokens"] for i in range(60)]
    assert 200 < np.mean(lengths) < 420
    assert np.std(lengths) > 50


def test_gold_answers_come_from_the_mapping() -> None:
    answers = {"Find x.": 42, "Find y.": 7}
    always = SimModel(SimConfig(seed=0, signal=1.0, accuracy=1.0, mean_tokens=60), answers)
    never = SimModel(SimConfig(seed=0, signal=1.0, accuracy=0.0, mean_tokens=60), answers)
    for problem, gold in answers.items():
        assert always.gold_answer(TEMPLATE.format(problem=problem)) == gold
        right = [boxed(choice(always.complete(request(problem), f"p/{i}"))["message"]["content"]) for i in range(20)]
        wrong = [boxed(choice(never.complete(request(problem), f"p/{i}"))["message"]["content"]) for i in range(20)]
        assert right.count(gold) >= 17  # 1% of traces box nothing
        assert gold not in wrong
    assert always.gold_answer("Find x. (with a longer statement)") == 42  # matched by prefix


@pytest.mark.parametrize("gold", [0, 25, 999, 1000, 123456, -7])
def test_any_integer_gold_answer_is_boxed(gold: int) -> None:
    model = SimModel(SimConfig(seed=0, signal=1.0, accuracy=1.0, mean_tokens=40), {"Find z.": gold})
    texts = [choice(model.complete(request("Find z."), f"z/{i}"))["message"]["content"] for i in range(5)]
    assert any(text.endswith(f"\\boxed{{{gold}}}") for text in texts)


def test_unknown_problems_get_a_stable_pseudo_answer() -> None:
    golds = {SimModel(CFG).gold_answer(f"Problem {i}") for i in range(50)}
    assert golds <= set(range(1000)) and len(golds) > 40
    assert SimModel(CFG).gold_answer("Problem 3") == SimModel(CFG).gold_answer("Problem 3")


def test_majority_voting_fails_on_some_problems_and_not_others() -> None:
    model = SimModel(SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=60))
    majority_right = []
    for p in range(16):
        problem = f"Problem {p}."
        # no logprobs asked: the boxed answer is the same with or without them, at a third of the cost
        votes = collections.Counter(boxed(choice(model.complete(request(problem, logprobs=False, top_logprobs=0),
                                                                f"{p}/{i}"))["message"]["content"]) for i in range(32))
        majority_right.append(votes.most_common(1)[0][0] == model.gold_answer(problem))
    assert 0 < sum(majority_right) < len(majority_right)


def confidence_auroc(signal: float) -> float:
    model = SimModel(SimConfig(seed=2, signal=signal, accuracy=0.5, mean_tokens=60))
    right, wrong = [], []
    for p in range(10):
        problem = f"Problem {p}."
        for i in range(24):
            response = REPLY.decode(model.complete_bytes(request(problem), f"{p}/{i}"))
            correct = boxed(response.choices[0].message.content) == model.gold_answer(problem)
            (right if correct else wrong).append(trace_confidence(response))
    return auroc(right, wrong)


def test_confidence_tracks_correctness_as_strongly_as_signal_says() -> None:
    none, some, strong = (confidence_auroc(signal) for signal in (0.0, 1.0, 2.0))
    assert 0.38 < none < 0.62
    assert some > 0.62
    assert strong > some + 0.1


def test_temperature_zero_reports_like_deepseek() -> None:
    model = SimModel(CFG)
    response = model.complete(request(temperature=0.0), "a/0")
    for item in choice(response)["logprobs"]["content"]:
        assert item["logprob"] == 0.0
        assert [e["logprob"] for e in item["top_logprobs"]] == [0.0] + [-9999.0] * 19
        assert item["top_logprobs"][0]["token"] == item["token"]
    assert model.complete_bytes(request(temperature=0.0), "a/1") == orjson.dumps(response)  # one greedy trace


@pytest.mark.parametrize(("overrides", "status"), [
    ({"top_logprobs": 21}, 400),
    ({"temperature": 2.5}, 400),
    ({"max_tokens": 0}, 400),
    ({"messages": []}, 400),
    ({"temperature": "hot"}, 422),
    ({"logprobs": "yes"}, 422),
    ({"logprobs": False, "top_logprobs": 5}, 400),
])
def test_bad_requests_are_refused_with_deepseeks_status(overrides: dict, status: int) -> None:
    with pytest.raises(SimRequestError) as caught:
        SimModel(CFG).complete(request(**overrides), "a/0")
    assert caught.value.status == status


def test_a_long_response_runs_to_max_tokens() -> None:
    # its cost is measured by `make bench` (sim_response_ms_4096x20), never asserted here
    model = SimModel(SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=20000))
    body = orjson.loads(model.complete_bytes(request(max_tokens=4096), "a/0"))
    assert body["usage"]["completion_tokens"] == 4096
    assert len(body["choices"][0]["logprobs"]["content"]) == 4096
    assert body["choices"][0]["finish_reason"] == "length"


def test_a_pool_of_outlines_is_each_outline_drawn_alone() -> None:
    model = SimModel(SimConfig(seed=4, signal=1.0, accuracy=0.45, mean_tokens=40))
    keys = [str(k) for k in range(6)]
    batch = model.draw_outlines("Find 6 x 7.", keys, "sim")
    assert batch == [model.draw_outline("Find 6 x 7.", key, "sim") for key in reversed(keys)][::-1]
    assert len({(t.answer, t.length, t.z) for t in batch}) == len(keys)  # each key its own draw
