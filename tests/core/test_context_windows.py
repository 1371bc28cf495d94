"""Issue 43 item 1: each endpoint's context window, each prompt's tokens counted offline, and the one-line refusal
of a setting whose largest request cannot fit."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURE_PARAMS, hang_guard_s
from tracevote.core.config import load_params
from tracevote.core.config_endpoints import ModelConfig
from tracevote.core.context_fit import ContextWindowError, Prompt, check_fit
from tracevote.core.context_windows import context_window, known_model
from tracevote.core.prompt_tokens import (
    BOUND_PER_MESSAGE_TOKENS,
    BOUND_TEMPLATE_TOKENS,
    prompt_tokens,
    text_tokens,
)
from tracevote.datasets.problems import Problem
from tracevote.debate.context import agent_prompts, judge_prompts
from tracevote.debate.protocol import Debate


@pytest.mark.parametrize(("name", "window"), [
    ("gpt-4", 8_192), ("gpt-4-0613", 8_192), ("gpt-4-32k", 32_768), ("gpt-4-turbo-2024-04-09", 128_000),
    ("gpt-3.5-turbo", 16_385), ("gpt-4o", 128_000), ("gpt-4o-mini-2024-07-18", 128_000), ("gpt-4.1", 1_047_576),
    ("gpt-4.1-nano", 1_047_576), ("gpt-5-nano", 400_000), ("o3-mini", 200_000), ("o4-mini-2025-04-16", 200_000),
    ("openai/gpt-oss-120b", 131_072), ("gpt-oss-20b", 131_072), ("deepseek-v4-flash", 1_048_576),
    ("deepseek-chat", 131_072),
    # not a dated snapshot of a known name: unknown, so unchecked (never a wrong window)
    ("gpt-4-turbo-preview", None), ("my-llama-8b", None), ("tracevote-sim", None), ("Qwen3-8B", None),
])
def test_a_known_name_has_its_documented_window(name: str, window: int | None) -> None:
    known = known_model(name)
    assert (known.window if known else None) == window


def test_a_setting_overrides_the_documented_window_and_says_so() -> None:
    assert context_window("gpt-4", 4096).tokens == 4096  # type: ignore[union-attr]
    assert context_window("gpt-4", 4096).why == "as set in context_window"  # type: ignore[union-attr]
    assert "gpt-4's documented window" in context_window("gpt-4", None).why  # type: ignore[union-attr]
    assert context_window("my-llama-8b", None) is None


def test_params_yaml_endpoint_carries_its_window_to_the_model() -> None:
    params = load_params(FIXTURE_PARAMS)
    model = params.endpoint_model(params.deepconf.endpoint)
    assert model.context_window is None
    changed = dataclasses.replace(model, context_window=32_000)
    assert changed.window().tokens == 32_000  # type: ignore[union-attr]


@pytest.mark.parametrize(("text", "encoding", "tokens"), [
    ("Hello, world!", "cl100k_base", 4), ("Hello, world!", "o200k_base", 4),
    ("tiktoken is great!", "cl100k_base", 6),  # OpenAI's cookbook: [83, 1609, 5963, 374, 2294, 0]
])
def test_openai_text_is_counted_exactly(text: str, encoding: str, tokens: int) -> None:
    assert text_tokens(text, encoding) == tokens  # type: ignore[arg-type]


def test_a_model_without_a_bundled_tokenizer_is_bounded_by_bytes() -> None:
    messages = [{"role": "user", "content": "é" * 10}]
    bound = prompt_tokens(messages, "deepseek-v4-flash")
    exact = prompt_tokens(messages, "gpt-4o")
    assert not bound.exact and exact.exact
    # 20 bytes of text: every tokenizer's token covers at least one byte, so none reads more than 20 tokens there
    assert bound.tokens == 20 + BOUND_PER_MESSAGE_TOKENS + BOUND_TEMPLATE_TOKENS > exact.tokens


def test_counting_works_with_no_network() -> None:
    """tiktoken fetches its encodings on first use; bpe-openai's are in its wheel. A fresh process with every
    connection refused still counts both encodings."""
    script = ("import socket\n"
              "def refuse(*args, **kwargs):\n    raise OSError('network is off in this test')\n"
              "socket.socket.connect = refuse\nsocket.create_connection = refuse\n"
              "from tracevote.core.prompt_tokens import text_tokens\n"
              "print(text_tokens('Find the sum of all integer bases', 'o200k_base'),"
              " text_tokens('Find the sum of all integer bases', 'cl100k_base'))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=hang_guard_s(),
                          env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"})
    assert done.returncode == 0, done.stderr
    assert [int(n) for n in done.stdout.split()] == [7, 7]


def test_the_byte_bound_never_under_counts_the_real_aime_prompts(shared_data: Path) -> None:
    """The bound is safe on the prompts the project sends: >= the exact count with both OpenAI encodings."""
    rows = [json.loads(line) for line in (shared_data / "aime_2025.jsonl").read_text().splitlines()]
    for row in rows:
        messages = [{"role": "user", "content": row["question"]}]
        bound = prompt_tokens(messages, "unknown-model").tokens
        for name in ("gpt-4", "gpt-4o"):
            assert bound >= prompt_tokens(messages, name).tokens


def _model(name: str, window: int | None = None) -> ModelConfig:
    params = load_params(FIXTURE_PARAMS)
    return dataclasses.replace(params.endpoint_model(params.deepconf.endpoint), name=name, context_window=window,
                               endpoint="agents")


def test_the_refusal_names_endpoint_prompt_window_and_a_max_tokens_that_fits() -> None:
    prompts = [Prompt("p1", "solve prompt", [{"role": "user", "content": "short"}]),
               Prompt("p2", "solve prompt", [{"role": "user", "content": "a much longer prompt " * 50}])]
    model = _model("gpt-4", 600)
    with pytest.raises(ContextWindowError) as refused:
        check_fit(model, prompts, 512, max_tokens_key="decoding.max_tokens")
    line = str(refused.value)
    assert "\n" not in line
    assert line.startswith("endpoint agents (gpt-4): the largest prompt, p2 (solve prompt), is ")
    assert "with decoding.max_tokens 512 needs " in line and "> its context window 600 (as set" in line
    fitting = int(line.split("decoding.max_tokens <= ")[1].split(",")[0])
    assert check_fit(model, prompts, fitting, max_tokens_key="decoding.max_tokens") is not None
    with pytest.raises(ContextWindowError):
        check_fit(model, prompts, fitting + 1, max_tokens_key="decoding.max_tokens")


def test_an_unknown_window_is_unchecked_and_says_where_to_set_it() -> None:
    fit = check_fit(_model("my-llama-8b"), [Prompt("p", "solve prompt", [{"role": "user", "content": "x" * 10**5}])],
                    10**6, max_tokens_key="decoding.max_tokens")
    assert fit is not None and fit.window is None
    assert "context window unknown, unchecked (set endpoints.agents.context_window)" in fit.line()


def test_the_write_ups_gpt4_debate_is_refused_at_its_worst_round(shared_data: Path) -> None:
    """Seed 001's `gpt-4 gpt-4`: round 1 quotes four replies of up to debate.max_tokens; with gpt-4's 8,192 it
    cannot fit, and the refusal says which max_tokens would."""
    params = load_params(FIXTURE_PARAMS)
    cfg = dataclasses.replace(params.debate, agents=4, rounds=3, max_tokens=3072, examples="builtin_aime")
    rows = [json.loads(line) for line in (shared_data / "aime_2025.jsonl").read_text().splitlines()]
    debates = [Debate(Problem(f"aime_2025-{i}", row["question"], row["answer"]), cfg, params.answers)
               for i, row in enumerate(rows)]
    prompts = [prompt for debate in debates for prompt in agent_prompts(debate)]
    with pytest.raises(ContextWindowError) as refused:
        check_fit(_model("gpt-4"), prompts, 3072, max_tokens_key="debate.max_tokens")
    line = str(refused.value)
    assert "(debate round 1, quoting 4 replies of up to max_tokens)" in line
    assert "its context window 8,192 (gpt-4's documented window" in line
    fitting = int(line.split("debate.max_tokens <= ")[1].split(",")[0].replace(",", ""))
    assert check_fit(_model("gpt-4"), prompts, fitting, max_tokens_key="debate.max_tokens") is not None
    judge = [prompt for debate in debates for prompt in judge_prompts(debate)]
    assert {prompt.what for prompt in judge} == {"debate ranking"} and all(p.quoted == 4 for p in judge)
