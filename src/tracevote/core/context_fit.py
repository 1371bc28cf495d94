"""Whether a stage's prompts fit its endpoint's context window, decided before anything is paid for.

The rule is OpenAI's and vLLM's: a request's prompt tokens + its completion limit (max_tokens) must not exceed the
window, whatever the reply's length turns out to be. A prompt that quotes earlier replies (the debate's revisions
and ranking) grows with max_tokens too: each quoted reply is counted at max_tokens, the most it can be.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tracevote.core.config_endpoints import ModelConfig
from tracevote.core.context_windows import KNOWN_MODELS, ContextWindow
from tracevote.core.errors import ConfigError
from tracevote.core.prompt_tokens import prompt_tokens

QUOTE_MARGIN_TOKENS = 2  # a quoted reply re-tokenized inside other text may merge or split a token at each end


class ContextWindowError(ConfigError):
    """A setting whose largest request cannot fit the endpoint's context window: refused before paying."""


@dataclass(frozen=True)
class Prompt:
    """A request a stage will send: `messages` without the `quoted` earlier replies it will also hold (each up to
    max_tokens), and what it is, for messages ("aime_2025-3, debate round 1")."""

    item_id: str
    what: str
    messages: list[dict[str, str]]
    quoted: int = 0


SOLVE_PROMPT = "solve prompt"  # what a pool's prompt is called in a refusal line and estimate's table


def prompts_of(items: Iterable[tuple[str, list[dict[str, str]]]], what: str) -> list[Prompt]:
    """(item id, messages) pairs as the Prompts of one kind of call: "solve prompt", "critique", "critic call"."""
    return [Prompt(item_id, what, messages) for item_id, messages in items]


@dataclass(frozen=True)
class Need:
    """One prompt's tokens: `base` counted (or bounded) from its text, plus `quoted` replies of max_tokens each."""

    prompt: Prompt
    base: int
    exact: bool

    def tokens(self, max_tokens: int) -> int:
        """Its prompt tokens at `max_tokens` (the quoted replies at their longest)."""
        return self.base + self.prompt.quoted * (max_tokens + QUOTE_MARGIN_TOKENS)

    def request(self, max_tokens: int) -> int:
        """Prompt + completion limit: what the window must hold."""
        return self.tokens(max_tokens) + max_tokens

    def max_tokens_fitting(self, window: int) -> int:
        """The largest max_tokens with which it fits `window` (0 or less: none does)."""
        return (window - self.base - self.prompt.quoted * QUOTE_MARGIN_TOKENS) // (self.prompt.quoted + 1)


@dataclass(frozen=True)
class Fit:
    """A stage's largest request on an endpoint, and the window (None: unknown, unchecked)."""

    endpoint: str
    largest: Need
    max_tokens: int
    window: ContextWindow | None

    @property
    def fits(self) -> bool:
        """True when the window holds the largest request, or is unknown (unchecked)."""
        return self.window is None or self.largest.request(self.max_tokens) <= self.window.tokens

    def line(self) -> str:
        """"largest prompt aime_2025-3 (debate round 1): 9,012 tokens + max_tokens 3,072 <= window 128,000"."""
        need = self.largest
        head = (f"largest prompt {need.prompt.item_id} ({need.prompt.what}): {need.tokens(self.max_tokens):,} tokens"
                f" {'counted' if need.exact else 'at most'} + max_tokens {self.max_tokens:,}")
        if self.window is None:
            return f"{head}; context window unknown, unchecked (set endpoints.{self.endpoint}.context_window)"
        return f"{head} <= context window {self.window.tokens:,}"


def largest_need(prompts: Iterable[Prompt], model_name: str, max_tokens: int) -> Need | None:
    """The prompt whose request (prompt + max_tokens) is the largest; None for no prompt."""
    needs = []
    for prompt in prompts:
        counted = prompt_tokens(prompt.messages, model_name)
        needs.append(Need(prompt, counted.tokens, counted.exact))
    return max(needs, key=lambda need: need.request(max_tokens), default=None)


def assess(model: ModelConfig, prompts: Iterable[Prompt], max_tokens: int) -> Fit | None:
    """The largest request of `prompts` at `max_tokens` on `model`, against its window; None: no prompt."""
    need = largest_need(prompts, model.name, max_tokens)
    return None if need is None else Fit(model.endpoint, need, max_tokens, model.window())


def check_fit(model: ModelConfig, prompts: Iterable[Prompt], max_tokens: int, *, max_tokens_key: str) -> Fit | None:
    """The stage's largest request, or ContextWindowError when it cannot fit `model`'s window, naming the
    endpoint, the prompt and its tokens, the window, and the settings that would fit. None: no prompt."""
    fit = assess(model, prompts, max_tokens)
    if fit is not None and not fit.fits:
        raise ContextWindowError(refusal(model, fit, max_tokens_key))
    return fit


def refusal(model: ModelConfig, fit: Fit, max_tokens_key: str) -> str:
    """The one line of a request that cannot fit, with what would."""
    need, window = fit.largest, fit.window
    assert window is not None
    request = need.request(fit.max_tokens)
    fitting = need.max_tokens_fitting(window.tokens)
    lower = (f"{max_tokens_key} <= {fitting:,}" if fitting > 0
             else f"no {max_tokens_key} (the prompt alone fills the window)")
    larger = [known.name for known in KNOWN_MODELS if known.window >= request][:3]
    quoted = f", quoting {need.prompt.quoted} replies of up to max_tokens" if need.prompt.quoted else ""
    return (f"endpoint {model.endpoint} ({model.name}): the largest prompt, {need.prompt.item_id} "
            f"({need.prompt.what}{quoted}), is {need.tokens(fit.max_tokens):,} tokens"
            f"{'' if need.exact else ' at most'}, and with {max_tokens_key} {fit.max_tokens:,} needs {request:,} > "
            f"its context window {window.tokens:,} ({window.why}); nothing was sent. Would fit: {lower}, or an "
            f"endpoint whose window holds {request:,} ({', '.join(larger) or 'none known'})")
