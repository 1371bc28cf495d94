"""The simulated model's answer to a grading critic call (tracevote.grading.critic), deterministic.

It reads the reasoning back from the prompt and looks up whether it reached its gold answer by its digest (the
build passes that; an unknown reasoning reached it half the time, drawn from its digest). Then:
- a reasoning that reached the gold scores 4 or 5 (5 two times in three), else 1, 2 or 3 (1 and 2 likelier);
- 8% of replies are unparsable (a score in words, or no JSON), and 5% of the rest give a score out of range
  (0 or 6, which the parser clamps), so every branch of the parser is exercised.
Replies are a few filler words, then the JSON object. A request whose response_format is a JSON schema (the
critic's structured mode) gets the object alone, ``{"score": x}``, as a server enforcing the schema sends it:
never unparsable, out of range 5% of the time (the schema bounds nothing).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import orjson

from tracevote.critique.critic_prompt import reasoning_digest, reasoning_in_prompt
from tracevote.sim.formats import json_schema_of
from tracevote.sim.render import Degrade, filler, render_text
from tracevote.sim.request import SimRequest
from tracevote.sim.tokens import seeded_rng

if TYPE_CHECKING:
    from tracevote.sim.model import SimModel

P_UNPARSABLE = 0.08
P_OUT_OF_RANGE = 0.05
_REACHED_SCORES, _REACHED_WEIGHTS = (4, 5), (1 / 3, 2 / 3)
_MISSED_SCORES, _MISSED_WEIGHTS = (1, 2, 3), (0.4, 0.35, 0.25)


def critic_reply(req: SimRequest, key: str | None, model: SimModel, *, degrade: Degrade) -> bytes:
    reasoning = reasoning_in_prompt(req.prompt) or ""
    digest = reasoning_digest(reasoning)
    reached = model.reached_gold(digest)
    if reached is None:
        reached = bool(seeded_rng(model.cfg.seed, digest, "reached").random() < 0.5)
    seed = (*model.name_seed(req.model), digest, key)
    rng = seeded_rng(*seed, "critic")
    if json_schema_of(req.response_format) is not None:
        text = orjson.dumps({"score": _score(rng, reached)}).decode()
        return render_text(req, text, min(len(text) // 3, req.max_tokens), "stop", seed)
    words = int(rng.integers(8, 40))
    text = "I compared the reasoning with the reference." + filler(words, rng) + "\n" + _verdict(rng, reached)
    return render_text(req, text, min(words + 12, req.max_tokens), "stop", seed)


def _verdict(rng: np.random.Generator, reached: bool) -> str:
    draw = rng.random()
    if draw < P_UNPARSABLE / 2:
        return "I would score it a four out of five."
    if draw < P_UNPARSABLE:
        return '{"verdict": "good"}'
    if draw < P_UNPARSABLE + P_OUT_OF_RANGE:
        return '{"score": 6}' if reached else '{"score": 0}'
    return f'{{"score": {_in_range(rng, reached)}}}'


def _score(rng: np.random.Generator, reached: bool) -> int:
    """A structured reply's score: out of range (0 or 6) 5% of the time, else as a free-text reply's."""
    if rng.random() < P_OUT_OF_RANGE:
        return 6 if reached else 0
    return _in_range(rng, reached)


def _in_range(rng: np.random.Generator, reached: bool) -> int:
    scores, weights = (_REACHED_SCORES, _REACHED_WEIGHTS) if reached else (_MISSED_SCORES, _MISSED_WEIGHTS)
    return int(rng.choice(scores, p=weights))

