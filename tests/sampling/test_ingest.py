"""API JSON -> Sample: values survive, sentinels become NaN, broken bodies raise with the right cause."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import orjson
import pytest

from tracevote.answers.extract import extract_answer
from tracevote.core.config_endpoints import SimConfig
from tracevote.core.retry import TransientError
from tracevote.sampling import ingest, ingest_fast
from tracevote.sampling.ingest import parse_completion
from tracevote.sim.model import SimModel
from tracevote.store.logprobs import token_confidence
from tracevote.store.records import Sample

MODEL = SimModel(SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=150))
PROMPT = "Find x.\n\nPlease reason step by step, and put your final answer within \\boxed{}."


def sim_body(key: str = "p/0", *, degrade: Any = "none", **overrides: Any) -> bytes:
    request = {"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": PROMPT}],
               "temperature": 0.6, "max_tokens": 1024, "logprobs": True, "top_logprobs": 20, **overrides}
    return MODEL.complete_bytes(request, key, degrade=degrade)


def parse(body: bytes, k: int = 20, **options: Any) -> Sample:
    settings = {"keep_top_logprobs": True, "keep_top_tokens": False, **options}
    return parse_completion(body, problem_id="p", sample_id=3, latency_s=0.25, expect_top_logprobs=k, **settings)


def assert_same(a: Sample, b: Sample) -> None:
    for name in ("problem_id", "sample_id", "text", "tokens", "top_tokens", "answer", "finish_reason",
                 "prompt_tokens", "completion_tokens", "latency_s"):
        assert getattr(a, name) == getattr(b, name), name
    for name in ("token_logprobs", "top_logprobs", "token_confidence"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None and y is None) or np.array_equal(x, y, equal_nan=True), name


def test_values_round_trip_from_the_json() -> None:
    body = sim_body()
    doc = orjson.loads(body)
    items = doc["choices"][0]["logprobs"]["content"]
    sample = parse(body, keep_top_tokens=True)
    assert sample.text == doc["choices"][0]["message"]["content"]
    assert sample.tokens == [item["token"] for item in items]
    assert sample.token_logprobs.dtype == np.float32 and sample.top_logprobs.dtype == np.float32
    assert np.array_equal(sample.token_logprobs, np.float32([item["logprob"] for item in items]))
    expected_top = np.float32([[e["logprob"] for e in item["top_logprobs"]] for item in items])
    assert np.array_equal(sample.top_logprobs, expected_top)
    assert sample.top_tokens == [[e["token"] for e in item["top_logprobs"]] for item in items]
    assert (sample.prompt_tokens, sample.completion_tokens) == (doc["usage"]["prompt_tokens"], len(items))
    assert sample.finish_reason == "stop" and sample.latency_s == 0.25
    assert sample.answer == extract_answer(sample.text) is not None
    exact = token_confidence(np.array([[e["logprob"] for e in item["top_logprobs"]] for item in items]),
                             np.array([item["logprob"] for item in items]))
    assert np.array_equal(sample.token_confidence, exact.astype(np.float32))


def test_without_top_logprobs_only_token_confidence_is_kept() -> None:
    body = sim_body()
    full, slim = parse(body), parse(body, keep_top_logprobs=False)
    assert slim.top_logprobs is None and slim.token_confidence.dtype == np.float32
    assert np.array_equal(slim.token_confidence, full.token_confidence)


def reorder(item: dict[str, Any]) -> dict[str, Any]:
    return {"top_logprobs": item["top_logprobs"], "bytes": item["bytes"], "logprob": item["logprob"],
            "token": item["token"]}


def rewrite(body: bytes, dump: Any = orjson.dumps, item: Any = None) -> bytes:
    doc = orjson.loads(body)
    if item is not None:
        lp = doc["choices"][0]["logprobs"]
        lp["content"] = [item(x) for x in lp["content"]]
    return dump(doc)


LAYOUTS = {
    "spaces (stdlib json.dumps)": lambda b: rewrite(b, lambda d: json.dumps(d).encode()),
    "indented": lambda b: rewrite(b, lambda d: json.dumps(d, indent=1, ensure_ascii=False).encode()),
    "top_logprobs first": lambda b: rewrite(b, item=reorder),
    "no bytes": lambda b: rewrite(b, item=lambda x: {k: v for k, v in x.items() if k != "bytes"}),
    "logprobs after finish_reason": lambda b: rewrite(b, lambda d: orjson.dumps(
        {**d, "choices": [{k: d["choices"][0][k] for k in ("index", "message", "finish_reason", "logprobs")}]})),
}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_layout_gives_the_same_sample(layout: str) -> None:
    body = sim_body("p/5")
    assert ingest_fast.parse_fast(body, 20, False) is not None  # the sim writes DeepSeek's layout
    for options in ({"keep_top_tokens": True}, {"keep_top_logprobs": False}):
        assert_same(parse(LAYOUTS[layout](body), **options), parse(body, **options))


def float32_in_full(item: dict[str, Any]) -> dict[str, Any]:
    """An item's logprobs as vLLM prints them: a float32 widened to float64, ~17 digits (read by orjson)."""
    def widened(entry: dict[str, Any]) -> dict[str, Any]:
        return {**entry, "logprob": float(np.float32(entry["logprob"]))}
    return {**widened(item), "top_logprobs": [widened(entry) for entry in item["top_logprobs"]]}


