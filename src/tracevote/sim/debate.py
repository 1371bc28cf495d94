"""The simulated model's answers to a debate's calls (kinds from tracevote.debate.prompts), deterministic.

- An agent's first answer is drawn as a solve trace is (model.py): right with the problem's chance p.
- An agent revising reads the answers boxed in the solutions it is shown and, by a draw seeded with its
  call key: half the time takes the most common of them; a fifth of the time the right one, when one of
  them has it; otherwise solves afresh. So debates drift to the majority and sometimes recover the truth.
- When asked to rate the solutions ("[[1, 5, 2, ...]]"), it rates a right one 4-5, one agreeing with the
  majority 2-4 and the rest 1-3; one rating in ten lists one score too few (a fallback for the parser).
- The judge names two solutions as "[i, j]": half the time it spots the right answer when shown and picks
  solutions holding it; otherwise the first two holding the most common answer. One ranking in ten says
  no pair at all (unparsable), and one in thirty names the same solution twice.
Replies are filler words (no digits) of the drawn length, then the boxed answer; a reply longer than
max_tokens is cut before its box (finish_reason "length").
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from tracevote.answers.extract import extract_answer
from tracevote.debate.protocol import most_common
from tracevote.sim.render import Degrade, filler, render_text
from tracevote.sim.request import SimRequest
from tracevote.sim.tokens import seeded_rng

if TYPE_CHECKING:
    from tracevote.sim.model import SimModel

_SOLUTIONS = re.compile(r"(?:One agent's solution|Agent solution \d+): ```(.*?)```", re.DOTALL)
_RATE_ASKED = "[[1, 5, 2, ...]]"
P_MAJORITY, P_RIGHT = 0.5, 0.2
P_SPOT_RIGHT, P_UNPARSABLE, P_SAME_TWICE = 0.5, 0.1, 1 / 30
P_SHORT_RATINGS = 0.1


def answer_reply(req: SimRequest, key: str | None, model: SimModel, *, degrade: Degrade) -> bytes:
    problem = model.problem_within(req.prompt)
    outline = model.draw_outline(problem, key or "", req.model)
    return _reply(req, model, (problem, key), outline.answer, outline.length, suffix="")


def revise_reply(req: SimRequest, key: str | None, model: SimModel, *, degrade: Degrade) -> bytes:
    problem = model.problem_within(req.prompt)
    shown = [extract_answer(text) for text in _SOLUTIONS.findall(req.prompt)]
    gold = model.gold_answer(problem)
    rng = seeded_rng(*model.name_seed(req.model), problem, key, "revise")
    outline = model.draw_outline(problem, key or "", req.model)
    majority = _most_common(shown)
    answer, draw = outline.answer, rng.random()
    if draw < P_MAJORITY and majority is not None:
        answer = majority
    elif draw < P_MAJORITY + P_RIGHT and gold in shown:
        answer = gold
    suffix = _ratings(shown, gold, majority, rng) if _RATE_ASKED in req.prompt else ""
    return _reply(req, model, (problem, key), answer, outline.length, suffix=suffix)


def rank_reply(req: SimRequest, key: str | None, model: SimModel, *, degrade: Degrade) -> bytes:
    problem = model.problem_within(req.prompt)
    shown = [extract_answer(text) for text in _SOLUTIONS.findall(req.prompt)]
    seed = (*model.name_seed(req.model), problem, key)
    rng = seeded_rng(*seed, "rank")
    length = max(16, model.cfg.mean_tokens // 4)
    draw = rng.random()
    if draw < P_UNPARSABLE or len(shown) < 2:
        verdict = "\n\nThese solutions all look plausible; I cannot choose between them."
    else:
        first, second = _picks(shown, model.gold_answer(problem), rng, same_twice=draw < P_UNPARSABLE + P_SAME_TWICE)
        verdict = f"\n\nThe best two solutions are [{first + 1}, {second + 1}]"
    text = "Comparing the solutions step by step." + filler(length, rng) + verdict
    return render_text(req, text, length, "stop", seed)


def _picks(shown: list[int | None], gold: int, rng: np.random.Generator, *, same_twice: bool) -> tuple[int, int]:
    target = gold if gold in shown and rng.random() < P_SPOT_RIGHT else _most_common(shown)
    holding = [i for i, answer in enumerate(shown) if answer == target and answer is not None]
    others = [i for i in range(len(shown)) if i not in holding]
    order = holding + others
    return (order[0], order[0]) if same_twice else (order[0], order[1])


def _ratings(shown: list[int | None], gold: int, majority: int | None, rng: np.random.Generator) -> str:
    scores = []
    for answer in shown:
        low, high = (4, 5) if answer == gold else (2, 4) if answer == majority and answer is not None else (1, 3)
        scores.append(int(rng.integers(low, high + 1)))
    if rng.random() < P_SHORT_RATINGS:
        scores = scores[:-1]
    return f"\n\nMy scores for the other agents' solutions: [[{', '.join(map(str, scores))}]]"


def _reply(req: SimRequest, model: SimModel, seed_parts: tuple, answer: int | None, length: int, *,
           suffix: str) -> bytes:
    seed = (*model.name_seed(req.model), *seed_parts)
    rng = seeded_rng(*seed, "words")
    if length > req.max_tokens:  # cut before the box, as a real reply running out of tokens is
        return render_text(req, "Let me work through this." + filler(req.max_tokens, rng), req.max_tokens,
                           "length", seed)
    ending = (f"\n\nTherefore, the answer is \\boxed{{{answer}}}." if answer is not None
              else "\n\nI am not sure of the final value.")
    return render_text(req, "Let me work through this." + filler(length, rng) + suffix + ending, length,
                       "stop", seed)


def _most_common(answers: list[int | None]) -> int | None:
    return most_common(answers)[0]

