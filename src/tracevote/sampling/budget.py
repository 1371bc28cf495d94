"""The spend guard: what a build will cost before it sends anything, and what it has cost so far."""

from __future__ import annotations

import math
from dataclasses import dataclass

from tracevote.core.config import ModelConfig, PricingConfig
from tracevote.core.errors import TracevoteError

# A deliberately pessimistic tokenizer stand-in: real BPE tokenizers average 3.5-4.5 bytes per token.
BYTES_PER_PROMPT_TOKEN = 3.0
CHAT_TEMPLATE_TOKENS = 16


class BudgetError(TracevoteError):
    """The estimated cost is over pool.max_cost_usd."""


@dataclass(frozen=True)
class CostEstimate:
    requests: int
    input_tokens: int
    output_tokens: int
    usd: float
    prices_checked: str
    simulated_as: str | None = None  # the model a simulated build stands in for; None for a real one

    def render(self) -> str:
        tokens = (f"{self.requests} requests, ~{self.input_tokens / 1e6:.2f}M input and up to "
                  f"{self.output_tokens / 1e6:.2f}M output tokens")
        if self.simulated_as is None:
            return f"{tokens}: ~${self.usd:.2f} (prices checked {self.prices_checked})"
        return (f"{tokens}; cost if this were {self.simulated_as} at list prices (checked "
                f"{self.prices_checked}): ~${self.usd:.2f} (SIMULATED: nothing will be spent)")


def spent_text(usd: float, simulated_as: str | None, digits: int = 4) -> str:
    """What a build has cost so far: "~$0.4200", or for a simulated build
    "cost if this were deepseek-v4-flash at list prices: ~$0.4200 (SIMULATED: nothing was spent)"."""
    amount = f"~${usd:.{digits}f}"
    if simulated_as is None:
        return amount
    return f"cost if this were {simulated_as} at list prices: {amount} (SIMULATED: nothing was spent)"


def prompt_tokens(prompt_bytes: int) -> int:
    return CHAT_TEMPLATE_TOKENS + math.ceil(prompt_bytes / BYTES_PER_PROMPT_TOKEN)


def usd(input_tokens: int, output_tokens: int, pricing: PricingConfig) -> float:
    """Cost with every input token at the cache-miss price (DeepSeek's prompt cache only lowers it)."""
    return usd_cached(input_tokens, 0, output_tokens, pricing)


def usd_cached(input_tokens: int, cached_tokens: int, output_tokens: int, pricing: PricingConfig) -> float:
    """Cost with the `cached_tokens` part of the input at the cache-hit price (DeepSeek reports it)."""
    missed = input_tokens - cached_tokens
    return (missed * pricing.input_cache_miss + cached_tokens * pricing.input_cache_hit
            + output_tokens * pricing.output) / 1e6


def estimate(prompt_sizes: list[int], max_tokens: int, pricing: PricingConfig, *,
             simulated_as: str | None = None) -> CostEstimate:
    """Estimate for one request per entry of `prompt_sizes` (each a prompt's size in UTF-8 bytes);
    `simulated_as` names the model a simulated build stands in for, so the cost reads as hypothetical.

    >>> estimate([300] * 1000, 4096, pricing).usd   # about 1000 x 4096 x $0.28/1M = $1.15
    """
    input_tokens = sum(prompt_tokens(size) for size in prompt_sizes)
    output_tokens = math.ceil(len(prompt_sizes) * max_tokens * pricing.expected_output_fraction)
    return CostEstimate(len(prompt_sizes), input_tokens, output_tokens, usd(input_tokens, output_tokens, pricing),
                        pricing.checked, simulated_as)


def simulated_as(model: ModelConfig) -> str | None:
    """The model name a simulated backend's costs are priced as; None for a real backend."""
    return model.name if model.backend == "sim" else None


def check_budget(cost: CostEstimate, max_cost_usd: float, *, cap: str = "pool.max_cost_usd",
                 levers: str = "pool.n_pool or decoding.max_tokens") -> None:
    """BudgetError when the estimate exceeds `max_cost_usd`, naming the `cap` key and what lowers the cost."""
    if cost.usd > max_cost_usd:
        raise BudgetError(
            f"refusing to build: the estimate is over {cap} (${max_cost_usd:.2f}): {cost.render()}. "
            f"Raise {cap} in params.yaml (it is not a pipeline param, so changing it re-runs "
            f"nothing), or lower {levers}.")