@pytest.mark.parametrize("numbers", ["short (read by the compiled reader)", "float32 in full (read by orjson)"])
@pytest.mark.parametrize("k", [0, 1, 20])
def test_fast_and_slow_paths_agree(k: int, numbers: str) -> None:
    body = sim_body("p/6", top_logprobs=k)
    if numbers.startswith("float32"):
        body = rewrite(body, item=float32_in_full)
    fast, slow = ingest_fast.parse_fast(body, k, True), ingest._parse_slow(body, k, True)
    assert fast is not None
    assert (fast.text, fast.tokens, fast.top_tokens, fast.usage) == (slow.text, slow.tokens, slow.top_tokens,
                                                                     slow.usage)
    assert np.array_equal(fast.chosen, slow.chosen) and np.array_equal(fast.top, slow.top, equal_nan=True)


def handmade(tokens: list[str], chosen: list[Any], top: list[list[Any]], *, finish: str = "stop") -> dict:
    items = [{"token": t, "logprob": lp, "bytes": list(t.encode()),
              "top_logprobs": [{"token": f"alt{j}", "logprob": v, "bytes": []} for j, v in enumerate(row)]}
             for t, lp, row in zip(tokens, chosen, top, strict=True)]
    return {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "".join(tokens)},
                         "logprobs": {"content": items}, "finish_reason": finish}],
            "usage": {"prompt_tokens": 5, "completion_tokens": len(tokens), "total_tokens": 5 + len(tokens)}}


def test_sentinels_and_non_finite_values_become_nan() -> None:
    doc = handmade(["a", "b", "c"], [-0.5, -9999, float("nan")],
                   [[-0.5, -9999.0], [-1e5, float("-inf")], [-0.25, -1.5]])
    sample = parse(json.dumps(doc).encode(), k=2)  # NaN and -Infinity: only the stdlib accepts them
    assert np.array_equal(sample.token_logprobs, np.float32([-0.5, np.nan, np.nan]), equal_nan=True)
    assert np.array_equal(sample.top_logprobs, np.float32([[-0.5, np.nan], [np.nan, np.nan], [-0.25, -1.5]]),
                          equal_nan=True)


def test_temperature_zero_responses_keep_only_the_zero() -> None:
    sample = parse(sim_body(temperature=0.0))
    assert (sample.token_logprobs == 0).all()
    assert (sample.top_logprobs[:, 0] == 0).all() and np.isnan(sample.top_logprobs[:, 1:]).all()


