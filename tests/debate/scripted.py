"""Debates driven by scripted replies, offline: each call key answers with a given text."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from tracevote.core.config_datasets import AnswersConfig
from tracevote.core.config_methods import DebateConfig
from tracevote.datasets.problems import Problem
from tracevote.debate.protocol import Debate, Transcript, replay
from tracevote.store.calls import Call, CallRecord

ANSWERS = AnswersConfig(fallback="last_integer", truncated_fallback=False)
CFG = DebateConfig(datasets=("toy",), agents=4, rounds=3, temperature=0.3, max_tokens=3072, system="Be exact.",
                   examples=None, question="Problem: {problem}\nBox the answer.", importance=False,
                   contest_halves=(), concurrency=2, max_cost_usd=1.0, endpoint="deepseek",
                   judge_endpoint="deepseek")
PROBLEM = Problem("toy-01", "What is 6 x 7?", 42)


def boxed(answer: int | None, extra: str = "") -> str:
    return f"Reasoning{extra}. \\boxed{{{answer}}}" if answer is not None else "I am not sure."


def record(call: Call, text: str) -> CallRecord:
    return CallRecord(key=str(call.key), kind=call.kind, request_sha256=call.request_sha256, text=text,
                      finish_reason="stop", prompt_tokens=100, cached_prompt_tokens=0, completion_tokens=50,
                      usd=0.0, latency_s=0.0)


def run_scripted(script: Mapping[str, str], cfg: DebateConfig = CFG) -> tuple[Transcript, list[Call]]:
    """The transcript, and every call made in order; a call the script lacks fails the test."""
    calls: list[Call] = []

    def load(call: Call) -> CallRecord:
        calls.append(call)
        assert call.key in script, f"the debate asked for {call.key!r}, which the script does not expect"
        return record(call, script[str(call.key)])

    return replay(Debate(PROBLEM, cfg, ANSWERS), load), calls


def answers_script(**rounds: list[int | None]) -> dict[str, str]:
    """answers_script(r0=[1, 2, 3, 4], r1=[...]) -> {"r0/agent1": "... \\boxed{1}", ...}."""
    return {f"{name}/agent{i}": boxed(answer) for name, answers in rounds.items()
            for i, answer in enumerate(answers, start=1)}


def with_importance(cfg: DebateConfig = CFG) -> DebateConfig:
    return dataclasses.replace(cfg, importance=True)
