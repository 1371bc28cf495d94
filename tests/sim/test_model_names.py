"""Issue 43 item 6: the simulated model answers by the model's name: two names on one server are two models,
each reproducible, while the problems themselves (gold, difficulty) stay the same data for both."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tracevote.core.config_endpoints import SimConfig
from tracevote.core.simulated import SOLVE
from tracevote.debate.prompts import ANSWER
from tracevote.sim.model import SimModel

SIM = SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=120)
PROMPT = ("Find the number of primes below 30.\n\nPlease reason step by step, and put your final answer within "
          "\\boxed{}.")


def reply(model: str, kind: str, key: str) -> str:
    body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 2048}
    document = orjson.loads(SimModel(SIM, answers={PROMPT.split("\n\n")[0]: 10}).complete_bytes(body, key, kind=kind))
    return document["choices"][0]["message"]["content"]


@pytest.mark.parametrize("kind", [SOLVE, ANSWER])
def test_two_names_answer_differently_and_each_the_same_every_time(kind: str) -> None:
    keys = [f"p/{i}" for i in range(8)]
    gpt4o = [reply("gpt-4o", kind, key) for key in keys]
    gpt35 = [reply("gpt-3.5-turbo", kind, key) for key in keys]
    assert gpt4o == [reply("gpt-4o", kind, key) for key in keys]  # reproducible
    assert all(a != b for a, b in zip(gpt4o, gpt35, strict=True))  # another model's traces


def test_the_problems_are_the_same_data_for_every_name() -> None:
    model = SimModel(SIM)
    first = model.draw_outlines("Find 6 x 7.", [str(k) for k in range(400)], "gpt-4o")
    second = model.draw_outlines("Find 6 x 7.", [str(k) for k in range(400)], "gpt-3.5-turbo")
    assert first != second
    golds = {t.answer for t in first if t.correct} | {t.answer for t in second if t.correct}
    assert len(golds) == 1  # one gold answer, whichever model answers