@pytest.mark.parametrize(("sent", "expected"), [(3, 5), (8, 5), (5, 5)])
def test_top_logprobs_are_padded_or_cut_to_k(sent: int, expected: int) -> None:
    doc = handmade(["a", "b"], [-0.1, -0.2], [[-0.1 * (j + 1)] * sent for j in range(2)])
    for body in (orjson.dumps(doc), json.dumps(doc).encode()):
        top = parse(body, k=expected).top_logprobs
        assert top.shape == (2, expected)
        assert np.isnan(top[:, min(sent, expected):]).all() and not np.isnan(top[:, :min(sent, expected)]).any()


def test_awkward_token_strings_survive_the_fast_path() -> None:
    tokens = ['"logprob":', "\\", '\\"', "{", "}]", "\u00e9\u4e2d", "\n", ":", "a,b", '","logprob":-1,',
              'n":"', '{"token":"x', "long " * 30, "", "\u2028\t"]
    doc = handmade(tokens, [-0.1] * len(tokens), [[-0.1, -2.0]] * len(tokens))
    body = orjson.dumps(doc)
    assert ingest_fast.parse_fast(body, 2, True) is not None
    sample = parse(body, k=2, keep_top_tokens=True)
    assert sample.tokens == tokens
    assert sample.text == "".join(tokens)
    assert np.array_equal(sample.top_logprobs, np.float32([[-0.1, -2.0]] * len(tokens)))


def drop_choices(body: bytes) -> bytes:
    return orjson.dumps({**orjson.loads(body), "choices": []})


def edit_choice(**changes: Any) -> Any:
    def edit(body: bytes) -> bytes:
        doc = orjson.loads(body)
        doc["choices"][0].update(changes)
        return orjson.dumps(doc)
    return edit


def without_usage(body: bytes) -> bytes:
    return orjson.dumps({k: v for k, v in orjson.loads(body).items() if k != "usage"})


def empty_top(body: bytes) -> bytes:
    return rewrite(body, item=lambda x: {**x, "top_logprobs": []})


BROKEN = [
    ("cut in half", lambda b: b[: len(b) // 2], "truncated body"),
    ("empty", lambda b: b"", "truncated body"),
    ("proxy page", lambda b: b[: len(b) // 2] + b"\r\n<html>502 Bad Gateway</html>", "malformed JSON"),
    ("corrupt number", lambda b: b.replace(b'"logprob":', b'"logprob":-1x', 1), "malformed JSON"),
    ("html", lambda b: b"<html>oops</html>", "malformed JSON"),
    ("no choices", drop_choices, "no choices"),
    ("not an object", lambda b: b"[1, 2]", "no choices"),
    ("logprobs null", edit_choice(logprobs=None), "missing logprobs"),
    ("no top-k entries", empty_top, "missing logprobs"),
    ("no usage", without_usage, "no usage"),
    ("server gave up", edit_choice(finish_reason="insufficient_system_resource"),
     "finish_reason insufficient_system_resource"),
]


@pytest.mark.parametrize(("name", "breaks", "cause"), BROKEN, ids=[case[0] for case in BROKEN])
def test_broken_responses_raise_transient_errors_with_their_cause(name: str, breaks: Any, cause: str) -> None:
    with pytest.raises(TransientError) as caught:
        parse(breaks(sim_body()))
    assert caught.value.cause == cause


@pytest.mark.parametrize(("degrade", "cause"), [("nologprobs", "missing logprobs"),
                                                ("sentinel", "sentinel logprobs")])
def test_degraded_sim_responses_raise(degrade: str, cause: str) -> None:
    with pytest.raises(TransientError) as caught:
        parse(sim_body(degrade=degrade))
    assert caught.value.cause == cause


def test_truncated_trace_is_a_valid_sample_without_a_box() -> None:
    sample = parse(sim_body(max_tokens=30))
    assert sample.finish_reason == "length" and sample.n_tokens == 30
    assert "\\boxed" not in sample.text
