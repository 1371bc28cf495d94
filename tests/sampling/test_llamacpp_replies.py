"""Real replies of llama.cpp's server (llama-cpp-python 0.3.36) running the shipped tinymath model, recorded by
train/record_engine_replies.py into tests/fixtures/llamacpp/: what the engine does, checked without it.

Each case states one behaviour seen there, and the reply goes through tracevote's own parser.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from tracevote.answers.extract import extract_answer
from tracevote.sampling.ingest import _parse_slow, parse_completion
from tracevote.sampling.ingest_fast import parse_fast

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "llamacpp"


def load(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


def choice(name: str) -> dict[str, Any]:
    return load(name)["reply"]["choices"][0]


def rows(name: str) -> list[list[dict[str, Any]]]:
    return [entry["top_logprobs"] for entry in choice(name)["logprobs"]["content"]]


def test_a_reply_parses_into_the_sample_the_engine_meant() -> None:
    fixture = load("chat_top20")
    reply = fixture["reply"]
    sample = parse_completion(orjson.dumps(reply), problem_id="tinymath-0", sample_id=0, latency_s=0.0,
                              keep_top_logprobs=True, expect_top_logprobs=20)
    content = reply["choices"][0]["logprobs"]["content"]
    assert sample.text == reply["choices"][0]["message"]["content"] == "".join(entry["token"] for entry in content)
    assert sample.tokens == [entry["token"] for entry in content]
    assert sample.finish_reason == "stop"  # the model's <|end|> is the GGUF's end-of-sequence token
    assert sample.completion_tokens == reply["usage"]["completion_tokens"] == len(content)
    assert sample.answer == extract_answer(sample.text) is not None


def test_the_streamed_reply_is_the_same_trace_with_logprobs_per_chunk_and_no_usage() -> None:
    streamed, plain = load("chat_top20_stream"), choice("chat_top20")
    chunks = [chunk["choices"][0] for chunk in streamed["reply"]]
    assert chunks[0]["delta"] == {"role": "assistant"} and chunks[-1]["finish_reason"] == "stop"
    assert "".join(chunk["delta"].get("content", "") for chunk in chunks) == plain["message"]["content"]  # seeded
    entries = [entry for chunk in chunks if chunk["logprobs"] for entry in chunk["logprobs"]["content"]]
    expected = plain["logprobs"]["content"]
    assert [(e["token"], e["logprob"]) for e in entries] == [(e["token"], e["logprob"]) for e in expected]
    # subtle: the top entries differ from the unstreamed reply's in the sixth decimal
    assert np.allclose([t["logprob"] for e in entries for t in e["top_logprobs"]],
                       [t["logprob"] for e in expected for t in e["top_logprobs"]], atol=1e-4)
    assert streamed["done"] and not any("usage" in chunk for chunk in streamed["reply"])


def test_top_logprobs_rows_hold_k_entries_an_empty_token_among_them() -> None:
    """The trained model's rows: k entries, best first; a control token (<|end|>) appears with empty text."""
    for name, k in (("chat_top20", 20), ("chat_top3", 3)):
        assert {len(row) for row in rows(name)} == {k}
    assert any(entry["token"] == "" for row in rows("chat_top20") for entry in row)


def test_with_random_weights_rows_are_unsorted_longer_or_shorter_than_asked() -> None:
    """An untrained model of the same shape shows what the trained one hides: rows are built from a dict keyed by
    token text, so they are not ordered best first, the chosen token is appended when it is not among the top k
    (k + 1 entries), and tokens of equal text (empty, or cut at 32 bytes) collapse into one entry (fewer than k)."""
    top3 = rows("random_weights_chat_top3")
    assert max(len(row) for row in top3) == 4
    top20 = rows("random_weights_chat_top20")
    assert min(len(row) for row in top20) < 20
    assert any([entry["logprob"] for entry in row] != sorted((entry["logprob"] for entry in row), reverse=True)
               for row in top20)


def test_n_is_ignored_unknown_arguments_accepted_and_system_messages_dropped_by_the_template() -> None:
    assert len(load("chat_n3")["reply"]["choices"]) == 1
    assert load("chat_unknown_arg")["status"] == 200
    system, plain = load("chat_system")["reply"], load("chat_top20")["reply"]
    assert system["usage"]["prompt_tokens"] == plain["usage"]["prompt_tokens"]


def test_a_cut_reply_says_length_and_a_reply_without_logprobs_has_none() -> None:
    cut = load("chat_length")["reply"]
    assert cut["choices"][0]["finish_reason"] == "length" and cut["usage"]["completion_tokens"] == 5
    assert choice("chat_no_logprobs")["logprobs"] is None


