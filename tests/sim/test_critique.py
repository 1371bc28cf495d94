"""The simulated model's critiques: it reads the tagged steps back, names the known first error more often on
short solutions and at low noise, keeps some critiques unparsable or cut off, and answers the same key alike."""

from __future__ import annotations

import orjson
import pytest

from tracevote.core.config_endpoints import SimConfig
from tracevote.critique.prompts import critique_messages, critique_template, steps_digest
from tracevote.critique.votes import parse_vote
from tracevote.sim.critique import right_chance
from tracevote.sim.model import SimModel

TEMPLATE = critique_template(None, "processbench")


def solutions(n_solutions: int, n_steps: int) -> list[tuple[list[str], int]]:
    """Solutions of `n_steps` steps, their first error spread over -1..n_steps-1."""
    return [([f"Step {i} of solution {s}: x = {s + i}." for i in range(n_steps)], s % (n_steps + 1) - 1)
            for s in range(n_solutions)]


def critiques(noise: float, n_steps: int, *, votes: int = 4, max_tokens: int = 8192) -> list[tuple[int, dict]]:
    """(label, response) for every vote on 60 solutions, the simulator knowing their labels."""
    items = solutions(60, n_steps)
    model = SimModel(SimConfig(0, 1.0, 0.45, 600, critique_noise=noise),
                     first_errors={steps_digest(steps): label for steps, label in items})
    return [(label, orjson.loads(model.complete_bytes(
        {"model": "m", "messages": critique_messages(TEMPLATE, "Find x.", steps), "temperature": 0.7,
         "max_tokens": max_tokens}, f"s{number}/{vote}", kind="critique")))
        for number, (steps, label) in enumerate(items) for vote in range(votes)]


def right_share(noise: float, n_steps: int) -> float:
    answered = critiques(noise, n_steps)
    return sum(parse_vote(r["choices"][0]["message"]["content"]) == label for label, r in answered) / len(answered)


def test_critiques_are_right_less_often_on_longer_solutions_and_at_higher_noise() -> None:
    short, long_ = right_share(0.2, 3), right_share(0.2, 20)
    assert short > long_ + 0.15
    assert right_share(0.0, 5) > right_share(0.8, 5) + 0.2
    assert short == pytest.approx(right_chance(3, 0.2), abs=0.15)


def test_some_critiques_box_nothing_usable_and_long_ones_are_cut_off() -> None:
    texts = [r["choices"][0]["message"]["content"] for _, r in critiques(0.3, 4, votes=8)]
    unparsable = sum(parse_vote(text) is None for text in texts) / len(texts)
    assert 0.01 < unparsable < 0.15
    cut = critiques(0.3, 12, votes=2, max_tokens=64)
    assert all(r["choices"][0]["finish_reason"] == "length" and r["usage"]["completion_tokens"] == 64 for _, r in cut)
    assert all(parse_vote(r["choices"][0]["message"]["content"]) is None for _, r in cut)


def test_the_same_key_gets_the_same_critique_and_an_unknown_solution_still_gets_one() -> None:
    assert critiques(0.3, 4, votes=2) == critiques(0.3, 4, votes=2)
    model = SimModel(SimConfig(0, 1.0, 0.45, 600))
    steps = ["a = 1.", "b = 2.", "a + b = 4."]
    request = {"model": "m", "messages": critique_messages(TEMPLATE, "Add.", steps), "max_tokens": 4096}
    text = orjson.loads(model.complete_bytes(request, "u/0", kind="critique"))["choices"][0]["message"]["content"]
    assert "\\boxed{" in text or "cannot tell" in text
