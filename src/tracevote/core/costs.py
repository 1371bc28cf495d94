"""What calls cost, before and after: prompt sizes as tokens, tokens as dollars at an endpoint's prices, and
dollars as text. Pure arithmetic on core's PricingConfig, so every method's estimate and the paid-call guard
(tracevote.sampling.budget) share it."""

from __future__ import annotations

import math
from dataclasses import dataclass

from tracevote.core.config_endpoints import ModelConfig, PricingConfig

# A deliberately pessimistic tokenizer stand-in: real BPE tokenizers average 3.5-4.5 bytes per token.
BYTES_PER_PROMPT_TOKEN = 3.0
CHAT_TEMPLATE_TOKENS = 16


SMALLEST_USD = 1e-9  # below any real call (one token at $0.028/M is 2.8e-8): a float's residue, shown as $0


def money(usd: float) -> str:
    """Every dollar amount the project prints, at a precision that never hides a small one: "$12.35", "$1.00",
    "$0.0075", "$0.00012", "$0"; sums under SMALLEST_USD (what subtracting floats leaves, 2.4e-19) are "$0"."""
    if usd >= 1:
        return f"${usd:,.2f}"
    if usd < SMALLEST_USD:
        return "$0"
    decimals = max(4, 1 - math.floor(math.log10(usd)))  # 2 significant digits, at least 4 decimals
    return f"${usd:.{decimals}f}"


def prompt_bytes(messages: list[dict[str, str]]) -> int:
    """UTF-8 size of every message's content, system prompt included: what cost estimates count."""
    return sum(len(message["content"].encode()) for message in messages)


def worst_case_usd(messages: list[dict[str, str]], max_tokens: int, pricing: PricingConfig) -> float:
    """A call's most possible cost: its prompt at the cache-miss price (tokens counted pessimistically, see
    prompt_tokens), every one of max_tokens at the output price."""
    return usd(prompt_tokens(prompt_bytes(messages)), max_tokens, pricing)


@dataclass(frozen=True)
class CostEstimate:
    requests: int
    input_tokens: int
    output_tokens: int
    usd: float
    prices_checked: str
    simulated_as: str | None = None  # the model a simulated build stands in for; None for a real one

    def plus(self, other: CostEstimate) -> CostEstimate:
        """Both estimates together (two endpoints of one stage: the debate's agents and judge)."""
        if not other.requests:
            return self
        if not self.requests:
            return other
        checked = self.prices_checked if other.prices_checked == self.prices_checked else \
            f"{self.prices_checked} and {other.prices_checked}"
        return CostEstimate(self.requests + other.requests, self.input_tokens + other.input_tokens,
                            self.output_tokens + other.output_tokens, self.usd + other.usd, checked,
                            self.simulated_as)

    def render(self) -> str:
        tokens = (f"{self.requests} requests, ~{self.input_tokens / 1e6:.2f}M input and up to "
                  f"{self.output_tokens / 1e6:.2f}M output tokens")
        if self.simulated_as is None:
            return f"{tokens}: ~{money(self.usd)} (prices checked {self.prices_checked})"
        return (f"{tokens}; cost if this were {self.simulated_as} at list prices (checked "
                f"{self.prices_checked}): ~{money(self.usd)} (SIMULATED: nothing will be spent)")


def spent_text(usd: float, simulated_as: str | None) -> str:
    """What a build has cost so far: "~$0.0042", or for a simulated build
    "cost if this were deepseek-v4-flash at list prices: ~$0.0042 (SIMULATED: nothing was spent)"."""
    amount = f"~{money(usd)}"
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

    >>> pricing = PricingConfig(checked="2026-07", input_cache_miss=0.14, input_cache_hit=0.0028, output=0.28)
    >>> round(estimate([300] * 1000, 4096, pricing).usd, 2)  # 1000 x (116 x $0.14 + 4096 x $0.28) / 1M
    1.16
    """
    input_tokens = sum(prompt_tokens(size) for size in prompt_sizes)
    output_tokens = math.ceil(len(prompt_sizes) * max_tokens * pricing.expected_output_fraction)
    return CostEstimate(len(prompt_sizes), input_tokens, output_tokens, usd(input_tokens, output_tokens, pricing),
                        pricing.checked, simulated_as)


def simulated_as(model: ModelConfig) -> str | None:
    """The model name a simulated backend's costs are priced as; None for a real backend."""
    return model.name if model.backend == "sim" else None
