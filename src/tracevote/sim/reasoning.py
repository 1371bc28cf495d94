"""The simulated model's hidden reasoning, on the profiles that report it (openai-reasoning): how many tokens it
thinks before answering, and what is left of the answer once that is paid from the one token budget.

OpenAI's reasoning models spend hidden reasoning out of max_completion_tokens: when the reasoning uses the whole
budget the reply's content is empty, its finish_reason "length", and usage.completion_tokens_details.reasoning_tokens
equals the budget. The simulator does the same, with a reasoning length drawn per call (seeded by the call's seed)
from a gamma distribution whose mean grows with reasoning_effort:

    hidden_tokens("low", (0, "critic-ab", "critic-ab/0"))   -> about 320 on average (99.9% below ~1,050)
    spent(req, "The score is 4.", 6, "stop", seed)           -> Spent("", 0, 512, "length") with a 512 budget at high

The means are this simulator's, not measurements of any model; they keep minimal and low far below a few
thousand tokens and high above a critic's few hundred, so a too-small budget fails the way it does on OpenAI.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracevote.sim.request import SimRequest
from tracevote.sim.tokens import seeded_rng

# mean hidden reasoning tokens per reply, by reasoning_effort; None (nothing sent) is the model's default, medium
EFFORT_MEAN_TOKENS = {"minimal": 24, "low": 320, "medium": 1200, "high": 4800}
DEFAULT_EFFORT = "medium"
GAMMA_SHAPE = 4.0  # spread: the 99.9th percentile is about 3.3x the mean


@dataclass(frozen=True)
class Spent:
    """A reply after its hidden reasoning: the visible text and tokens, the reasoning tokens, the finish reason."""

    text: str
    visible_tokens: int
    reasoning_tokens: int
    finish_reason: str


def hidden_tokens(effort: str | None, seed: tuple) -> int:
    """The reasoning tokens one call spends at `effort`, drawn from (seed, effort) alone: at least 1."""
    mean = EFFORT_MEAN_TOKENS[effort or DEFAULT_EFFORT]
    rng = seeded_rng(*seed, "hidden reasoning", effort or DEFAULT_EFFORT)
    return max(1, round(float(rng.gamma(GAMMA_SHAPE, mean / GAMMA_SHAPE))))


def within_budget(req: SimRequest, visible_tokens: int, finish_reason: str, seed: tuple) -> tuple[int, int, str]:
    """(visible tokens kept, hidden reasoning tokens, finish reason) of a reply within req.max_tokens: the reasoning
    first, then as much of the answer as fits (finish "length" when cut); all of it on reasoning keeps none. A
    profile without hidden reasoning keeps the reply as it is."""
    if not req.reasoning:
        return visible_tokens, 0, finish_reason
    hidden = min(hidden_tokens(req.reasoning_effort, seed), req.max_tokens)
    room = req.max_tokens - hidden
    if visible_tokens <= room:
        return visible_tokens, hidden, finish_reason
    return room, hidden, "length"


def spent(req: SimRequest, text: str, visible_tokens: int, finish_reason: str, seed: tuple) -> Spent:
    """A text reply as a reasoning model returns it (within_budget), its text cut in proportion to its tokens."""
    kept, hidden, finish = within_budget(req, visible_tokens, finish_reason, seed)
    if kept < visible_tokens:
        text = text[: len(text) * kept // visible_tokens]
    return Spent(text, kept, hidden, finish)
