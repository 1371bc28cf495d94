"""The simulated model's answer to a critique call (tracevote.critique.prompts), deterministic.

It reads the tagged steps back from the prompt and looks the solution's first error up by their digest
(the build passes the dataset's labels; an unknown solution's label is drawn from the digest: -1 two times
in five, else a uniform step). Then:
- Each solution has its own chance that one critique is right, drawn from a Beta around
  (1 - critique_noise) / (1 + steps / 10): long solutions are harder, and votes on one solution agree more
  than independent draws would (so voting helps, but not without bound).
- A wrong critique names the solution's own favourite wrong answer seven times in ten (-1, missing the error,
  half the time for a flawed solution; else another step), otherwise any wrong index.
- 3% + 5% x noise of critiques are unparsable: half box a word ("\\boxed{paragraph two}"), half box nothing.
  A critique longer than max_tokens is cut before its box (finish_reason "length").
Replies are filler words (no digits) then the verdict; their length grows with the step count.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tracevote.critique.prompts import steps_digest, steps_in_prompt
from tracevote.sim.render import Degrade, filler, render_text
from tracevote.sim.request import SimRequest
from tracevote.sim.tokens import seeded_rng

if TYPE_CHECKING:
    from tracevote.sim.model import SimModel

P_NO_ERROR = 0.4  # of an unknown solution's drawn label
P_FAVOURITE = 0.7
P_MISS_ERROR = 0.5
P_UNPARSABLE_BASE, P_UNPARSABLE_NOISE = 0.03, 0.05
_CONCENTRATION = 1.5  # of the per-solution Beta: lower spreads solutions' difficulty further
_TOKENS_PER_STEP = 40


def right_chance(n_steps: int, noise: float) -> float:
    """The mean chance that one critique names the first error (or -1) correctly."""
    return (1.0 - noise) / (1.0 + n_steps / 10)


def critique_reply(req: SimRequest, key: str | None, model: SimModel, *, degrade: Degrade) -> bytes:
    steps = steps_in_prompt(req.prompt)
    solution = steps_digest(steps)
    label = _label(model, solution, len(steps))
    chance, favourite = _solution_traits(model, solution, label, len(steps))
    seed = (*model.name_seed(req.model), solution, key)
    rng = seeded_rng(*seed, "critique")
    length = max(16, int(rng.lognormal(np.log(model.cfg.mean_tokens / 6 + _TOKENS_PER_STEP * len(steps)), 0.3)))
    text = "Let me check each paragraph in turn." + filler(min(length, req.max_tokens), rng)
    if length > req.max_tokens:  # cut before the verdict, as a real reply running out of tokens is
        return render_text(req, text, req.max_tokens, "length", seed)
    verdict = _verdict(rng, label, chance, favourite, len(steps), model.cfg.critique_noise)
    return render_text(req, text + verdict, length, "stop", seed)


def _label(model: SimModel, solution: str, n_steps: int) -> int:
    known = model.first_error(solution)
    if known is not None:
        return known
    rng = seeded_rng(model.cfg.seed, solution, "label")
    return -1 if rng.random() < P_NO_ERROR or n_steps == 0 else int(rng.integers(0, n_steps))


def _solution_traits(model: SimModel, solution: str, label: int, n_steps: int) -> tuple[float, int]:
    """(this solution's chance that one critique is right, the wrong answer its critiques favour)."""
    rng = seeded_rng(model.cfg.seed, solution, "traits")
    mean = float(np.clip(right_chance(n_steps, model.cfg.critique_noise), 0.01, 0.99))
    chance = float(rng.beta(_CONCENTRATION * mean, _CONCENTRATION * (1 - mean)))
    if label != -1 and rng.random() < P_MISS_ERROR:
        return chance, -1
    return chance, _other_index(rng, label, n_steps)


def _other_index(rng: np.random.Generator, label: int, n_steps: int) -> int:
    """A uniform index in -1..n_steps-1 other than `label` (-1 when there is no other)."""
    choices = [index for index in range(-1, n_steps) if index != label]
    return int(choices[rng.integers(0, len(choices))]) if choices else -1


def _verdict(rng: np.random.Generator, label: int, chance: float, favourite: int, n_steps: int,
             noise: float) -> str:
    draw = rng.random()
    unparsable = P_UNPARSABLE_BASE + P_UNPARSABLE_NOISE * noise
    if draw < unparsable / 2:
        return "\n\nThe earliest error is in paragraph \\boxed{two}."
    if draw < unparsable:
        return "\n\nI cannot tell which paragraph is the first wrong one."
    if rng.random() < chance:
        index = label
    else:
        index = favourite if rng.random() < P_FAVOURITE else _other_index(rng, label, n_steps)
    if index == -1:
        return "\n\nEvery paragraph is correct, so the answer is \\boxed{-1}."
    return f"\n\nThe earliest error is in paragraph {index}, so the answer is \\boxed{{{index}}}."

