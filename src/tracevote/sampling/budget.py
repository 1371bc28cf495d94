"""The spend guard: what a build will cost before it sends anything, and what it has cost so far."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from tracevote.core.config_endpoints import ModelConfig, PricingConfig
from tracevote.core.errors import TracevoteError
from tracevote.sampling.prompts import prompt_bytes

# A deliberately pessimistic tokenizer stand-in: real BPE tokenizers average 3.5-4.5 bytes per token.
BYTES_PER_PROMPT_TOKEN = 3.0
CHAT_TEMPLATE_TOKENS = 16


class BudgetError(TracevoteError):
    """The estimated cost is over pool.max_cost_usd."""


class SpendCapError(TracevoteError):
    """A call's worst case would take the run over its cap: the run stopped sending."""


def money(usd: float) -> str:
    """Dollars at a precision that never hides a small amount: "$12.35", "$1.00", "$0.0075", "$0.00012", "$0"."""
    if usd >= 1:
        return f"${usd:,.2f}"
    if usd <= 0:
        return "$0"
    decimals = max(4, 1 - math.floor(math.log10(usd)))  # 2 significant digits, at least 4 decimals
    return f"${usd:.{decimals}f}"


class SpendCap:
    """The run-time guard behind a max_cost_usd: a call starts only when what was spent, plus the worst case of
    every call in flight, plus its own worst case stays within the cap. Used from the runner's one thread."""

    def __init__(self, cap_usd: float, key: str, *, spent_usd: float = 0.0) -> None:
        self.cap_usd = cap_usd
        self.key = key
        self.spent_usd = spent_usd  # what the run paid before its calls (build_pool's probe)
        self.reserved_usd = 0.0
        self._refused = (0.0, 0)  # the worst case of the call refused, and how many calls were not sent

    def reserve(self, worst_usd: float, not_sent: Callable[[], int]) -> None:
        """Hold `worst_usd` for a call about to start, or raise SpendCapError (`not_sent` counts what is left)."""
        if self.spent_usd + self.reserved_usd + worst_usd > self.cap_usd:
            self._refused = (worst_usd, not_sent())
            raise self.stopped()
        self.reserved_usd += worst_usd

    def stopped(self) -> SpendCapError:
        """The error for a run the cap stopped, with what was spent so far (call it again once the calls in
        flight have landed, for the final figure)."""
        worst_usd, not_sent = self._refused
        in_flight = f" with {money(self.reserved_usd)} in flight" if self.reserved_usd else ""
        return SpendCapError(
            f"stopped at {self.key}: spent {money(self.spent_usd)} of {money(self.cap_usd)}{in_flight}, and the "
            f"next call could cost up to {money(worst_usd)}; {not_sent} calls not sent (replies received are "
            f"stored). Raise {self.key} in params.yaml and run the stage again: it requests only what is missing")

    def settle(self, worst_usd: float, paid_usd: float) -> None:
        """A call held at `worst_usd` came back (paid_usd spent) or failed (0)."""
        self.reserved_usd = max(0.0, self.reserved_usd - worst_usd)
        self.spent_usd += paid_usd


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
            f"refusing to build: the estimate is over {cap} ({money(max_cost_usd)}): {cost.render()}. "
            f"Raise {cap} in params.yaml (it is not a pipeline param, so changing it re-runs "
            f"nothing), or lower {levers}.")