def test_an_unsorted_or_longer_row_keeps_its_k_best_entries_best_first() -> None:
    """The engine's rows are sorted before they are cut to k, so column 0 is each token's best alternative and the
    k kept are the k best (the random-weights reply has rows out of order and rows of k + 1)."""
    reply = load("random_weights_chat_top3")["reply"]
    sample = parse_completion(orjson.dumps(reply), problem_id="p", sample_id=0, latency_s=0.0,
                              keep_top_logprobs=True, expect_top_logprobs=3)
    raw = rows("random_weights_chat_top3")
    expected = np.full((len(raw), 3), np.nan)
    for i, row in enumerate(raw):
        best = sorted((entry["logprob"] for entry in row), reverse=True)[:3]
        expected[i, : len(best)] = best
    values = [[entry["logprob"] for entry in row] for row in raw]
    assert any(row != sorted(row, reverse=True) for row in values) and any(len(row) > 3 for row in values)
    np.testing.assert_allclose(sample.top_logprobs, expected.astype(np.float32), rtol=1e-6)


def test_both_parse_paths_sort_rows_that_are_all_one_entry_too_long() -> None:
    """A compact reply whose every row holds k + 1 entries out of order takes the fast path; the slow path (a full
    parse) must agree with it, tokens of the top entries included."""
    rng = np.random.default_rng(3)
    content = []
    for i in range(40):
        logprobs = rng.uniform(-8.0, 0.0, size=4).round(4).tolist()
        content.append({"token": f"t{i}", "logprob": logprobs[2], "bytes": None,
                        "top_logprobs": [{"token": f"c{i}_{j}", "logprob": value, "bytes": None}
                                         for j, value in enumerate(logprobs)]})
    reply = {"id": "x", "object": "chat.completion", "model": "m",
             "choices": [{"index": 0, "message": {"role": "assistant", "content": "".join(c["token"] for c in content)},
                          "logprobs": {"content": content}, "finish_reason": "stop"}],
             "usage": {"prompt_tokens": 5, "completion_tokens": 40, "total_tokens": 45}}
    body = orjson.dumps(reply)
    fast = parse_fast(body, 3, True)
    slow = _parse_slow(body, 3, True)
    assert fast is not None
    np.testing.assert_array_equal(fast.top, slow.top)
    assert fast.top_tokens == slow.top_tokens
    for row, top, names in zip(content, fast.top, fast.top_tokens, strict=True):
        ranked = sorted(row["top_logprobs"], key=lambda entry: -entry["logprob"])[:3]
        assert top.tolist() == [entry["logprob"] for entry in ranked]
        assert names == [entry["token"] for entry in ranked]


def test_the_top_logprobs_count_asked_is_honoured_past_openais_20_and_0_means_one() -> None:
    """Rows hold k entries for k = 5, 20 and 25 (past OpenAI's cap of 20; tokens of equal text make a row shorter),
    k + 1 for k = 1 when the chosen token is outside the best one, and one entry for k = 0, not none."""
    assert {len(row) for row in rows("chat_top0")} == {1}
    assert {len(row) for row in rows("chat_top1")} == {1, 2}
    assert {len(row) for row in rows("chat_top5")} == {5}
    assert {len(row) for row in rows("chat_top25")} == {24, 25}
    assert load("chat_top25")["request"]["top_logprobs"] == 25


@pytest.mark.parametrize(("name", "k"), [("chat_top0", 0), ("chat_top1", 1), ("chat_top5", 5), ("chat_top25", 25)])
def test_each_count_parses_to_k_columns_best_first_the_same_on_both_paths(name: str, k: int) -> None:
    """Whatever the row length, the sample keeps k columns, the k best (NaN-padded where a row is shorter), and its
    confidence is minus the mean of the entries present (k = 0: minus the chosen token's logprob); the fast and
    the slow path agree where the fast one reads the reply (rows of unequal length send it to the slow one). All four
    are the same seeded trace, so they share their tokens."""
    body = orjson.dumps(load(name)["reply"])
    sample = parse_completion(body, problem_id="p", sample_id=0, latency_s=0.0, keep_top_logprobs=True,
                              expect_top_logprobs=k)
    expected = np.full((len(rows(name)), k), np.nan)
    for i, row in enumerate(rows(name)):
        best = sorted((entry["logprob"] for entry in row), reverse=True)[:k]
        expected[i, : len(best)] = best
    np.testing.assert_allclose(sample.top_logprobs, expected.astype(np.float32), rtol=1e-6)
    chosen = np.array([entry["logprob"] for entry in choice(name)["logprobs"]["content"]])
    wanted = -np.nanmean(expected, axis=1) if k else -chosen
    np.testing.assert_allclose(sample.token_confidence, wanted.astype(np.float32), rtol=1e-5)
    fast, slow = parse_fast(body, k, True), _parse_slow(body, k, True)
    ragged = len({len(row) for row in rows(name)}) > 1
    assert (fast is None) == ragged
    if fast is not None:
        np.testing.assert_array_equal(fast.top, slow.top)
        assert fast.top_tokens == slow.top_tokens
    assert sample.tokens == [entry["token"] for entry in choice("chat_top20")["logprobs"]["content"]]
